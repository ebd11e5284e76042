"""Fusion of several rankings of the same documents into one."""

from __future__ import annotations

from collections.abc import Sequence

from memories.stores.recall.types import ScoredId, best_first

__all__ = ["min_max_fusion", "reciprocal_rank_fusion"]


def _weights(n_lists: int, weights: Sequence[float] | None) -> Sequence[float]:
    if weights is None:
        return [1.0] * n_lists
    if len(weights) != n_lists:
        raise ValueError(
            f"Got {len(weights)} weights for {n_lists} rankings; give one per ranking."
        )
    if any(w < 0 for w in weights):
        raise ValueError(f"Fusion weights must be >= 0, got {list(weights)!r}.")
    return weights


def min_max_fusion(
    rankings: Sequence[Sequence[ScoredId]],
    /,
    *,
    weights: Sequence[float] | None = None,
    floors: Sequence[float | None] | None = None,
) -> list[ScoredId]:
    """Fuse by a weighted sum of each ranking's scores rescaled to [0, 1].

    Within each ranking the best score maps to 1 and the floor to 0 (all to 1
    when they are equal); a document absent from a ranking gets 0 from it. The
    rankings should be candidate lists of similar depth (say the top 100 of each).

    Args:
        rankings: Scored candidates per ranker, in any order; scores need not be comparable
            across rankers.
        weights: One non-negative weight per ranking; equal weights when omitted.
        floors: Per ranking, the score of a document that does not match at all (BM25's 0),
            or None to take the ranking's worst score. With a known floor every candidate
            that matches keeps a share: rescaled from the worst candidate, the weakest
            match would get the 0 of a document absent from the ranking.

    Returns:
        Every document of any ranking, best first, ties broken by id.
    """
    fused: dict[str, float] = {}
    lows = [None] * len(rankings) if floors is None else floors
    if len(lows) != len(rankings):
        raise ValueError(f"Got {len(lows)} floors for {len(rankings)} rankings; give one each.")
    for ranking, weight, floor in zip(
        rankings, _weights(len(rankings), weights), lows, strict=True
    ):
        if not ranking:
            continue
        low = min(item.score for item in ranking) if floor is None else floor
        span = max(item.score for item in ranking) - low
        for item in ranking:
            unit = max(0.0, (item.score - low) / span) if span > 0 else 1.0
            fused[item.id] = fused.get(item.id, 0.0) + weight * unit
    return best_first(fused)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[ScoredId]],
    /,
    *,
    k: float = 60.0,
    weights: Sequence[float] | None = None,
) -> list[ScoredId]:
    """Fuse by reciprocal rank: a document scores ``sum(weight / (k + rank))``, rank from 1.

    Only the order of each ranking matters, so each must be sorted best first.

    Args:
        rankings: Ranked candidates per ranker, best first.
        k: Damping constant; smaller values favour the top of each ranking more.
        weights: One non-negative weight per ranking; equal weights when omitted.

    Returns:
        Every document of any ranking, best first, ties broken by id.
    """
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k!r}.")
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, _weights(len(rankings), weights), strict=True):
        for rank, item in enumerate(ranking, start=1):
            fused[item.id] = fused.get(item.id, 0.0) + weight / (k + rank)
    return best_first(fused)
