"""Neighbour smoothing: a turn borrows score from the turns next to it.

The answer to a question often sits one or two turns away from the turn that
matches it best (a question and its reply, a story told over several turns),
so each turn's score gains a share of its neighbours' scores.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from memories.stores.recall.types import ScoredId, best_first

__all__ = ["TurnPosition", "beside", "neighbour_positions", "smooth_neighbours"]

_DocAt = Mapping[tuple[str, int], str]


@dataclass(frozen=True, order=True)
class TurnPosition:
    """Where a turn sits: turns are neighbours when they share a session and are close in index."""

    session: str
    """The session (thread, conversation) the turn belongs to."""
    index: int
    """The turn's ordinal within its session; consecutive turns differ by one."""


def neighbour_positions(positions: Iterable[TurnPosition], /, *, window: int) -> set[TurnPosition]:
    """The positions within ``window`` turns of any given one, the given ones excluded.

    A storage layer calls this on its candidates' positions to learn which
    further turns to fetch before :func:`smooth_neighbours`.
    """
    given = set(positions)
    around = {
        TurnPosition(p.session, p.index + offset)
        for p in given
        for offset in range(-window, window + 1)
        if offset and p.index + offset >= 0
    }
    return around - given


def smooth_neighbours(
    scored: Sequence[ScoredId],
    positions: Mapping[str, TurnPosition],
    /,
    *,
    weight: float,
    window: int,
    doc_at: Mapping[tuple[str, int], str] | None = None,
    limit: int | None = None,
    alone: Collection[str] = (),
) -> list[ScoredId]:
    """Add to each turn ``weight`` times the summed scores of the turns within ``window``.

    Only turns of the same session are neighbours. A turn that is in
    ``positions`` (or ``doc_at``) but not in ``scored`` starts from 0 and
    appears in the result if a scored neighbour lends it something; a scored
    turn without a position keeps its score. Scores should be non-negative
    (e.g. fused scores).

    Args:
        scored: Candidates with their scores, in any order.
        positions: Position of every candidate, and of every neighbour turn that may be
            returned unless ``doc_at`` is given.
        weight: Share of a neighbour's score a turn receives; 0 turns smoothing off.
        window: How many turns either side count as neighbours.
        doc_at: The document at each ``(session, index)``, for a caller that keeps such
            a map up to date (a storage layer's index) rather than have it rebuilt
            from ``positions`` on every call. Neighbours are looked up here, so only
            its documents can be returned.
        limit: Return only the best ``limit`` turns (cheaper than sorting them all).
        alone: Turns that neither lend nor borrow.

    Returns:
        Candidates and reached neighbours, best first, ties broken by id.
    """
    if weight < 0 or window < 0:
        raise ValueError(f"weight and window must be >= 0, got {weight!r} and {window!r}.")
    scores = {item.id: item.score for item in scored}
    if weight and window:
        at = position_map(positions, doc_at)
        offsets = [o for o in range(-window, window + 1) if o]
        lent: dict[str, float] = {}
        for item in scored:
            position = positions.get(item.id)
            if position is None or item.score <= 0 or item.id in alone:
                continue
            session, index, share = position.session, position.index, weight * item.score
            for offset in offsets:
                neighbour = at.get((session, index + offset))
                if neighbour is not None and neighbour not in alone:
                    lent[neighbour] = lent.get(neighbour, 0.0) + share
        for doc_id, extra in lent.items():
            scores[doc_id] = scores.get(doc_id, 0.0) + extra
    return best_first(scores, limit)


def beside(
    found: Iterable[str], positions: Mapping[str, TurnPosition], doc_at: _DocAt | None = None, /
) -> set[str]:
    """The turns right before or after a found one (``doc_at`` as :func:`smooth_neighbours`)."""
    at, near = position_map(positions, doc_at), set[str]()
    for p in filter(None, map(positions.get, found)):
        near.update(filter(None, (at.get((p.session, p.index + o)) for o in (-1, 1))))
    return near


def position_map(positions: Mapping[str, TurnPosition], doc_at: _DocAt | None, /) -> _DocAt:
    """``doc_at`` if given, else the document at each ``(session, index)`` of ``positions``."""
    # Plain (session, index) keys: tuples hash and compare in C.
    return doc_at if doc_at is not None else {(p.session, p.index): i for i, p in positions.items()}
