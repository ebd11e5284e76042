"""Retrieval recall on LoCoMo, with every recall setting chosen by leave-one-conversation-out.

For each conversation every turn is stored, each question of categories 1-4
is asked, and recall-any@k / recall-all@k are reported: the share of
questions with at least one / every evidence turn among the top k.

The headline is held out: each of the five dev conversations is scored with
the settings chosen on the other four (a grid of dense weight, neighbour
weight and window, BM25 b and speaker weight, then one pass over fusion,
candidate depth, BM25 k1, stopwords, stemming and dates), pooled per
category, side by side with the previous default, BM25 only and dense only
in the same run. The same procedure on all five conversations gives the
defaults of ``RecallConfig()`` (the run warns if they differ). The
expansions tried beside it -- time-aware query expansion, a second dense
key per turn (the turn with the one before it) and fact keys made
extractively (one dense key per sentence, a turn scoring by its best key
blended with its own vector) -- are chosen the same way and reported apart.
These sections re-rank pre-computed candidates with the same pure functions
the memory calls (an exact cosine search standing in for Chroma's).

Tried and dropped before leave-one-out, since no setting reached
``RecallConfig()`` even in sample (any@10 pooled over the five
conversations, default 86.8; feedback from the default's top hits):
pseudo-relevance feedback on BM25 (RM3-like: the top 5-20 terms of the top
3-10 fused turns added to the query, the query's own terms counted 1-3
times) 81.1 to 86.6; Rocchio on the query vector (plus 0.25-1 times the
mean of the top 3-10 turns' vectors) 86.1 to 86.4; demoting a turn near one
already in the top 10 (by 10-75% per such turn, 1-3 turns either side)
65.8 to 85.9 -- evidence comes in runs of neighbouring turns; lending a
neighbour unequal shares forwards and backwards (0.25-0.75 each way) or
shares decaying with distance over 3 turns 83.9 to 86.7.

Then the shipped class end to end: a fresh ``VectorMemory()`` per
conversation (in-memory Chroma), every turn stored through ``add`` (text
``"Speaker: text [shared a photo: caption]"``, metadata session, turn,
speaker and the session date), every question asked through
``search(k=10)``; then the calibration of search scores (fitted on all five,
checked held out) and the scores of real questions against an unrelated one.

Run from the repository root::

    python benchmarks/locomo.py [path/to/locomo_dev.json] [--embedder module:attr]

It also prints the per-turn cost of the lexical index at 10,000 stored turns.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.embeddings import Embeddings

from memories.stores.recall import (
    RecallConfig,
    ScoredId,
    TurnPosition,
    named_speakers,
    neighbour_positions,
    rank_candidates,
    speaker_key,
)
from memories.stores.recall.scores import DEFAULT_CALIBRATION, ScoreCalibration, term_coverage

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data" / "locomo" / "locomo_dev.json"
DEFAULT_EMBEDDER = "default"
#: The recall defaults before they were chosen by leave-one-out (chosen on all five conversations).
PREVIOUS_DEFAULT = RecallConfig(
    mode="hybrid",
    candidates=100,
    fusion="min_max",
    dense_weight=0.4,
    rrf_k=60.0,
    neighbour_weight=0.5,
    neighbour_window=2,
    bm25_k1=1.2,
    bm25_b=0.0,
    stopwords="nltk",
    stem=True,
    lexical_dates=True,
    speaker_weight=0.0,
)
KS = (5, 10)

_EVIDENCE_ID = re.compile(r"D(\d+):(\d+)")
SCORED_CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass(frozen=True)
class Turn:
    """One utterance of a LoCoMo conversation."""

    dia_id: str
    """LoCoMo's id, ``D<session>:<turn>``."""
    session: int
    """Session number, from 1."""
    position: int
    """Index of the turn within its session, from 0."""
    speaker: str
    """Who said it."""
    text: str
    """What was said."""
    caption: str | None
    """BLIP caption of the photo shared with the turn, if any."""
    date: str
    """The session's date and time, as LoCoMo writes it."""


@dataclass(frozen=True)
class Question:
    """A question with the turns that hold its answer."""

    text: str
    """The question."""
    category: int
    """LoCoMo category: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial."""
    evidence: tuple[str, ...]
    """Well-formed evidence dia_ids that name a turn of the conversation; may be empty."""
    skipped_evidence: tuple[str, ...]
    """Evidence entries that were malformed or named no turn."""


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo sample: its turns in order and its questions."""

    sample_id: str
    """LoCoMo's sample id, e.g. ``conv-26``."""
    turns: tuple[Turn, ...]
    """Every turn, session by session."""
    questions: tuple[Question, ...]
    """Every question, all categories."""


def parse_evidence(entries: Iterable[Any], known_ids: set[str]) -> tuple[list[str], list[str]]:
    """Split raw evidence entries into valid turn ids and skipped entries.

    An entry may hold several ids separated by ``;`` or commas (``"D8:6; D9:17"``);
    each part must be exactly ``D<session>:<turn>`` and name a turn that exists.
    """
    valid: list[str] = []
    skipped: list[str] = []
    for entry in entries:
        parts = [p.strip() for p in re.split(r"[;,]", str(entry))] if entry else [""]
        for part in parts:
            if _EVIDENCE_ID.fullmatch(part) and part in known_ids:
                if part not in valid:
                    valid.append(part)
            else:
                skipped.append(part if part else str(entry))
    return valid, skipped


def _session_numbers(conversation: dict[str, Any]) -> list[int]:
    numbers = []
    for key, value in conversation.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if match and isinstance(value, list):
            numbers.append(int(match.group(1)))
    return sorted(numbers)


def load_conversations(path: Path) -> list[Conversation]:
    """Read a LoCoMo JSON file (the schema of ``locomo10.json``)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    conversations = []
    for sample in raw:
        conv = sample["conversation"]
        turns: list[Turn] = []
        for number in _session_numbers(conv):
            date = str(conv.get(f"session_{number}_date_time", ""))
            for position, turn in enumerate(conv[f"session_{number}"]):
                caption = turn.get("blip_caption")
                turns.append(
                    Turn(
                        dia_id=str(turn["dia_id"]),
                        session=number,
                        position=position,
                        speaker=str(turn["speaker"]),
                        text=str(turn["text"]),
                        caption=str(caption) if caption else None,
                        date=date,
                    )
                )
        known = {t.dia_id for t in turns}
        questions = []
        for qa in sample["qa"]:
            valid, skipped = parse_evidence(qa.get("evidence") or [], known)
            questions.append(
                Question(
                    text=str(qa["question"]),
                    category=int(qa["category"]),
                    evidence=tuple(valid),
                    skipped_evidence=tuple(skipped),
                )
            )
        conversations.append(Conversation(str(sample["sample_id"]), tuple(turns), tuple(questions)))
    return conversations


def document_text(turn: Turn, /, *, with_date: bool = False) -> str:
    """The text stored for a turn: ``"Speaker: text"``, the photo caption, optionally the date."""
    text = f"{turn.speaker}: {turn.text}"
    if turn.caption:
        text += f" [shared a photo: {turn.caption}]"
    if with_date:
        text = f"[{turn.date}] {text}"
    return text


def turn_date(turn: Turn, /) -> datetime | None:
    """The session date of a turn (``"1:56 pm on 8 May, 2023"``), or None if unreadable."""
    try:
        return datetime.strptime(turn.date, "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None


@dataclass
class SkipCounts:
    """What the scorer left out, and why."""

    malformed_entries: list[str] = field(default_factory=list)
    """Evidence entries that were malformed or named no turn (the question may still count)."""
    no_evidence: int = 0
    """Questions of a scored category left with no usable evidence."""


def scorable_questions(
    conversation: Conversation, /, skips: SkipCounts | None = None
) -> list[Question]:
    """The questions of categories 1-4 that have usable evidence; count the rest in ``skips``."""
    kept = []
    for question in conversation.questions:
        if question.category not in SCORED_CATEGORIES:
            continue
        if skips is not None:
            skips.malformed_entries.extend(question.skipped_evidence)
        if question.evidence:
            kept.append(question)
        elif skips is not None:
            skips.no_evidence += 1
    return kept


@dataclass
class RecallTally:
    """Running recall-any / recall-all counts per category for one retrieval mode."""

    ks: Sequence[int] = KS
    asked: dict[int, int] = field(default_factory=dict)
    any_hits: dict[tuple[int, int], int] = field(default_factory=dict)
    all_hits: dict[tuple[int, int], int] = field(default_factory=dict)

    def add(self, category: int, evidence: Sequence[str], ranked_ids: Sequence[str]) -> None:
        """Score one question given the retrieved ids, best first."""
        if not evidence:
            raise ValueError("A question without evidence cannot be scored; skip it first.")
        self.asked[category] = self.asked.get(category, 0) + 1
        wanted = set(evidence)
        for k in self.ks:
            found = wanted & set(ranked_ids[:k])
            if found:
                self.any_hits[category, k] = self.any_hits.get((category, k), 0) + 1
            if found == wanted:
                self.all_hits[category, k] = self.all_hits.get((category, k), 0) + 1

    def count(self, category: int | None = None) -> int:
        """Questions scored in a category, or in all when ``category`` is None."""
        return sum(self.asked.values()) if category is None else self.asked.get(category, 0)

    def rate(self, kind: str, k: int, category: int | None = None) -> float:
        """Percentage of questions hit (``kind`` "any" or "all"); ``None`` pools categories."""
        hits = self.any_hits if kind == "any" else self.all_hits
        cats = list(self.asked) if category is None else [category]
        asked = sum(self.asked.get(c, 0) for c in cats)
        return 100.0 * sum(hits.get((c, k), 0) for c in cats) / asked if asked else 0.0


# --------------------------------------------------------------------------- embeddings

Embed = Callable[[list[str]], npt.NDArray[np.float32]]


def load_embedder(spec: str, /) -> Embed:
    """Resolve ``module:attr``: a class with an ``embed(texts)`` method, or such a function.

    ``"default"`` is what ``VectorMemory()`` embeds with.
    """
    if spec == "default":
        from memories.kernel.embeddings import default_embeddings

        embeddings = default_embeddings()
        return lambda texts: np.asarray(embeddings.embed_documents(list(texts)), dtype=np.float32)
    module_name, _, attr = spec.partition(":")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise SystemExit(
            f"Cannot load the embedder {spec!r} ({exc}). Pass --embedder module:attr naming a "
            "class with an embed(texts) -> ndarray method, or such a function."
        ) from exc
    if isinstance(target, type):
        embed: Embed = target().embed
        return embed
    return target


def _normalise(vectors: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class CachedEmbeddings(Embeddings):
    """LangChain ``Embeddings`` over an ``embed(texts)`` function, remembering every text.

    The three modes store the same turns, so each text is embedded once per run.
    """

    def __init__(self, embed: Embed) -> None:
        self._embed = embed
        self._cache: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        new = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if new:
            vectors = _normalise(self._embed(new))
            self._cache.update(zip(new, vectors.tolist(), strict=True))
        return [self._cache[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def as_embed(self) -> Embed:
        """The cached function, in the ``embed(texts) -> ndarray`` form."""
        return lambda texts: np.asarray(self.embed_documents(list(texts)), dtype=np.float32)


class FreshQueries(Embeddings):
    """Documents from a cache, every query embedded anew: a search pays what it would live."""

    def __init__(self, documents: CachedEmbeddings, embed: Embed) -> None:
        self._documents = documents
        self._embed = embed

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._documents.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        vector: list[float] = _normalise(self._embed([text]))[0].tolist()
        return vector


# --------------------------------------------------------------------------- the shipped class


def turn_metadata(turn: Turn, /) -> dict[str, Any]:
    """What the benchmark stores with a turn: its place in the conversation and its date."""
    metadata: dict[str, Any] = {
        "session": str(turn.session),
        "turn": turn.position,
        "speakers": [turn.speaker],
    }
    when = turn_date(turn)
    if when is not None:
        metadata["timestamp"] = when.replace(tzinfo=UTC).timestamp()
    return metadata


def memory_recall(
    conversations: Sequence[Conversation],
    modes: dict[str, RecallConfig],
    embeddings: Embeddings,
    /,
    *,
    skips: SkipCounts | None = None,
    vectors: str | None = None,
) -> tuple[dict[str, RecallTally], float]:
    """Store each conversation in a fresh ``VectorMemory`` and ask its questions, per mode.

    ``vectors`` (a PostgreSQL URL) puts the memories on pgvector instead of Chroma.

    The first mode's memory stores the turns with ``add``; the other modes open
    memories on the same collection and namespace, which read the turns back
    from Chroma as a new process would.

    Returns:
        The tally per mode, and the seconds spent storing.
    """
    from memories.long_term.vector import VectorMemory

    tallies = {name: RecallTally() for name in modes}
    stored = 0.0
    collection = f"locomo-{uuid.uuid4().hex[:12]}"
    for conversation in conversations:
        questions = scorable_questions(conversation, skips)
        memories = {
            name: VectorMemory(
                mode="memory",
                collection=collection,
                namespace=("locomo", conversation.sample_id),
                embeddings=embeddings,
                recall=config,
                vectors=vectors,
            )
            for name, config in modes.items()
        }
        first = next(iter(memories.values()))
        started = time.perf_counter()
        first.add(
            [document_text(t) for t in conversation.turns],
            metadatas=[turn_metadata(t) for t in conversation.turns],
            ids=[t.dia_id for t in conversation.turns],
            progress=False,
        )
        stored += time.perf_counter() - started
        for name, memory in memories.items():
            for question in questions:
                found = memory.search(question.text, k=max(KS))
                tallies[name].add(question.category, question.evidence, [r.id for r in found])
        first.clear()
    return tallies, stored


# --------------------------------------------------------------------------- candidates

#: The lexical settings a BM25 ranking depends on: b, k1, stopwords, stem, dates, time expansion.
LexicalKey = tuple[float, float, str, bool, bool, bool]
#: The dense ranking a variant reads: the context key, and the weight of the sentence keys.
DenseKey = tuple[bool, float]
#: Weights of a turn's best sentence key against its whole-turn cosine, tried by leave-one-out.
SENTENCE_WEIGHTS = (0.25, 0.5, 0.75, 1.0)

#: Words that date an event in a conversation ("yesterday", "last week", "next month").
TIME_WORDS = "yesterday today tomorrow tonight last next week weekend month year ago recently"
_ABOUT_TIME = re.compile(
    r"\b(when|what (?:date|day|month|year|time)|how long|which (?:day|month|year))\b", re.I
)


def time_expanded(question: str, /) -> str:
    """Time-aware query expansion: a question about when also asks for words that date events.

    The turns that answer "when did X happen?" say when relatively ("yesterday",
    "last week"); the session date is already in every turn's lexical text
    (``RecallConfig.lexical_dates``).
    """
    return f"{question} {TIME_WORDS}" if _ABOUT_TIME.search(question) else question


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentence_keys(turn: Turn, /, *, min_words: int = 3) -> list[str]:
    """Fact keys made without a model: one text per sentence of a turn, and one for its photo.

    Each key is ``"Speaker: sentence"``; a fragment under ``min_words`` words
    ("Wow!") joins its neighbour. A turn of one sentence and no photo has one
    key, its whole text.
    """
    sentences: list[str] = []
    for part in (p.strip() for p in _SENTENCE_END.split(turn.text)):
        if not part:
            continue
        if sentences and min(len(part.split()), len(sentences[-1].split())) < min_words:
            sentences[-1] += " " + part
        else:
            sentences.append(part)
    keys = [f"{turn.speaker}: {sentence}" for sentence in sentences]
    if turn.caption:
        keys.append(f"{turn.speaker}: [shared a photo: {turn.caption}]")
    return keys if len(keys) > 1 else [document_text(turn)]


@dataclass(frozen=True)
class Variant:
    """One point of the search: a recall config, and the expansions tried beside it."""

    config: RecallConfig
    """What ``VectorMemory(recall=...)`` would be given."""
    time_expansion: bool = False
    """Questions about when are expanded with :data:`TIME_WORDS` (lexical ranking only)."""
    context_key: bool = False
    """Document expansion: a turn's dense score is the mean of its own cosine and that of a
    second key, the turn embedded with the turn before it."""
    sentence_weight: float = 0.0
    """Fact-keyed document expansion: a turn's dense score is ``1 - sentence_weight`` times its
    own cosine plus ``sentence_weight`` times the best cosine of its :func:`sentence_keys`;
    0 is off."""

    def lexical_key(self) -> LexicalKey:
        """Which BM25 ranking this variant reads."""
        c = self.config
        return (c.bm25_b, c.bm25_k1, c.stopwords, c.stem, c.lexical_dates, self.time_expansion)

    def dense_key(self) -> DenseKey:
        """Which dense ranking this variant reads."""
        return (self.context_key, self.sentence_weight)

    def label(self) -> str:
        """The settings that differ from ``RecallConfig()``, and the expansions."""
        parts = [f"{k}={v}" for k, v in self.config.overrides().items()]
        parts += ["time expansion"] * self.time_expansion + ["context key"] * self.context_key
        parts += [f"sentence keys {self.sentence_weight:g}"] * bool(self.sentence_weight)
        return ", ".join(parts) or "RecallConfig()"


@dataclass(frozen=True)
class Candidates:
    """What the storage layer hands to ``rank_candidates`` for one question."""

    category: int
    """The question's category."""
    evidence: tuple[str, ...]
    """Its evidence turn ids."""
    dense: dict[DenseKey, tuple[ScoredId, ...]]
    """Dense top-N, best first, per :meth:`Variant.dense_key`."""
    lexical: dict[LexicalKey, tuple[ScoredId, ...]]
    """BM25 top-N per lexical setting."""
    positions: dict[str, TurnPosition]
    """Positions of every candidate and of the turns around them."""
    doc_at: dict[tuple[str, int], str]
    """The turn at each (session, index), as a store's index keeps it (shared)."""
    speakers: dict[str, frozenset[str]]
    """Each turn's speaker keys (shared by the conversation's questions)."""
    named: frozenset[str]
    """The speakers the question names."""


def lexical_keys(variants: Iterable[Variant], /) -> set[LexicalKey]:
    """The BM25 rankings a set of variants needs."""
    return {v.lexical_key() for v in variants}


def gather_candidates(
    conversation: Conversation,
    questions: Sequence[Question],
    embed: Embed,
    /,
    *,
    depth: int,
    lexical: Iterable[LexicalKey],
    expansions: bool = True,
    window: int = 3,
) -> list[Candidates]:
    """Index one conversation and collect each question's candidate lists.

    With ``expansions``, also the dense rankings of the context key and of the
    sentence keys (an exact search: a turn scores by its best key, however
    many keys it has).
    """
    turns = conversation.turns
    ids = [t.dia_id for t in turns]
    doc_vectors = _normalise(embed([document_text(t) for t in turns]))
    query_vectors = _normalise(embed([q.text for q in questions]))
    whole = query_vectors @ doc_vectors.T
    similarity: dict[DenseKey, npt.NDArray[np.float32]] = {(False, 0.0): whole}
    if expansions:
        keys = [
            (document_text(turns[i - 1]) + "\n" if i and turns[i - 1].session == t.session else "")
            + document_text(t)
            for i, t in enumerate(turns)
        ]
        similarity[True, 0.0] = (whole + query_vectors @ _normalise(embed(keys)).T) / 2
        per_turn = [sentence_keys(t) for t in turns]
        owner = np.repeat(np.arange(len(turns)), [len(k) for k in per_turn])
        by_key = query_vectors @ _normalise(embed([k for ks in per_turn for k in ks])).T
        best = np.full_like(whole, -np.inf)
        np.maximum.at(best.T, owner, by_key.T)  # each turn's best key, per question
        for weight in SENTENCE_WEIGHTS:
            similarity[False, weight] = (1 - weight) * whole + weight * best
    indexes = {}
    for key in lexical:
        b, k1, stopwords, stem, dates, _ = key
        config = RecallConfig(
            bm25_b=b,
            bm25_k1=k1,
            stopwords=stopwords,
            stem=stem,
            lexical_dates=dates,  # type: ignore[arg-type]
        )
        index = config.lexical_index()
        for turn in turns:
            index.add(
                "c", turn.dia_id, config.lexical_text(document_text(turn), when=turn_date(turn))
            )
        indexes[key] = index
    all_positions = {
        t.dia_id: TurnPosition(f"{conversation.sample_id}/{t.session}", t.position) for t in turns
    }
    at = {position: doc_id for doc_id, position in all_positions.items()}
    doc_at = {(p.session, p.index): doc_id for p, doc_id in at.items()}
    speakers = {t.dia_id: frozenset({speaker_key(t.speaker)}) for t in turns}
    known = {name for names in speakers.values() for name in names}
    out = []
    for q, question in enumerate(questions):
        dense = {}
        for keyed, rows in similarity.items():
            row = rows[q]
            top = np.argsort(-row, kind="stable")[:depth]
            dense[keyed] = tuple(ScoredId(ids[i], float(row[i])) for i in top)
        lexical_hits = {}
        for key, index in indexes.items():
            text = time_expanded(question.text) if key[-1] else question.text
            lexical_hits[key] = tuple(index.search("c", text, limit=depth))
        # As a store would: positions of the candidates, then of the turns around them.
        found = {i.id for hits in (*dense.values(), *lexical_hits.values()) for i in hits}
        positions = {doc_id: all_positions[doc_id] for doc_id in found}
        for position in neighbour_positions(positions.values(), window=window):
            if position in at:
                positions[at[position]] = position
        out.append(
            Candidates(
                question.category,
                question.evidence,
                dense,
                lexical_hits,
                positions,
                doc_at,
                speakers,
                named_speakers(question.text, known),
            )
        )
    return out


def evaluate(
    candidates: Iterable[Candidates],
    variant: Variant | RecallConfig,
    /,
    *,
    depth: int | None = None,
) -> RecallTally:
    """Rank every question's candidates as ``variant`` says and tally recall."""
    if isinstance(variant, RecallConfig):
        variant = Variant(variant)
    config, key = variant.config, variant.lexical_key()
    tally = RecallTally()
    n = depth if depth is not None else config.candidates
    for c in candidates:
        ranked = rank_candidates(
            config,
            dense=c.dense[variant.dense_key()][:n],
            lexical=c.lexical[key][:n],
            positions=c.positions,
            doc_at=c.doc_at,
            speakers=c.speakers,
            named=c.named,
            limit=max(KS),
        )
        tally.add(c.category, c.evidence, [item.id for item in ranked])
    return tally


# --------------------------------------------------------------------------- reports


def results_table(rows: dict[str, RecallTally], /) -> str:
    """A markdown table: one line per mode and category, then per mode overall."""
    header = "| mode | category | n | any@5 | any@10 | all@5 | all@10 |"
    lines = [header, "|" + "---|" * 7]
    for name, tally in rows.items():
        for category in [*SCORED_CATEGORIES, None]:
            label = "overall" if category is None else f"{category} {CATEGORY_NAMES[category]}"
            cells = [f"{tally.rate(kind, k, category):.1f}" for kind in ("any", "all") for k in KS]
            lines.append(
                f"| {name} | {label} | {tally.count(category)} | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines)


def category_table(rows: dict[str, RecallTally], /) -> str:
    """A markdown table, one row per variant: any@5 / any@10 per category and pooled."""
    cats: list[int | None] = [*SCORED_CATEGORIES, None]
    names = [CATEGORY_NAMES[c] if c is not None else "all" for c in cats]
    first = next(iter(rows.values()), RecallTally())
    header = " | ".join(f"{name} (n={first.count(c)})" for name, c in zip(names, cats, strict=True))
    lines = [f"| variant | {header} |", "|" + "---|" * (len(cats) + 1)]
    for label, tally in rows.items():
        cells = [f"{tally.rate('any', 5, c):.1f} / {tally.rate('any', 10, c):.1f}" for c in cats]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- choosing by LOO


class Search:
    """Recall of variants on conversations, each pair evaluated once."""

    def __init__(self, per_conversation: dict[str, list[Candidates]]) -> None:
        self.per_conversation = per_conversation
        self._tallies: dict[tuple[Variant, str], RecallTally] = {}

    def tally(self, variant: Variant, sample_id: str) -> RecallTally:
        """The variant's recall on one conversation."""
        key = (variant, sample_id)
        if key not in self._tallies:
            self._tallies[key] = evaluate(self.per_conversation[sample_id], variant)
        return self._tallies[key]

    @property
    def evaluations(self) -> int:
        """How many (variant, conversation) pairs were evaluated."""
        return len(self._tallies)

    def hits(self, variant: Variant, samples: Iterable[str]) -> int:
        """Questions of ``samples`` with an evidence turn in the variant's top 10."""
        return sum(
            sum(self.tally(variant, s).any_hits.get((c, 10), 0) for c in SCORED_CATEGORIES)
            for s in samples
        )

    def pooled(self, chosen: dict[str, Variant]) -> RecallTally:
        """One tally of each conversation scored with the variant chosen for it."""
        pooled = RecallTally()
        for sample_id, variant in chosen.items():
            tally = self.tally(variant, sample_id)
            for category, n in tally.asked.items():
                pooled.asked[category] = pooled.asked.get(category, 0) + n
            for counts, into in (
                (tally.any_hits, pooled.any_hits),
                (tally.all_hits, pooled.all_hits),
            ):
                for key, hits in counts.items():
                    into[key] = into.get(key, 0) + hits
        return pooled


def search_grid(
    *, speakers: bool, time_expansion: bool, context_key: bool, sentence_keys: bool = False
) -> list[Variant]:
    """Stage one of the choice: dense weight x smoothing x BM25 b (x speaker weight, x expansions).

    The shipped settings before leave-one-out choosing come first, so that a tie keeps them.
    Sentence keys enter at weight 0.5; stage two tries the other :data:`SENTENCE_WEIGHTS`.
    """
    old = PREVIOUS_DEFAULT
    grid = [Variant(old)]
    for b, w, nb, win, sw, te, ck, sk in itertools.product(
        (0.0, 0.75),
        (0.3, 0.4, 0.5, 0.6),
        (0.0, 0.25, 0.5, 0.75),
        (1, 2, 3),
        (0.0, 0.5, 1.0, 2.0) if speakers else (0.0,),
        (False, True) if time_expansion else (False,),
        (False, True) if context_key else (False,),
        (0.0, 0.5) if sentence_keys else (0.0,),
    ):
        if nb == 0.0 and win != old.neighbour_window:
            continue  # the window is irrelevant without smoothing
        config = replace(
            old,
            bm25_b=b,
            dense_weight=w,
            neighbour_weight=nb,
            neighbour_window=win,
            speaker_weight=sw,
        )
        variant = Variant(config, te, ck, sk)
        if variant not in grid:
            grid.append(variant)
    return grid


def refinements(variant: Variant, /) -> list[Variant]:
    """Stage two: the other settings, one at a time around the stage-one choice."""
    c = variant.config
    changes: list[dict[str, Any]] = [
        {"fusion": "rrf", "rrf_k": 60.0},
        {"fusion": "rrf", "rrf_k": 10.0},
        {"candidates": 50},
        {"candidates": 200},
        {"bm25_k1": 0.9},
        {"bm25_k1": 1.5},
        {"stopwords": "lucene"},
        {"stem": False},
        {"lexical_dates": not c.lexical_dates},
    ]
    others = [replace(variant, config=replace(c, **change)) for change in changes]
    if variant.sentence_weight:
        others += [
            replace(variant, sentence_weight=w)
            for w in SENTENCE_WEIGHTS
            if w != variant.sentence_weight
        ]
    return others


def choose(search: Search, grid: Sequence[Variant], samples: Sequence[str], /) -> Variant:
    """The best variant on ``samples`` (recall-any@10): best of the grid, then one refinement."""
    best = _first_best(search, grid, samples)
    better = [v for v in refinements(best) if search.hits(v, samples) > search.hits(best, samples)]
    return _first_best(search, better, samples) if better else best


def _first_best(search: Search, variants: Sequence[Variant], samples: Sequence[str]) -> Variant:
    """The variant with the most hits on ``samples``; the earliest of those tied."""
    scored = [(search.hits(v, samples), -i) for i, v in enumerate(variants)]
    return variants[-max(scored)[1]]


def leave_one_out(search: Search, grid: Sequence[Variant], /) -> tuple[dict[str, Variant], Variant]:
    """For each conversation, the variant chosen on the others; and the one chosen on all."""
    samples = list(search.per_conversation)
    chosen = {held: choose(search, grid, [s for s in samples if s != held]) for held in samples}
    return chosen, choose(search, grid, samples)


def folds_table(search: Search, chosen: dict[str, Variant], /) -> str:
    """Per held-out conversation: what the others chose, and its recall there."""
    lines = [
        "| held out | n | chosen on the other conversations | any@10 held out | "
        "old default any@10 |",
        "|" + "---|" * 5,
    ]
    old = Variant(PREVIOUS_DEFAULT)
    for held, variant in chosen.items():
        tally, before = search.tally(variant, held), search.tally(old, held)
        lines.append(
            f"| {held} | {tally.count()} | {variant.label()} | {tally.rate('any', 10):.1f} | "
            f"{before.rate('any', 10):.1f} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- calibrated scores


_Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ScoreFeatures:
    """Every (question, turn) pair of a conversation: the score's features and the label."""

    cosine: npt.NDArray[np.float64]
    """Cosine similarity of the question's and the turn's embeddings."""
    coverage: npt.NDArray[np.float64]
    """Share of the question's lexical terms in the turn's lexical text."""
    relevant: npt.NDArray[np.float64]
    """1 when the question's evidence cites the turn."""


def score_features(conversation: Conversation, embed: Embed, /) -> ScoreFeatures:
    """The features :mod:`memories.stores.recall.scores` maps, for every question and turn."""
    questions = scorable_questions(conversation)
    turns = conversation.turns
    config = RecallConfig()
    analyzer = config.analyzer()
    docs = _normalise(embed([document_text(t) for t in turns]))
    queries = _normalise(embed([q.text for q in questions]))
    terms = [
        set(analyzer.terms(config.lexical_text(document_text(t), when=turn_date(t)))) for t in turns
    ]
    coverage = [
        [term_coverage(analyzer.terms(q.text), doc_terms) for doc_terms in terms] for q in questions
    ]
    relevant = [[float(t.dia_id in q.evidence) for t in turns] for q in questions]
    return ScoreFeatures(
        (queries @ docs.T).astype(np.float64).ravel(),
        np.asarray(coverage, dtype=np.float64).ravel(),
        np.asarray(relevant, dtype=np.float64).ravel(),
    )


def _joined(features: Sequence[ScoreFeatures]) -> ScoreFeatures:
    return ScoreFeatures(
        np.concatenate([f.cosine for f in features]),
        np.concatenate([f.coverage for f in features]),
        np.concatenate([f.relevant for f in features]),
    )


def _logistic(
    columns: Sequence[npt.NDArray[np.float64]], y: npt.NDArray[np.float64]
) -> list[float]:
    """Maximum-likelihood logistic regression (Newton's method): intercept, then one weight each."""
    design = np.column_stack([np.ones(len(y)), *columns])
    weights = np.zeros(design.shape[1])
    ridge = 1e-6 * np.eye(len(weights))  # keeps the Hessian invertible on separable data
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-design @ weights))
        gradient = design.T @ (p - y)
        hessian = (design * (p * (1 - p))[:, None]).T @ design + ridge
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if float(np.abs(step).max()) < 1e-9:
            break
    return [float(w) for w in weights]


def fit_calibration(features: Sequence[ScoreFeatures], /) -> ScoreCalibration:
    """The logistic calibration of relevant vs irrelevant turns on these conversations."""
    f = _joined(features)
    bias, cosine, coverage = _logistic([f.cosine, f.coverage], f.relevant)
    lexical_bias, lexical_coverage = _logistic([f.coverage], f.relevant)
    return ScoreCalibration(bias, cosine, coverage, lexical_bias, lexical_coverage)


def _predicted(calibration: ScoreCalibration, f: ScoreFeatures) -> npt.NDArray[np.float64]:
    c = calibration
    logit = c.bias + c.cosine * f.cosine + c.coverage * f.coverage
    return np.asarray(1.0 / (1.0 + np.exp(-logit)), dtype=np.float64)


_SCORE_BINS = (0.0, 0.001, 0.01, 0.05, 0.1, 0.2, 0.4, 1.0001)


def calibration_report(conversations: Sequence[Conversation], embed: Embed, /) -> str:
    """Fit the score calibration on all conversations, and check it on held-out ones."""
    features = {c.sample_id: score_features(c, embed) for c in conversations}
    fitted = fit_calibration(list(features.values()))
    shipped = DEFAULT_CALIBRATION
    lines = [
        "Logistic map of (cosine, term coverage) to the probability that a turn is cited as "
        "evidence, over every (question, turn) pair. Fitted on all five conversations: "
        f"bias {fitted.bias:.2f}, cosine {fitted.cosine:.2f}, coverage {fitted.coverage:.2f}; "
        f"coverage only: bias {fitted.lexical_bias:.2f}, coverage {fitted.lexical_coverage:.2f}. "
        f"Shipped (`DEFAULT_CALIBRATION`): bias {shipped.bias:.2f}, cosine {shipped.cosine:.2f}, "
        f"coverage {shipped.coverage:.2f}; coverage only: bias {shipped.lexical_bias:.2f}, "
        f"coverage {shipped.lexical_coverage:.2f}.",
        "",
        "Held out: each conversation scored with the map fitted on the other four.",
        "",
        "| predicted score | pairs | mean predicted | share relevant |",
        "|---|---|---|---|",
    ]
    predicted, relevant = [], []
    for held in features:
        fold = fit_calibration([f for s, f in features.items() if s != held])
        predicted.append(_predicted(fold, features[held]))
        relevant.append(features[held].relevant)
    p, y = np.concatenate(predicted), np.concatenate(relevant)
    for low, high in itertools.pairwise(_SCORE_BINS):
        inside = (p >= low) & (p < high)
        if inside.any():
            lines.append(
                f"| {low:g} to {min(high, 1.0):g} | {int(inside.sum()):,} | "
                f"{float(p[inside].mean()):.4f} | {float(y[inside].mean()):.4f} |"
            )
    return "\n".join(lines)


def score_examples(
    conversations: Sequence[Conversation], embeddings: Embeddings, /, *, unrelated: str
) -> str:
    """Top scores through ``VectorMemory.search``: the real questions vs an unrelated query."""
    from memories.long_term.vector import VectorMemory

    collection = f"locomo-scores-{uuid.uuid4().hex[:12]}"
    asked: list[float] = []
    stray: list[float] = []
    for conversation in conversations:
        memory = VectorMemory(
            mode="memory",
            collection=collection,
            namespace=("locomo", conversation.sample_id),
            embeddings=embeddings,
        )
        memory.add(
            [document_text(t) for t in conversation.turns],
            metadatas=[turn_metadata(t) for t in conversation.turns],
            ids=[t.dia_id for t in conversation.turns],
            progress=False,
        )
        for question in scorable_questions(conversation):
            found = memory.search(question.text, k=10)
            asked.append(max((r.score for r in found), default=0.0))
        stray.append(max(r.score for r in memory.search(unrelated, k=10)))
        memory.erase_namespace()
    q = np.percentile(asked, [10, 50, 90])
    return (
        f"Best score among the top 10 of `VectorMemory().search`: the {len(asked)} dev "
        f"questions: median {q[1]:.3f} (10th percentile {q[0]:.3f}, 90th {q[2]:.3f}); "
        f"{unrelated!r} asked of each conversation: {', '.join(f'{s:.4f}' for s in stray)}."
    )


def search_timing(
    conversations: Sequence[Conversation],
    embeddings: Embeddings,
    /,
    *,
    stored: int,
    probes: int,
) -> str:
    """``VectorMemory.search(k=10)`` at ``stored`` turns: the previous and the shipped default.

    A persistent store in a temporary folder holds the dev turns repeated up to
    ``stored`` (documents embedded once, from a cache); every query is embedded
    anew. The time spent giving results their calibrated scores is measured
    by wrapping that step.
    """
    import memories.stores.vector.chroma_backend as chroma_backend
    from memories.long_term.vector import VectorMemory

    turns = [t for c in conversations for t in c.turns]
    questions = [q.text for c in conversations for q in scorable_questions(c)]
    texts, metadatas = [], []
    for i in range(stored):
        turn = turns[i % len(turns)]
        metadata = turn_metadata(turn)
        metadata["session"] = f"{i // len(turns)}-{turn.session}"  # a repeat is a new session
        texts.append(document_text(turn))
        metadatas.append(metadata)
    calibrate = chroma_backend.calibrated
    spent: list[float] = []

    def timed(*args: Any, **options: Any) -> Any:
        started = time.perf_counter()
        found = calibrate(*args, **options)
        spent.append(1000 * (time.perf_counter() - started))
        return found

    lines = [
        f"`VectorMemory(k=10).search` at {stored:,} stored turns (persistent store), "
        f"{probes} questions, each query embedded anew; wall time:",
        "",
        "| recall | median ms | p95 ms | calibrated scores, median ms |",
        "|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as folder:
        options: dict[str, Any] = {"path": folder, "namespace": ("timing",), "k": 10}
        writer = VectorMemory(embeddings=embeddings, **options)
        writer.add(texts, metadatas=metadatas, progress=False)
        chroma_backend.calibrated = timed  # type: ignore[assignment]
        configs = {
            "previous default": PREVIOUS_DEFAULT,
            "RecallConfig() as shipped": RecallConfig(),
        }
        memories = {
            label: VectorMemory(embeddings=embeddings, recall=config, **options)
            for label, config in configs.items()
        }
        wall: dict[str, list[float]] = {label: [] for label in configs}
        scoring: dict[str, list[float]] = {label: [] for label in configs}
        try:
            for i in range(-20, probes):  # 20 untimed rounds first: the index is built there
                question = questions[(7 * i) % len(questions)]
                # Alternate which goes first, so that a busy spell of the machine hits both.
                order = list(memories.items()) if i % 2 else list(memories.items())[::-1]
                for label, memory in order:
                    spent.clear()
                    started = time.perf_counter()
                    memory.search(question)
                    if i >= 0:
                        wall[label].append(1000 * (time.perf_counter() - started))
                        scoring[label].extend(spent)
        finally:
            chroma_backend.calibrated = calibrate
        for label in configs:
            lines.append(
                f"| {label} | {statistics.median(wall[label]):.1f} | "
                f"{float(np.percentile(wall[label], 95)):.1f} | "
                f"{statistics.median(scoring[label]):.2f} |"
            )
    return "\n".join(lines)


def lexical_timing(
    conversations: Sequence[Conversation], config: RecallConfig, /, *, stored: int, probes: int
) -> str:
    """Per-turn cost of save + recall in a BM25Index already holding ``stored`` turns."""
    turns = [t for c in conversations for t in c.turns]
    texts = [config.lexical_text(document_text(t), when=turn_date(t)) for t in turns]
    queries = [q.text for c in conversations for q in scorable_questions(c)]
    index = config.lexical_index()
    start = time.perf_counter()
    index.add_many("bench", ((f"old-{i}", texts[i % len(texts)]) for i in range(stored)))
    build = time.perf_counter() - start
    lines = [
        f"Lexical index (BM25Index) at {stored:,} stored turns; build from scratch "
        f"{build:.2f} s ({1e6 * build / stored:.0f} us/turn). Per turn over {probes} probes; "
        f"wall time, and process CPU time, which leaves out waiting for a busy machine:",
        "",
        "| operation | median ms | p95 ms | CPU median ms | CPU p95 ms |",
        "|---|---|---|---|---|",
    ]
    for limit in (10, config.candidates):
        for i in range(20):  # warm-up
            index.search("bench", queries[i % len(queries)], limit=limit)
        wall, cpu = [], []
        for i in range(probes):
            text, query = texts[(7 * i) % len(texts)], queries[i % len(queries)]
            t0, c0 = time.perf_counter(), time.process_time()
            index.add("bench", f"probe-{limit}-{i}", text)
            index.search("bench", query, limit=limit)
            wall.append(1000 * (time.perf_counter() - t0))
            cpu.append(1000 * (time.process_time() - c0))
        for i in range(probes):  # back to `stored` turns for the next round
            index.delete("bench", f"probe-{limit}-{i}")
        lines.append(f"| save + recall(limit={limit}) | {_stats(wall)} | {_stats(cpu)} |")
    wall, cpu = [], []
    candidates = [ScoredId(f"old-{i}", 1.0 / (1 + i)) for i in range(config.candidates)]
    positions = {f"old-{i}": TurnPosition("s", i) for i in range(config.candidates + 4)}
    for _ in range(probes):
        t0, c0 = time.perf_counter(), time.process_time()
        rank_candidates(
            config, dense=candidates, lexical=candidates[::-1], positions=positions, limit=10
        )
        wall.append(1000 * (time.perf_counter() - t0))
        cpu.append(1000 * (time.process_time() - c0))
    lines.append(
        f"| fusion + smoothing of 2 x {config.candidates} candidates | {_stats(wall)} | "
        f"{_stats(cpu)} |"
    )
    return "\n".join(lines)


def _stats(samples: list[float]) -> str:
    p95 = float(np.percentile(samples, 95))
    return f"{statistics.median(samples):.3f} | {p95:.3f}"


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--embedder",
        default=DEFAULT_EMBEDDER,
        help="module:attr of a class with embed(texts) -> ndarray, or of such a function "
        "(default: VectorMemory()'s own embeddings)",
    )
    parser.add_argument(
        "--memory-only", action="store_true", help="only the VectorMemory() end-to-end table"
    )
    parser.add_argument(
        "--no-variants",
        action="store_true",
        help="choose only the shipped search space by leave-one-out, not the expansions tried",
    )
    parser.add_argument("--no-timing", action="store_true", help="skip the timing section")
    parser.add_argument(
        "--pgvector",
        action="store_true",
        help="also run the end-to-end table on PostgreSQL + pgvector (a throwaway server)",
    )
    parser.add_argument("--stored", type=int, default=10_000, help="turns stored for timing")
    parser.add_argument("--probes", type=int, default=500, help="timed save + recall calls")
    args = parser.parse_args(argv)

    conversations = load_conversations(args.data.resolve())
    raw = load_embedder(args.embedder)
    embeddings = CachedEmbeddings(raw)
    embed = embeddings.as_embed()
    base = RecallConfig()
    print(f"# LoCoMo retrieval recall: {args.data.name}\n")
    if not args.memory_only:
        _choose_by_leave_one_out(conversations, embed, variants=not args.no_variants)
    plain = replace(base, neighbour_weight=0.0, speaker_weight=0.0)
    modes = {
        "dense": replace(plain, mode="dense"),
        "bm25": replace(plain, mode="bm25"),
        "hybrid": base,
    }
    started = time.perf_counter()
    tallies, store_seconds = memory_recall(conversations, modes, embeddings)
    if args.pgvector:
        tallies.update(_on_pgvector(conversations, modes, embeddings))
    print("\n## VectorMemory() end to end\n")
    print(
        "A fresh `VectorMemory(mode='memory')` per conversation with default settings; "
        "turns stored with `add` (metadata: session, turn, date, speaker), questions asked "
        "with `search(k=10)`. `dense` and `bm25` are plain rankings "
        "(`recall=dict(mode=..., neighbour_weight=0, speaker_weight=0)`); `hybrid` is the "
        f"default `RecallConfig()`. Storing took {store_seconds:.1f} s, everything "
        f"{time.perf_counter() - started:.1f} s. Rows ending in `pgvector` are the same "
        "memories on PostgreSQL with pgvector (`vectors=` a throwaway server's URL).\n"
    )
    print(results_table(tallies))
    if not args.memory_only:
        print("\n## Calibrated scores\n")
        print(calibration_report(conversations, embed))
        print()
        print(score_examples(conversations, embeddings, unrelated="quantum chromodynamics"))
    if not args.no_timing:
        print("\n## Timing\n")
        print(lexical_timing(conversations, base, stored=args.stored, probes=args.probes))
        print()
        fresh = FreshQueries(embeddings, raw)
        print(search_timing(conversations, fresh, stored=args.stored, probes=200))
    return 0


def _on_pgvector(
    conversations: Sequence[Conversation], modes: dict[str, RecallConfig], embeddings: Embeddings
) -> dict[str, RecallTally]:
    """The end-to-end table's memories on a throwaway PostgreSQL with pgvector."""
    sys.path.insert(0, str(REPO_ROOT))
    from tests.postgres import postgres_server

    with postgres_server(with_vector=True) as url:
        tallies, _ = memory_recall(conversations, modes, embeddings, vectors=url)
    return {f"{name} pgvector": tally for name, tally in tallies.items()}


def _choose_by_leave_one_out(
    conversations: Sequence[Conversation], embed: Embed, /, *, variants: bool
) -> None:
    """Print the held-out headline, the tried variants and the folds."""
    families = {
        "fusion grid (the search space before speaker keys)": search_grid(
            speakers=False, time_expansion=False, context_key=False
        ),
        "+ speaker keys (the shipped search space)": search_grid(
            speakers=True, time_expansion=False, context_key=False
        ),
    }
    if variants:
        families["+ speaker keys + time-aware query expansion"] = search_grid(
            speakers=True, time_expansion=True, context_key=False
        )
        families["+ speaker keys + context key (document expansion)"] = search_grid(
            speakers=True, time_expansion=False, context_key=True
        )
        families["+ speaker keys + sentence keys (fact-keyed document expansion)"] = search_grid(
            speakers=True, time_expansion=False, context_key=False, sentence_keys=True
        )
    shipped = "+ speaker keys (the shipped search space)"
    plain = replace(PREVIOUS_DEFAULT, neighbour_weight=0.0)
    fixed = {
        "dense only": Variant(replace(plain, mode="dense")),
        "BM25 only": Variant(replace(plain, mode="bm25")),
        "previous default": Variant(PREVIOUS_DEFAULT),
        "RecallConfig() as shipped": Variant(RecallConfig()),
    }
    everything = [v for grid in families.values() for v in grid] + list(fixed.values())
    keys = lexical_keys(everything) | lexical_keys(r for v in everything for r in refinements(v))
    skips = SkipCounts()
    full_depth = max(len(c.turns) for c in conversations)
    per_conversation: dict[str, list[Candidates]] = {}
    started = time.perf_counter()
    for conversation in conversations:
        questions = scorable_questions(conversation, skips)
        per_conversation[conversation.sample_id] = gather_candidates(
            conversation, questions, embed, depth=full_depth, lexical=keys, expansions=variants
        )
    n_questions = sum(len(cs) for cs in per_conversation.values())
    print(
        f"{len(conversations)} conversations, {sum(len(c.turns) for c in conversations)} turns, "
        f"{n_questions} questions of categories 1-4 scored; skipped "
        f"{skips.no_evidence} questions without usable evidence and "
        f"{len(skips.malformed_entries)} malformed or unknown evidence entries "
        f"{skips.malformed_entries}. Candidates ({len(keys)} BM25 settings) gathered in "
        f"{time.perf_counter() - started:.1f} s.\n"
    )
    if variants:
        counts = [len(sentence_keys(t)) for c in conversations for t in c.turns]
        print(
            f"Sentence keys: {sum(counts) / len(counts):.2f} dense vectors per turn "
            f"(at most {max(counts)}; {sum(n == 1 for n in counts) / len(counts):.0%} of turns "
            "keep one), against 1 for the shipped index; an approximate search would fetch "
            "that many times the candidates to keep as many distinct turns.\n"
        )
    search = Search(per_conversation)
    samples = list(per_conversation)
    started = time.perf_counter()
    held_out: dict[str, RecallTally] = {}
    chosen_on_all: dict[str, Variant] = {}
    folds: dict[str, dict[str, Variant]] = {}
    for name, grid in families.items():
        chosen, final = leave_one_out(search, grid)
        held_out[name], chosen_on_all[name], folds[name] = search.pooled(chosen), final, chosen
    seconds = time.perf_counter() - started
    in_sample = {name: search.pooled(dict.fromkeys(samples, v)) for name, v in fixed.items()}

    print("## Headline: recall chosen by leave-one-conversation-out, scored held out\n")
    print(
        "Recall-any@5 / any@10 (%) per category. Each conversation is scored with the "
        "settings chosen on the other four (grid of dense weight, neighbour weight and "
        "window, BM25 b and speaker weight, then one pass over fusion, candidates, BM25 k1, "
        "stopwords, stemming and dates); the fixed rows are in the same run. "
        f"{search.evaluations} (variant, conversation) evaluations, {seconds:.0f} s.\n"
    )
    rows = {"hybrid, chosen by leave-one-out (held out)": held_out[shipped], **in_sample}
    print(category_table(rows))
    final = chosen_on_all[shipped]
    print(f"\nChosen on all five conversations (what `RecallConfig()` should be): {final.label()}.")
    if final != fixed["RecallConfig() as shipped"]:
        print("WARNING: RecallConfig()'s defaults differ from that choice.")
    print("\n## Every search space tried, each chosen by leave-one-out (held out)\n")
    print(category_table(held_out))
    print()
    for name in families:
        print(f"- {name}: chosen on all five: {chosen_on_all[name].label()}")
    print(f"\n## Folds of the shipped search space\n\n{folds_table(search, folds[shipped])}")


if __name__ == "__main__":
    raise SystemExit(main())
