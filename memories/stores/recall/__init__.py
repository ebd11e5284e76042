"""Storage-independent recall: lexical BM25, rank fusion, neighbour smoothing, speaker keys.

A store hands its nearest neighbours and :class:`BM25Index` hits, with their turns'
positions and speakers, to :func:`rank_candidates`; :func:`rank_parts` says why each ranked.
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
