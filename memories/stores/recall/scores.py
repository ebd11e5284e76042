"""Calibrated scores: what a search result's ``score`` means.

Recall ranks with fused, per-query rescaled scores (:func:`rank_candidates`),
which say only which result is better *within one search*. The score a
search result carries is computed apart from that ranking, from the query
and the document alone:

- ``cosine``: the cosine similarity of their embeddings (the dense ranker's
  own measure), and
- ``coverage``: the share of the query's distinct lexical terms (stopwords
  dropped, stemmed, as BM25 sees them) found in the document's lexical text,

mapped through a fixed logistic calibration fitted on the LoCoMo dev split
(every turn of every conversation against every question; a turn is relevant
when the question's answer cites it; ``benchmarks/locomo.py`` refits it and
checks it on held-out conversations). So a score is approximately the
probability that the document is one that answers the query, reads the same
in every search and every namespace, and does not depend on the other
documents stored. With embeddings other than the bundled MiniLM the scores
stay comparable across queries and namespaces (the map is fixed), but their
reading as a probability holds for the bundled model only.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

__all__ = ["DEFAULT_CALIBRATION", "ScoreCalibration", "term_coverage"]


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


#: Fitted on the LoCoMo dev split with the bundled MiniLM embeddings (``benchmarks/locomo.py``).
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
