"""Storage-independent recall: lexical BM25, rank fusion, neighbour smoothing, speaker keys.

A vector memory gathers two candidate lists for a query -- its store's nearest
neighbours and :class:`BM25Index` hits -- plus the positions of those turns and
their neighbours and the speakers of its turns, and hands them to
:func:`rank_candidates` with a :class:`RecallConfig`; :func:`rank_parts` says
why each result ranked (its dense, lexical and neighbour parts). What a result's score
means is :mod:`memories.stores.recall.scores`'s: the rank score on a calibrated scale.
"""

from memories.stores.recall.config import RecallConfig, RecallMode
from memories.stores.recall.fusion import min_max_fusion, reciprocal_rank_fusion
from memories.stores.recall.lexical import BM25Index
from memories.stores.recall.neighbours import TurnPosition, neighbour_positions, smooth_neighbours
from memories.stores.recall.ranking import rank_candidates, rank_parts
from memories.stores.recall.speakers import boost_speakers, named_speakers, speaker_key
from memories.stores.recall.text import LUCENE_STOPWORDS, NLTK_STOPWORDS, Analyzer
from memories.stores.recall.types import RankParts, ScoredId

__all__ = [
    "LUCENE_STOPWORDS",
    "NLTK_STOPWORDS",
    "Analyzer",
    "BM25Index",
    "RankParts",
    "RecallConfig",
    "RecallMode",
    "ScoredId",
    "TurnPosition",
    "boost_speakers",
    "min_max_fusion",
    "named_speakers",
    "neighbour_positions",
    "rank_candidates",
    "rank_parts",
    "reciprocal_rank_fusion",
    "smooth_neighbours",
    "speaker_key",
]
