"""Namespaces and metadata filters: the one place where isolation is enforced.

Every stored document carries its namespace's key under the reserved metadata key
``"namespace"``; a caller's filter may not name it (:func:`check_filter`) and is ANDed
with it (:func:`scoped_filter`), so no search, get or delete reaches another namespace.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from typing import Annotated, Any

from pydantic import BeforeValidator

from memories.errors import InvalidInputError
from memories.kernel.bounded_json import lone_surrogate

__all__ = [
    "NAMESPACE_KEY",
    "RESERVED_KEYS",
    "MetadataField",
    "check_filter",
    "check_metadata",
    "scoped_filter",
]

#: The metadata key holding a document's namespace.
NAMESPACE_KEY = "namespace"
#: Metadata keys a caller may neither set nor filter on.
RESERVED_KEYS = frozenset({NAMESPACE_KEY})

_LOGICAL = ("$and", "$or")
_COMPARISONS = frozenset(
    {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$contains", "$not_contains"}
)


def scoped_filter(namespace: str, where: Mapping[str, Any] | None, /) -> dict[str, Any] | None:
    """The Chroma ``where`` clause for the caller's ``where`` within namespace key ``namespace``.

    The caller's filter is checked, then ANDed with the namespace. Without one: None
    (Chroma evaluates even a filter that matches every document: 30 ms at 10,000
    documents, against 5 ms for none); a shared shard's namespace filter is added by
    ``ChromaStore._scope``.
    """
    if where is None:
        return None
    check_filter(where)
    return {"$and": [{NAMESPACE_KEY: {"$eq": namespace}}, dict(where)]}


def check_filter(where: Any, /) -> None:
    """Reject a filter that is malformed or names a reserved key, saying which part.

    Raises:
        InvalidInputError: the filter is not a Chroma ``where`` clause, or it
            names ``"namespace"`` (isolation is not the caller's to change).
    """
    _check_clause(where, "filter")


def _check_clause(clause: Any, path: str) -> None:
    if not isinstance(clause, Mapping) or not clause:
        raise InvalidInputError(
            f"{path} must be a non-empty dict such as {{'session': 's1'}} or "
            f"{{'$and': [...]}}; got {clause!r:.80}."
        )
    for key, value in clause.items():
        if not isinstance(key, str):
            raise InvalidInputError(f"{path} has a non-string key {key!r}.")
        if key in _LOGICAL:
            if not isinstance(value, list) or len(value) < 2:
                raise InvalidInputError(
                    f"{path}[{key!r}] must be a list of at least two filters; got {value!r:.80}."
                )
            for i, sub in enumerate(value):
                _check_clause(sub, f"{path}[{key!r}][{i}]")
        elif key.startswith("$"):
            raise InvalidInputError(
                f"{path} uses the operator {key!r} where a metadata key or $and / $or belongs."
            )
        elif key in RESERVED_KEYS:
            raise InvalidInputError(
                f"{path} names the reserved metadata key {key!r}. A memory only ever sees its "
                "own namespace; to search another namespace, use a memory built for it."
            )
        elif isinstance(value, Mapping) and (
            len(value) != 1 or next(iter(value)) not in _COMPARISONS
        ):
            raise InvalidInputError(
                f"{path}[{key!r}] must be a value or one comparison such as {{'$gte': 3}}; "
                f"valid operators: {', '.join(sorted(_COMPARISONS))}; got {value!r:.80}."
            )


def check_metadata(metadata: Any, /, *, what: str = "metadata") -> dict[str, Any]:
    """A copy of caller metadata that Chroma can store, or a clear error before anything is written.

    Values must be str, int, float (finite), bool, or a non-empty list of one of
    those; keys non-empty strings, none of them reserved.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"{what} must be a dict, got {type(metadata).__name__}.")
    checked: dict[str, Any] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or key.startswith(_BACKEND_PREFIXES):
            raise InvalidInputError(
                f"{what} key {key!r} must be a non-empty string that does not start with "
                f"{' or '.join(map(repr, _BACKEND_PREFIXES))} (the vector store's own keys)."
            )
        if key in RESERVED_KEYS:
            raise InvalidInputError(
                f"{what} sets the reserved key {key!r}; the memory sets it from its namespace."
            )
        if not _storable(value):
            raise InvalidInputError(
                f"{what}[{key!r}] = {value!r:.80} cannot be stored: use a str (valid UTF-8), an "
                "int within 64 bits, a finite float, a bool, or a non-empty list of one of those."
            )
        checked[key] = list(value) if isinstance(value, list | tuple) else value
    return checked


#: Key prefixes the vector store keeps for itself (Chroma rejects them when writing).
_BACKEND_PREFIXES = ("$", "#", "chroma:")
#: Stores keep integers in 64 bits; a larger one would come back as a rounded float.
_INT_RANGE = range(-(2**63), 2**63)


def _scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return value in _INT_RANGE
    return isinstance(value, str) and lone_surrogate(value) is None


def _storable(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return bool(value) and all(_scalar(v) for v in value) and len({type(v) for v in value}) == 1
    return _scalar(value)


#: A model field holding metadata for every document: checked as :func:`check_metadata` checks.
MetadataField = Annotated[dict[str, Any], BeforeValidator(partial(check_metadata, what="metadata"))]
