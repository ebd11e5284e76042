"""No buried matches: what a turn borrows never carries it past a turn that matches the query.

Neighbour smoothing and speaker keys add to a turn's score what it did not
earn itself. Between *utterances* (one speaker's document, as LoCoMo's
friends talk) lending finds evidence that shares no word with the question;
between *exchanges* (both sides in one document, as ``save_context`` writes
it) it buries the turns that match, so an exchange neither lends nor borrows.
Wherever lending applies, a turn that neither ranker found keeps what it
borrowed only until just below the lowest turn that one found. The figures:
docs/performance.md, "Recall across datasets".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from memories.stores.recall.types import ScoredId

__all__ = ["exchange_ids", "matches_first"]


def exchange_ids(speakers: Mapping[str, frozenset[str]] | None, /) -> set[str]:
    """The documents that hold an exchange (said by more than one speaker)."""
    return {i for i, said in speakers.items() if len(said) > 1} if speakers else set()


def matches_first(final: Sequence[ScoredId], own: Mapping[str, float], /) -> dict[str, float]:
    """The final scores, each turn that matched nothing held below every turn that matched.

    Args:
        final: Every turn's score after smoothing and boosts.
        own: The fused score of each turn a ranker found (its match of its own).

    Returns:
        Each turn's score: a found turn's unchanged; one only a neighbour reached at most
        just below the lowest score of a found turn.
    """
    found = [item.score for item in final if item.id in own]
    if not found or len(found) == len(final):
        return {item.id: item.score for item in final}
    bar = math.nextafter(min(found), -math.inf)
    return {i: s if i in own else min(s, bar) for i, s in final}
