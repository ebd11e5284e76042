"""The calibrated score of each search result (see :mod:`memories.stores.recall.scores`).

A backend ranks with :func:`~memories.stores.recall.rank_candidates`, reads the
ranked documents, and hands them here with their rank scores and what it
knows of their cosine similarity to the query; each result gets its rank
score on the calibrated scale, so the scores keep the order the ranking gave.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from memories.errors import InvalidInputError
from memories.stores.recall import RecallConfig, ScoredId, rank_candidates, scores
from memories.stores.recall.scores import DEFAULT_CALIBRATION, term_coverage
from memories.stores.recall.types import RankParts, best_first
from memories.stores.vector.recall_index import document_date
from memories.stores.vector.records import SearchResult

__all__ = ["calibrated", "check_min_score", "cosines", "passing", "read_first", "search_texts"]

#: Texts held in hand by id, each with its embedding.
_Held = Mapping[str, tuple[str, Sequence[float]]]


def cosines(query: Sequence[float], vectors: Mapping[str, Sequence[float]], /) -> dict[str, float]:
    """The cosine similarity of each vector to the query vector."""
    if not vectors:
        return {}
    ids = list(vectors)
    matrix = np.asarray([vectors[i] for i in ids], dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(q))
    similarity = (matrix @ q) / np.where(norms > 0, norms, 1.0)
    return dict(zip(ids, similarity.tolist(), strict=True))


def read_first(
    fetched: Mapping[str, list[float]], more: Callable[[list[str]], dict[str, list[float]]], /
) -> Callable[[list[str]], dict[str, list[float]]]:
    """A ``vectors_of`` for :func:`calibrated`: embeddings read with the results, then ``more``."""

    def vectors_of(ids: list[str]) -> dict[str, list[float]]:
        rest = [i for i in ids if i not in fetched]
        known = {i: fetched[i] for i in ids if i in fetched}
        return {**known, **more(rest)} if rest else known

    return vectors_of


def calibrated(
    results: Sequence[SearchResult],
    query: str,
    config: RecallConfig,
    /,
    *,
    vector: Sequence[float] | None,
    dense: Iterable[ScoredId] = (),
    vectors_of: Callable[[list[str]], Mapping[str, Sequence[float]]] | None = None,
    ranking: Mapping[str, RankParts] | None = None,
) -> list[SearchResult]:
    """The results, in the same order, their rank scores put on the calibrated scale.

    Args:
        results: Ranked documents, each with the score recall ranked it by.
        query: The query's text.
        config: The recall settings (the lexical analyzer and dates they index with).
        vector: The query's embedding; None when it was not embedded (``"bm25"`` mode),
            and the calibration then uses term coverage alone.
        dense: Cosine similarities already known (the dense candidates).
        vectors_of: Fetches the embeddings of the results whose cosine is not known.
        ranking: Each result's dense, lexical and neighbour parts of its rank score; they
            are put on the same scale, so they add up to the result's score.
    """
    known: dict[str, float] = {}
    if vector is not None:
        known = {item.id: item.score for item in dense}
        missing = [r.id for r in results if r.id not in known]
        if missing and vectors_of is not None:
            known.update(cosines(vector, vectors_of(missing)))
    analyzer = config.analyzer()
    query_terms = set(analyzer.terms(query))
    texts = [config.lexical_text(r.text, when=document_date(r.metadata)) for r in results]
    own = [
        DEFAULT_CALIBRATION.score(
            term_coverage(query_terms, set(analyzer.terms(text))),
            known.get(result.id) if vector is not None else None,
        )
        for result, text in zip(results, texts, strict=True)
    ]
    scale = scores.calibrated_scale([r.score for r in results], own)
    scored = []
    for result in results:
        parts = ranking.get(result.id) if ranking is not None else result.ranking
        parts = None if parts is None else RankParts(*(part * scale for part in parts))
        scored.append(replace(result, score=result.score * scale, ranking=parts))
    return scored


def search_texts(
    config: RecallConfig, query: str, vector: Sequence[float], held: _Held, *, k: int
) -> list[SearchResult]:
    """The best ``k`` of a few (text, embedding) pairs held in hand, ranked as a live search."""
    n = max(config.candidates, k)
    cos = cosines(vector, {i: v for i, (_, v) in held.items()}) if config.uses_dense else {}
    dense = best_first(cos)
    index = config.lexical_index()
    index.add_many("held", ((i, text) for i, (text, _) in held.items()))
    lexical = index.search("held", query, limit=n) if config.uses_lexical else []
    ranked = rank_candidates(config, dense=dense[:n], lexical=lexical, limit=k)
    found = [SearchResult(held[s.id][0], {}, s.score, s.id) for s in ranked]
    return calibrated(found, query, config, vector=vector if cos else None, dense=dense)


def check_min_score(value: object, /, *, cosine: bool = False) -> float:
    """``value`` as a score floor: of a calibrated score, or with ``cosine`` a cosine similarity.

    Raises:
        InvalidInputError: not a number from 0 to 1 (from -1 to 1 with ``cosine``).
    """
    low, scale = (-1.0, "a cosine similarity") if cosine else (0.0, "a calibrated score")
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= 1.0:
        raise InvalidInputError(
            f"min_score must be a number from {low:g} to 1 ({scale}), got {value!r}."
        )
    return float(value)


def passing(results: list[SearchResult], min_score: float, /) -> list[SearchResult]:
    """The results scoring at least ``min_score``, in their order."""
    if min_score <= 0:
        return results
    return [r for r in results if r.score >= min_score]
