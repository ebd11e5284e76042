"""What an item is found by: LangGraph's index configuration and the texts of a value's fields.

Each text a value's fields hold is embedded separately, and an item is as near a
query as its nearest text, as in LangGraph's stores; the fields are LangGraph's
paths, read with its own helpers (the docs' "LangGraph store: indexing and scores").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

from langchain_core.embeddings import Embeddings
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from memories.errors import InvalidInputError
from memories.kernel.checks import whole_number

__all__ = ["SCORES", "Index", "Score", "checked_index", "checked_score", "part_id", "texts_of"]

#: How a query search scores items: ``"calibrated"`` (ours: recall's order on a scale where
#: the best item's is about the probability that it answers) or ``"cosine"`` (LangGraph's:
#: the cosine similarity of the query's embedding and the item's nearest text's).
Score = Literal["calibrated", "cosine"]
SCORES: tuple[Score, ...] = ("calibrated", "cosine")

_INDEX_KEYS = frozenset({"dims", "embed", "fields", "text_fields", "distance_type"})


class Index(NamedTuple):
    """An adapter's index configuration, checked."""

    embeddings: Embeddings | None
    """The embeddings ``embed`` names (None: the memory's own)."""
    fields: tuple[str, ...] | None
    """The value fields embedded by default (None: the adapter's ``text_field``)."""


def checked_index(index: Mapping[str, Any] | None) -> Index:
    """LangGraph's ``IndexConfig`` (or its SQLite store's) read and checked.

    Raises:
        InvalidInputError: an unknown key, a bad ``dims`` or ``fields``, or a
            ``distance_type`` other than ``"cosine"`` (the memory's store is cosine).
    """
    if index is None:
        return Index(None, None)
    if not isinstance(index, Mapping) or set(index) - _INDEX_KEYS:
        raise InvalidInputError(
            f"index must be LangGraph's IndexConfig, a dict with keys among "
            f"{sorted(_INDEX_KEYS)}; got {index!r:.80}."
        )
    dims = index.get("dims")
    if dims is not None:
        whole_number(dims, "index['dims']", least=1, error=InvalidInputError)
    if index.get("distance_type", "cosine") != "cosine":
        raise InvalidInputError(
            f"index['distance_type']={index['distance_type']!r:.40}: the memory's store ranks "
            "by cosine distance only; leave it out or give 'cosine'."
        )
    fields = index.get("fields", index.get("text_fields"))
    embed = index.get("embed")
    return Index(
        ensure_embeddings(embed) if embed is not None else None,
        _checked_fields(fields, "index['fields']") if fields is not None else None,
    )


def checked_score(score: Any) -> Score:
    """``score`` if it names a way of scoring (:data:`SCORES`)."""
    if score not in SCORES:
        raise InvalidInputError(f"score must be one of {list(SCORES)}; got {score!r:.80}.")
    return score


def _checked_fields(fields: Any, what: str) -> tuple[str, ...]:
    if isinstance(fields, str):
        fields = [fields]
    if not isinstance(fields, Sequence) or not all(isinstance(f, str) and f for f in fields):
        raise InvalidInputError(f"{what} must be a list of field paths; got {fields!r:.80}.")
    for field in fields:
        if field != "$":
            tokenize_path(field)  # a malformed path fails here, not at the first put
    return tuple(fields)


def texts_of(
    value: Mapping[str, Any], index: Any, default: tuple[str, ...] | None
) -> list[str] | None:
    """The texts ``value`` is embedded by, for a put's ``index``; None: the caller's own text.

    ``index=False`` gives none (the item is stored, not embedded); a list of
    fields gives theirs; None (or True) the ``default`` fields, or None when
    there are none. A field holding several texts (a list) gives each; a
    missing field gives none.
    """
    if index is False:
        return []
    fields = _checked_fields(index, "put(index=...)") if index not in (None, True) else default
    if fields is None:
        return None
    texts: list[str] = []
    for field in fields:
        texts.extend(get_text_at_path(value, "$" if field == "$" else tokenize_path(field)))
    return [text for text in texts if text]


def part_id(key: str, part: int) -> str:
    """The document id of an item's ``part``-th text after its first (its own id is the key)."""
    return f"{key}\x1f{part}"
