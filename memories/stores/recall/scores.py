"""What a search result's ``score`` means: the score recall ranked it by, on a calibrated scale.

A result's score is its rank score times one factor per search (:func:`calibrated_scale`),
set by the best result's calibrated score: a logistic of the query's and document's cosine
and term coverage (:data:`DEFAULT_CALIBRATION`), about the probability that it answers the
query (docs/memories/vector.md, "Scores").
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

__all__ = ["DEFAULT_CALIBRATION", "ScoreCalibration", "calibrated_scale", "term_coverage"]


@dataclass(frozen=True)
class ScoreCalibration:
    """A logistic map from (cosine, coverage) to a score between 0 and 1."""

    bias: float
    """Intercept when both features are used (the log-odds of a document with neither)."""
    cosine: float
    """Log-odds gained per unit of cosine similarity."""
    coverage: float
    """Log-odds gained when the document holds every query term (scaled by the share it holds)."""
    lexical_bias: float
    """Intercept when only coverage is known (recall mode ``"bm25"``: no query embedding)."""
    lexical_coverage: float
    """Log-odds per unit of coverage when only coverage is known."""

    def score(self, coverage: float, cosine: float | None = None) -> float:
        """The calibrated score of a document: ≈ the probability that it answers the query.

        Args:
            coverage: Share of the query's terms found in the document, 0 to 1.
            cosine: Cosine similarity of the query's and the document's embeddings;
                None when the query was not embedded.
        """
        if cosine is None:
            logit = self.lexical_bias + self.lexical_coverage * coverage
        else:
            logit = self.bias + self.cosine * cosine + self.coverage * coverage
        return 1.0 / (1.0 + math.exp(-logit))


#: Fitted on the LoCoMo dev split, every turn against every question (relevant when the answer
#: cites it), with the bundled MiniLM embeddings (``benchmarks/locomo.py`` refits it).
DEFAULT_CALIBRATION = ScoreCalibration(
    bias=-10.64, cosine=6.80, coverage=6.74, lexical_bias=-8.87, lexical_coverage=8.67
)


def term_coverage(query_terms: Collection[str], document_terms: Collection[str], /) -> float:
    """The share of the query's distinct terms the document holds (0 when the query has none)."""
    wanted = set(query_terms)
    if not wanted:
        return 0.0
    held = document_terms if isinstance(document_terms, set | frozenset) else set(document_terms)
    return len(wanted & held) / len(wanted)


def calibrated_scale(ranked: Sequence[float], calibrated: Sequence[float], /) -> float:
    """The factor putting a search's rank scores (``ranked``) on the calibrated scale.

    The best of the results' own calibrated scores over the best rank score: the top result
    reports the best match the search found, the others their share of it (0 without any).
    """
    top = max(ranked, default=0.0)
    return max(calibrated, default=0.0) / top if top > 0 else 0.0
