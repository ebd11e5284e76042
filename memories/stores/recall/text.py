"""Text analysis for lexical recall: lower-casing, word splitting, stopwords, stemming."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import Any, Literal

from memories.errors import ConfigError, MissingDependencyError

__all__ = ["LUCENE_STOPWORDS", "NLTK_STOPWORDS", "Analyzer"]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Lucene's 33 English stopwords (the list bm25s calls "english").
LUCENE_STOPWORDS: frozenset[str] = _words(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with"
)

#: NLTK's English stopwords: also drops pronouns, auxiliaries and question words
#: ("what", "when", "did"), which is what makes questions match statements.
NLTK_STOPWORDS: frozenset[str] = _words(
    "a about above after again against ain all am an and any are aren aren't as at be because "
    "been before being below between both but by can couldn couldn't d did didn didn't do "
    "does doesn doesn't doing don don't down during each few for from further had hadn hadn't "
    "has hasn hasn't have haven haven't having he her here hers herself him himself his how i "
    "if in into is isn isn't it it's its itself just ll m ma me mightn mightn't more most "
    "mustn mustn't my myself needn needn't no nor not now o of off on once only or other our "
    "ours ourselves out over own re s same shan shan't she she's should should've shouldn "
    "shouldn't so some such t than that that'll the their theirs them themselves then there "
    "these they this those through to too under until up ve very was wasn wasn't we were "
    "weren weren't what when where which while who whom why will with won won't wouldn "
    "wouldn't y you you'd you'll you're you've your yours yourself yourselves"
)

_STOPWORD_SETS: dict[str, frozenset[str]] = {
    "none": frozenset(),
    "lucene": LUCENE_STOPWORDS,
    "nltk": NLTK_STOPWORDS,
}

StopwordSet = Literal["none", "lucene", "nltk"]

# Apostrophes are kept inside a word so that "don't" meets the stopword list
# whole; possessive "'s" is split off below.
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


@lru_cache(maxsize=1)
def _english_stemmer() -> Any:
    try:
        import Stemmer
    except ImportError as exc:
        raise MissingDependencyError(
            "Stemming for lexical recall", "pip install 'chat-memories[chroma]'"
        ) from exc
    return Stemmer.Stemmer("english")


@dataclass(frozen=True)
class Analyzer:
    """Turns text into index terms; the same analyzer must serve documents and queries."""

    stopwords: StopwordSet = "nltk"
    """Which stopword list to drop: ``"none"``, ``"lucene"`` (33 words) or ``"nltk"`` (179)."""
    stem: bool = True
    """Reduce words to their Snowball English stem (needs PyStemmer)."""
    min_length: int = 1
    """Drop terms shorter than this many characters (after stopword removal)."""

    def __post_init__(self) -> None:
        if self.stopwords not in _STOPWORD_SETS:
            valid = ", ".join(sorted(_STOPWORD_SETS))
            raise ConfigError(f"Unknown stopword list {self.stopwords!r}; use one of: {valid}.")

    def terms(self, text: str, /) -> list[str]:
        """Return the index terms of ``text`` in order, with repeats."""
        return self._analysed(_split(text))

    def query_terms(self, text: str, /) -> list[str]:
        """A query's :meth:`terms`, then each two adjacent words written as one.

        Chat text spells a compound open or closed ("ice cream", "icecream";
        "video game", "videogame"), so the query "ice cream" also asks for
        "icecream"; a pair with a stopword never joins.
        """
        words, stop = _split(text), _STOPWORD_SETS[self.stopwords]
        return self._analysed(words + [a + b for a, b in pairwise(words) if not stop & {a, b}])

    def _analysed(self, words: list[str]) -> list[str]:
        # Comprehensions, not a loop over matches: every turn and every rebuild runs this.
        stop, shortest = _STOPWORD_SETS[self.stopwords], self.min_length
        words = [word for word in words if word not in stop and len(word) >= shortest]
        if self.stem and words:
            return _english_stemmer().stemWords(words)
        return words


def _split(text: str) -> list[str]:
    """The lower-cased words of ``text``, a possessive "'s" split off."""
    lowered = text.lower().replace("\u2019", "'")
    words = _WORD.findall(lowered)
    return [word.removesuffix("'s") for word in words] if "'s" in lowered else words
