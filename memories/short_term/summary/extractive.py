"""An offline summarizer that needs no model: it extracts, it does not write.

Used when no ``llm`` is given: it scores the sentences of the summary and the
folded turns by TF-IDF (a small boost for numbers and names, a mild one for
newer and human sentences) and keeps the best that fit the token budget,
skipping near duplicates, in order, each quoted with its speaker
(``The human said: "I live in Lyon."``). Deterministic; it cannot paraphrase
or resolve "it" and "she" (use an LLM for that).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage, SystemMessage

from memories.kernel.tokens import TiktokenCounter, TokenCounter

__all__ = ["ExtractiveSummarizer"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_-]*|[^\W\d_]{2,}")
_MAX_WORDS = 80
_DUPLICATE_OVERLAP = 0.7

# One string, split: a list literal of 170 words would fill the page.
_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing don down during each few for
    from further had has have having he her here hers herself him himself his how i if in into
    is it its itself just let me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves i'm you're it's that's i've i'll i'd we're they're don't can't
    won't isn't aren't also yes ok okay sure thanks thank please hi hello hey well really
    oh sounds great good nice like get got one know think want""".split()  # noqa: SIM905
)


@dataclass(frozen=True)
class _Sentence:
    position: int
    speaker: str
    text: str
    terms: frozenset[str]
    salient: frozenset[str]
    """Terms written as a number or a capitalised word inside the sentence (likely names)."""
    human: bool

    @property
    def line(self) -> str:
        return f'The {self.speaker} said: "{self.text}"' if self.speaker else self.text


@dataclass(frozen=True)
class ExtractiveSummarizer:
    """Summarizes by keeping the most informative sentences within ``max_tokens``.

    Args:
        max_tokens: the token budget of the summary it returns.
        token_counter: how tokens are counted (the memory passes its own).
    """

    max_tokens: int = 500
    token_counter: TokenCounter = field(default_factory=TiktokenCounter)

    def __call__(
        self,
        messages: Sequence[BaseMessage],
        existing_summary: str,
        /,
        *,
        human_prefix: str = "Human",
        ai_prefix: str = "AI",
    ) -> str:
        """The new summary: the best sentences of ``existing_summary`` and ``messages``."""
        if not messages:
            return existing_summary
        sentences = _summary_sentences(existing_summary, human_prefix)
        for message in messages:
            speaker = _speaker(message, human_prefix, ai_prefix)
            for text in _split(str(message.text)):
                sentences.append(_sentence(len(sentences), speaker, text, message.type == "human"))
        if not sentences:
            return existing_summary
        scores = _scores(sentences)
        chosen: list[_Sentence] = []
        used = 0
        blank = self.token_counter([SystemMessage(content="")])
        for sentence in sorted(sentences, key=lambda s: (-scores[s.position], -s.position)):
            if scores[sentence.position] <= 0:
                break
            if any(_overlap(sentence, other) >= _DUPLICATE_OVERLAP for other in chosen):
                continue
            cost = self.token_counter([SystemMessage(content=sentence.line)]) - blank + 1
            if used + cost > self.max_tokens:
                continue
            chosen.append(sentence)
            used += cost
        return "\n".join(s.line for s in sorted(chosen, key=lambda s: s.position))


def _speaker(message: BaseMessage, human_prefix: str, ai_prefix: str) -> str:
    names = {"human": human_prefix, "ai": ai_prefix, "system": "system", "tool": "tool"}
    return _named(names.get(message.type, message.type))


def _named(prefix: str) -> str:
    """How a speaker is named in a sentence: "human", "user", but "AI" stays "AI"."""
    return prefix if prefix.isupper() else prefix.lower()


#: A line of our summary: ``The human said: "..."`` (and the earlier ``Human: ...``).
_SAID = re.compile(r'^The (?P<speaker>.+?) said: "(?P<text>.*)"$')


def _split(text: str) -> list[str]:
    pieces = [piece.split() for piece in _SENTENCE_END.split(text)]
    return [" ".join(w[:_MAX_WORDS]) + (" ..." if len(w) > _MAX_WORDS else "") for w in pieces if w]


def _summary_sentences(summary: str, human_prefix: str) -> list[_Sentence]:
    """Sentences of an earlier summary: ours are one ``The human said: "..."`` per line."""
    sentences: list[_Sentence] = []
    human = _named(human_prefix)
    for line in summary.splitlines():
        said = _SAID.match(line)
        if said is not None:
            speaker, text = said["speaker"], said["text"]
        else:  # a summary written before, as "Human: ...", or by someone else
            speaker, sep, text = line.partition(": ")
            if not sep or " " in speaker.strip():
                speaker, text = "", line
            speaker = _named(speaker)
        for piece in _split(text):
            sentences.append(_sentence(len(sentences), speaker, piece, speaker == human))
    return sentences


def _sentence(position: int, speaker: str, text: str, human: bool) -> _Sentence:
    terms: set[str] = set()
    salient: set[str] = set()
    for index, match in enumerate(_WORD.finditer(text)):
        word = match.group()
        term = word.lower()
        if term in _STOPWORDS or len(term) < 2:
            continue
        terms.add(term)
        if any(c.isdigit() for c in word) or (index > 0 and word[0].isupper()):
            salient.add(term)
    return _Sentence(position, speaker, text, frozenset(terms), frozenset(salient), human)


def _scores(sentences: Sequence[_Sentence]) -> dict[int, float]:
    count = len(sentences)
    document_frequency = Counter(term for s in sentences for term in s.terms)
    scores = {}
    for s in sentences:
        if not s.terms:
            scores[s.position] = 0.0
            continue
        weight = sum(
            (math.log((count + 1) / (document_frequency[t] + 1)) + 1.0)
            * (1.5 if t in s.salient else 1.0)
            for t in s.terms
        )
        recency = 1.0 + 0.2 * s.position / count
        speaker = 1.2 if s.human else 1.0
        scores[s.position] = weight / math.sqrt(len(s.terms)) * recency * speaker
    return scores


def _overlap(a: _Sentence, b: _Sentence) -> float:
    if not a.terms or not b.terms:
        return 0.0
    return len(a.terms & b.terms) / len(a.terms | b.terms)
