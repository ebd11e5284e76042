"""Fusion of several rankings of the same documents into one."""

from __future__ import annotations

from collections.abc import Sequence

from memories.stores.recall.types import ScoredId

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


def _sorted(scores: dict[str, float]) -> list[ScoredId]:
    # Ties go to the smaller id, so the order never depends on the order of the inputs.
    return [ScoredId(i, s) for i, s in sorted(scores.items(), key=lambda item: (-item[1], item[0]))]


def min_max_fusion(
    rankings: Sequence[Sequence[ScoredId]], /, *, weights: Sequence[float] | None = None
) -> list[ScoredId]:
    """Fuse by a weighted sum of each ranking's scores rescaled to [0, 1].

    Within each ranking the best score maps to 1 and the worst to 0 (all to 1
    when they are equal); a document absent from a ranking gets 0 from it. The
    rankings should be candidate lists of similar depth (say the top 100 of each).

    Args:
        rankings: Scored candidates per ranker, in any order; scores need not be comparable
            across rankers.
        weights: One non-negative weight per ranking; equal weights when omitted.

    Returns:
        Every document of any ranking, best first, ties broken by id.
    """
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, _weights(len(rankings), weights), strict=True):
        if not ranking:
            continue
        low = min(item.score for item in ranking)
        span = max(item.score for item in ranking) - low
        for item in ranking:
            unit = (item.score - low) / span if span > 0 else 1.0
            fused[item.id] = fused.get(item.id, 0.0) + weight * unit
    return _sorted(fused)


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
    return _sorted(fused)
