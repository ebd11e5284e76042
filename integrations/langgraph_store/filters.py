"""LangGraph's filter and namespace semantics, as pure functions the adapters share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.store.base import (
    Item,
    ListNamespacesOp,
    MatchCondition,
    SearchItem,
)

from memories.kernel.times import utc as timestamp

__all__ = [
    "Namespace",
    "matches_all",
    "matches_filter",
    "namespace_tuple",
    "search_item",
    "select_namespaces",
    "timestamp",
]

Namespace = tuple[str, ...]

# Order comparisons are numeric, as in LangGraph's stores (PostgreSQL JSONB semantics).
_OPERATORS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: float(a) > float(b),
    "$gte": lambda a, b: float(a) >= float(b),
    "$lt": lambda a, b: float(a) < float(b),
    "$lte": lambda a, b: float(a) <= float(b),
}


def matches_filter(value: Any, condition: Any) -> bool:
    """Whether a stored value meets a ``search(filter=...)`` condition, as LangGraph compares.

    A dict of ``$`` operators applies each; another dict matches fields
    recursively; a list matches element by element; anything else by equality.
    """
    if isinstance(condition, Mapping):
        if any(str(k).startswith("$") for k in condition):
            unknown = [k for k in condition if k not in _OPERATORS]
            if unknown:
                raise ValueError(
                    f"Unknown filter operators {unknown}; use {', '.join(_OPERATORS)}."
                )
            try:
                return all(_OPERATORS[k](value, v) for k, v in condition.items())
            except (TypeError, ValueError):
                # Not a number: LangGraph's in-memory store raises here; no match is kinder.
                return False
        return isinstance(value, Mapping) and all(
            matches_filter(value.get(k), v) for k, v in condition.items()
        )
    if isinstance(condition, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(condition)
            and all(matches_filter(a, b) for a, b in zip(value, condition, strict=True))
        )
    return bool(value == condition)


def matches_all(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    """Whether a value meets every field condition of a ``search(filter=...)``.

    A field is a key of the value, or a dotted path into it (``"user.access-level"``),
    as LangGraph's SQL stores read it; a key that holds the dots itself comes first.
    """
    return all(matches_filter(_field(value, k), v) for k, v in (conditions or {}).items())


def _field(value: Mapping[str, Any], key: str) -> Any:
    if key in value or "." not in key:
        return value.get(key)
    found: Any = value
    for part in key.split("."):
        if not isinstance(found, Mapping) or part not in found:
            return None
        found = found[part]
    return found


def _matches(condition: MatchCondition, namespace: Namespace) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True)) if path else True


def select_namespaces(namespaces: Iterable[Namespace], op: ListNamespacesOp) -> list[Namespace]:
    """The namespaces a ``list_namespaces`` call asks for: matched, cut to depth, sorted, paged."""
    found = [ns for ns in namespaces if all(_matches(c, ns) for c in op.match_conditions or ())]
    if op.max_depth is not None:
        found = [ns[: op.max_depth] for ns in found]
    return sorted(set(found))[op.offset : op.offset + op.limit]


def search_item(item: Item, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=score,
    )


def namespace_tuple(key: str) -> Namespace:
    """The namespace a key names: ``"a/b%2Fc"`` -> ``("a", "b/c")`` (see ``namespace_key``)."""
    return tuple(label.replace("%2F", "/").replace("%25", "%") for label in key.split("/"))
