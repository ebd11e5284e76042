"""No buried matches: what a turn borrows never carries it past a turn that matches the query.

An exchange (both sides in one document) neither lends nor borrows, and a turn no ranker
found, nor one beside it, is held just below the lowest found turn (docs/performance.md,
"Recall across datasets", says why).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

from memories.stores.recall.types import ScoredId

__all__ = ["exchange_ids", "matches_first"]


def exchange_ids(speakers: Mapping[str, frozenset[str]] | None, /) -> set[str]:
    """The documents that hold an exchange (said by more than one speaker)."""
    return {i for i, said in speakers.items() if len(said) > 1} if speakers else set()


def matches_first(final: Sequence[ScoredId], own: Collection[str], /) -> dict[str, float]:
    """The final scores, each turn not in ``own`` (the turns matching of their own: found by a
    ranker, or beside one found) held just below the lowest score of a turn in it."""
    found = [item.score for item in final if item.id in own]
    if not found or len(found) == len(final):
        return {item.id: item.score for item in final}
    bar = math.nextafter(min(found), -math.inf)
    return {i: s if i in own else min(s, bar) for i, s in final}
