"""Speaker keys: a turn said by the person a query asks about ranks higher.

Each turn is keyed by its speakers, and a query that names exactly one known speaker
multiplies the score of that speaker's turns: on LoCoMo dev, such a question's evidence
was all said by that speaker in 548 of 576 questions (docs/performance.md).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from itertools import pairwise

from memories.stores.recall.types import ScoredId

__all__ = ["boost_speakers", "named_speakers", "speaker_key"]

# A word, with its possessive ending kept so that "Caroline's" can be told apart.
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")


def speaker_key(name: str, /) -> str:
    """How a speaker's name is compared: case-folded, surrounding space removed."""
    return name.strip().casefold()


def named_speakers(query: str, known: Collection[str], /) -> frozenset[str]:
    """The speaker keys (see :func:`speaker_key`) that ``query`` names as a person, not an owner.

    A name counts when it is a whole word (or two consecutive words) of the
    query; ``"Caroline's"`` does not name Caroline as the one who spoke.
    """
    if not known:
        return frozenset()
    words = [w.casefold().replace("\u2019", "'") for w in _WORD.findall(query)]
    found = {w for w in words if w in known}
    found.update(f"{a} {b}" for a, b in pairwise(words) if f"{a} {b}" in known)
    return frozenset(found)


def boost_speakers(
    scored: Sequence[ScoredId],
    speakers: Mapping[str, frozenset[str]],
    named: frozenset[str],
    /,
    *,
    weight: float,
) -> list[ScoredId]:
    """Multiply by ``1 + weight`` the scores of turns said by the one speaker the query names.

    Nothing changes unless exactly one speaker is named (a question about two
    people is answered by both) or when ``weight`` is 0.

    Args:
        scored: Candidates with non-negative scores, in any order.
        speakers: The speaker keys of each turn that has them.
        named: What :func:`named_speakers` found in the query.
        weight: How much a named speaker's turn gains, as a share of its score.

    Returns:
        The candidates rescored, in the order given.
    """
    if weight < 0:
        raise ValueError(f"weight must be >= 0, got {weight!r}.")
    if len(named) != 1 or not weight:
        return list(scored)
    factor, empty = 1.0 + weight, frozenset[str]()
    return [
        ScoredId(item.id, item.score * factor) if named & speakers.get(item.id, empty) else item
        for item in scored
    ]
