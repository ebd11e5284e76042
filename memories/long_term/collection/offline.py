"""What a collection keeps from the user's messages when it has no model: statements, by rules.

Each sentence of the user's is inserted, unless it is a question, a request or
a greeting, or it corrects an earlier one ("actually", "switched"...): then it
updates the related memory sharing most topic words with it (the rules, in
docs/memories/collection.md). The related memories are those a model would be
shown; a correction of a sentence inserted in the same batch replaces that insert.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from memories.long_term.collection.extraction import Operation
from memories.stores.recall.text import Analyzer
from memories.stores.vector.records import SearchResult

__all__ = ["offline_operations", "statements"]

#: Words that say a sentence replaces what was true before.
_CORRECTION = re.compile(
    r"\b(actually|now|instead|switched|switch|changed|change|moved|no longer|anymore|"
    r"any more|these days|lately|nowadays|not any)\b",
    re.I,
)
#: An opening that adds nothing to the fact after it.
_OPENING = re.compile(r"^(?:actually|oh|well|so|also|anyway|by the way|btw|and)\b[,!:]?\s+", re.I)
#: Sentences that open a question or a request to the assistant.
_ASKING = re.compile(
    r"^(?:can|could|would|will|shall|should)\s+(?:you|we)\b|^(?:please|remind|tell|show)\b"
    r"|^(?:what|who|whom|whose|where|when|why|how|which|do|does|did|is|are|am)\b",
    re.I,
)
#: Words of greetings, thanks and acknowledgements, which are not facts alone.
_SMALL_TALK = frozenset(
    """hi hello hey hiya thanks thank you ok okay bye goodbye good morning evening night great
    cool yes no sure nice wow""".split()  # noqa: SIM905
)
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


def statements(text: str) -> list[str]:
    """The sentences of a user's message that state something (questions, small talk left out)."""
    kept = []
    for sentence in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
        words = [w.casefold() for w in _WORD.findall(sentence)]
        if not words or sentence.endswith("?") or _ASKING.match(sentence):
            continue
        if all(word in _SMALL_TALK for word in words):
            continue
        fact = _OPENING.sub("", sentence)
        kept.append(fact if fact == sentence else fact[:1].upper() + fact[1:])
    return kept


#: Recall's own analysis (stopwords, stems), so "drinks" meets "drink".
_ANALYZER = Analyzer(stopwords="nltk", stem=True, min_length=3)


def _topics(text: str) -> set[str]:
    """A text's content words (stemmed), less the words that mark a correction."""
    return {term for term in _ANALYZER.terms(_CORRECTION.sub(" ", text)) if "'" not in term}


def offline_operations(
    messages: Sequence[str], shown: Sequence[SearchResult], check: Callable[[str], Any]
) -> list[Operation]:
    """The operations the rules above propose for the user's ``messages`` (oldest first).

    Args:
        messages: the text of each of the user's messages in the batch.
        shown: the current memories most related to the batch, best first.
        check: the collection's content check (raises InvalidInputError).
    """
    operations: list[Operation] = []
    touched: set[str] = set()
    for text in messages:
        for sentence in statements(text):
            content = check(sentence)
            target = _corrected(sentence, shown, operations, touched)
            if isinstance(target, int):  # an insert of this batch: it says this now
                operations[target] = Operation("insert", content)
            elif target is not None:
                operations.append(Operation("update", content, target))
                touched.add(target)
            else:
                operations.append(Operation("insert", content))
    return operations


def _corrected(
    sentence: str,
    shown: Sequence[SearchResult],
    operations: Sequence[Operation],
    touched: set[str],
) -> str | int | None:
    """What ``sentence`` corrects: a shown memory's id, an earlier insert's index, or None."""
    if not _CORRECTION.search(sentence):
        return None
    topics = _topics(sentence)
    candidates: list[tuple[int, int, str | int]] = []
    for rank, result in enumerate(shown):
        if result.id not in touched:
            candidates.append((len(topics & _topics(result.text)), -rank, result.id))
    for index, earlier in enumerate(operations):
        if earlier.op == "insert":
            candidates.append((len(topics & _topics(str(earlier.content))), index, index))
    # Most topic words shared; then the better ranked shown memory, or the latest insert.
    best = max(candidates, default=(0, 0, 0), key=lambda c: (c[0], c[1]))
    return best[2] if best[0] > 0 else None
