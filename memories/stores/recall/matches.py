"""No buried matches: what a turn borrows never carries it past a turn that matches the query.

Neighbour smoothing and speaker keys add to a turn's score what it did not
earn itself. Measured by ``benchmarks/recall_datasets.py``:

- Between *utterances* (a document said by one person, as LoCoMo's friends
  talk: short turns, a story told over several) lending finds evidence that
  shares no word with the question: LoCoMo dev any@10 78.2 without it, 86.6
  with it; LongMemEval sessions (the user's turns) all@5 88.3 and 90.0.
- Between *exchanges* (a document holding both sides, as ``save_context``
  writes it: the question and its reply are already one document) it buries
  the turns that match: on small LongMemEval memories hit@3 58.3 with it and
  86.7 without; in the demo, "What do you know about me so far?" ranked
  above both turns that say "sugar". So an exchange neither lends nor borrows.

And wherever lending applies, a turn that neither ranker found (no lexical
hit, not among the nearest embeddings: no match of its own) keeps what it
borrowed only until just below the lowest turn that either ranker found.
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
