"""The one entry point a storage layer calls: candidates in, final ranking out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memories.stores.recall.config import RecallConfig
from memories.stores.recall.fusion import min_max_fusion, reciprocal_rank_fusion
from memories.stores.recall.matches import exchange_ids, matches_first
from memories.stores.recall.neighbours import TurnPosition, beside, smooth_neighbours
from memories.stores.recall.speakers import boost_speakers
from memories.stores.recall.types import RankParts, ScoredId, best_first

__all__ = ["rank_candidates", "rank_parts"]


def _fuse(
    config: RecallConfig, dense: Sequence[ScoredId], lexical: Sequence[ScoredId]
) -> list[ScoredId]:
    """The rankers' candidates fused as ``config`` says (best first)."""
    if config.mode == "dense":
        return min_max_fusion([dense])
    if config.mode == "bm25":
        return min_max_fusion([lexical], floors=[0.0])
    weights = [config.dense_weight, 1.0 - config.dense_weight]
    if config.fusion == "rrf":
        return reciprocal_rank_fusion([dense, lexical], k=config.rrf_k, weights=weights)
    # BM25 scores a document that matches no query term 0: every lexical hit keeps a share.
    return min_max_fusion([dense, lexical], weights=weights, floors=[None, 0.0])


def rank_parts(
    config: RecallConfig,
    /,
    *,
    dense: Sequence[ScoredId],
    lexical: Sequence[ScoredId],
    ranked: Sequence[ScoredId],
) -> dict[str, RankParts]:
    """Each ranked id's score split into its dense, lexical and neighbour parts.

    Both fusions add one term per ranking, so a ranker's part is the same
    fusion run with the other ranker empty; what the final score holds beyond
    the two is what neighbours (and a named speaker) lent.
    """
    from_dense = {s.id: s.score for s in _fuse(config, dense, [])}
    from_lexical = {s.id: s.score for s in _fuse(config, [], lexical)}
    parts = {}
    for item in ranked:
        d, lex = from_dense.get(item.id, 0.0), from_lexical.get(item.id, 0.0)
        parts[item.id] = RankParts(d, lex, max(0.0, item.score - d - lex))
    return parts


def rank_candidates(
    config: RecallConfig,
    /,
    *,
    dense: Sequence[ScoredId] = (),
    lexical: Sequence[ScoredId] = (),
    positions: Mapping[str, TurnPosition] | None = None,
    doc_at: Mapping[tuple[str, int], str] | None = None,
    speakers: Mapping[str, frozenset[str]] | None = None,
    named: frozenset[str] = frozenset(),
    limit: int = 10,
) -> list[ScoredId]:
    """Fuse the rankers' candidates, smooth over neighbours, favour a named speaker, keep the best.

    Args:
        config: Mode, fusion and smoothing settings.
        dense: Top ``config.candidates`` by embedding similarity, higher is closer (pass
            ``1 - distance`` for Chroma's cosine distances); ignored in ``"bm25"`` mode.
        lexical: Top ``config.candidates`` from :class:`~memories.stores.recall.BM25Index`;
            ignored in ``"dense"`` mode.
        positions: Session and index of the candidates and of their neighbours (see
            :func:`~memories.stores.recall.neighbour_positions`); without it there is no smoothing.
        doc_at: The document at each ``(session, index)``, kept by the caller; then
            ``positions`` need only hold the candidates (see
            :func:`~memories.stores.recall.smooth_neighbours`).
        speakers: The speaker keys of the turns (:func:`~memories.stores.recall.speaker_key`), for
            ``config.speaker_weight``; without it no turn is favoured.
        named: The speakers the query names (:func:`~memories.stores.recall.named_speakers`).
        limit: How many turns to return.

    Returns:
        Up to ``limit`` turns, best first; scores are comparable only within this result.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit!r}.")
    fused = _fuse(config, dense, lexical)
    boosting = bool(speakers) and len(named) == 1 and config.speaker_weight > 0
    smoothing = bool(positions) and config.neighbour_weight > 0 and config.neighbour_window > 0
    if not (boosting or smoothing):
        return fused[:limit]
    own, final = {item.id for item in fused}, fused
    if smoothing and positions is not None:
        alone = exchange_ids(speakers)
        weight, window = config.neighbour_weight, config.neighbour_window
        final = smooth_neighbours(
            final, positions, weight=weight, window=window, doc_at=doc_at, alone=alone
        )
        own |= beside(own - alone, positions, doc_at)
    if boosting and speakers is not None:
        final = boost_speakers(final, speakers, named, weight=config.speaker_weight)
    return best_first(matches_first(final, own), limit)
