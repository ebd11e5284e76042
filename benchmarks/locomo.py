"""Retrieval recall on LoCoMo: dense, BM25 and hybrid recall side by side.

For each conversation every turn is stored in a fresh memory, each question of
categories 1-4 is asked, and recall-any@k / recall-all@k are reported: the
share of questions with at least one / every evidence turn among the top k.

The headline table measures the shipped class end to end: a fresh
``VectorMemory()`` with default settings per conversation (in-memory Chroma),
every turn stored through ``add`` (text ``"Speaker: text [shared a photo:
caption]"``, metadata session, turn and the session date), every question
asked through ``search(k=10)``. Only ``recall.mode`` differs between the
``dense``, ``bm25`` and ``hybrid`` rows (``dense`` and ``bm25`` without
neighbour smoothing, ``hybrid`` is ``RecallConfig()``).

The later sections re-rank pre-computed candidates with the same pure
functions the memory calls (an exact cosine search standing in for Chroma's),
to compare variants and check the defaults by leave-one-conversation-out.

Run from the repository root::

    python benchmarks/locomo.py [path/to/locomo_dev.json] [--embedder module:attr]

It also prints a leave-one-conversation-out check of the default parameters
and the per-turn cost of the lexical index at 10,000 stored turns.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import re
import statistics
import sys
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

from memories.recall import (
    RecallConfig,
    ScoredId,
    TurnPosition,
    neighbour_positions,
    rank_candidates,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data" / "locomo" / "locomo_dev.json"
DEFAULT_EMBEDDER = "default"
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
        from memories.embeddings import default_embeddings

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
) -> tuple[dict[str, RecallTally], float]:
    """Store each conversation in a fresh ``VectorMemory`` and ask its questions, per mode.

    The first mode's memory stores the turns with ``add``; the other modes open
    memories on the same collection and namespace, which read the turns back
    from Chroma as a new process would.

    Returns:
        The tally per mode, and the seconds spent storing.
    """
    from memories.vector import VectorMemory

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


@dataclass(frozen=True)
class Candidates:
    """What the storage layer hands to ``rank_candidates`` for one question."""

    category: int
    """The question's category."""
    evidence: tuple[str, ...]
    """Its evidence turn ids."""
    dense: tuple[ScoredId, ...]
    """Dense top-N, best first (cosine similarity)."""
    lexical: dict[float, tuple[ScoredId, ...]]
    """BM25 top-N per BM25 ``b`` value."""
    positions: dict[str, TurnPosition]
    """Positions of every candidate and of the turns around them."""


def gather_candidates(
    conversation: Conversation,
    questions: Sequence[Question],
    embed: Embed,
    /,
    *,
    base: RecallConfig,
    depth: int,
    b_values: Iterable[float],
) -> list[Candidates]:
    """Index one conversation and collect each question's candidate lists."""
    turns = conversation.turns
    ids = [t.dia_id for t in turns]
    doc_vectors = _normalise(embed([document_text(t) for t in turns]))
    query_vectors = _normalise(embed([q.text for q in questions]))
    similarity = query_vectors @ doc_vectors.T
    indexes = {}
    for b in b_values:
        index = replace(base, bm25_b=b).lexical_index()
        for turn in turns:
            text = base.lexical_text(document_text(turn), when=turn_date(turn))
            index.add(conversation.sample_id, turn.dia_id, text)
        indexes[b] = index
    all_positions = {
        t.dia_id: TurnPosition(f"{conversation.sample_id}/{t.session}", t.position) for t in turns
    }
    at = {position: doc_id for doc_id, position in all_positions.items()}
    out = []
    for question, row in zip(questions, similarity, strict=True):
        top = np.argsort(-row, kind="stable")[:depth]
        dense = tuple(ScoredId(ids[i], float(row[i])) for i in top)
        lexical = {
            b: tuple(index.search(conversation.sample_id, question.text, limit=depth))
            for b, index in indexes.items()
        }
        # As a store would: positions of the candidates, then of the turns around them.
        found = {item.id for item in dense} | {i.id for hits in lexical.values() for i in hits}
        positions = {doc_id: all_positions[doc_id] for doc_id in found}
        window = max(3, base.neighbour_window)
        for position in neighbour_positions(positions.values(), window=window):
            if position in at:
                positions[at[position]] = position
        out.append(Candidates(question.category, question.evidence, dense, lexical, positions))
    return out


def evaluate(
    candidates: Iterable[Candidates], config: RecallConfig, /, *, depth: int | None = None
) -> RecallTally:
    """Rank every question's candidates with ``config`` and tally recall."""
    tally = RecallTally()
    n = depth if depth is not None else config.candidates
    for c in candidates:
        ranked = rank_candidates(
            config,
            dense=c.dense[:n],
            lexical=c.lexical[config.bm25_b][:n],
            positions=c.positions,
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
            cells = [cells[0], cells[1], cells[2], cells[3]]
            lines.append(
                f"| {name} | {label} | {tally.count(category)} | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines)


def leave_one_out(
    per_conversation: dict[str, list[Candidates]], grid: Sequence[RecallConfig], /
) -> str:
    """Pick the best grid point on all conversations but one, score it on the one left out."""
    hits: dict[tuple[int, str], float] = {}
    for g, config in enumerate(grid):
        for sample_id, candidates in per_conversation.items():
            tally = evaluate(candidates, config)
            hits[g, sample_id] = tally.rate("any", 10) * tally.count() / 100.0
    samples = list(per_conversation)
    default = RecallConfig()
    default_index = grid.index(default)
    lines = [
        "| held out | n | chosen on the other conversations | any@10 held out | "
        "default any@10 | best possible any@10 |",
        "|" + "---|" * 6,
    ]
    loo_total = default_total = 0.0
    n_total = 0
    for held in samples:
        others = [s for s in samples if s != held]
        chosen = max(range(len(grid)), key=lambda g: (sum(hits[g, s] for s in others), -g))
        n = len(per_conversation[held])
        best = max(hits[g, held] for g in range(len(grid)))
        c = grid[chosen]
        label = f"w={c.dense_weight} nb={c.neighbour_weight}/{c.neighbour_window} b={c.bm25_b}"
        lines.append(
            f"| {held} | {n} | {label} | {100 * hits[chosen, held] / n:.1f} | "
            f"{100 * hits[default_index, held] / n:.1f} | {100 * best / n:.1f} |"
        )
        loo_total += hits[chosen, held]
        default_total += hits[default_index, held]
        n_total += n
    lines.append(
        f"| pooled | {n_total} | | {100 * loo_total / n_total:.1f} | "
        f"{100 * default_total / n_total:.1f} | |"
    )
    best_in_sample = max(range(len(grid)), key=lambda g: sum(hits[g, s] for s in samples))
    b = grid[best_in_sample]
    lines.append(
        f"\nIn-sample best of {len(grid)} grid points: w={b.dense_weight} "
        f"nb={b.neighbour_weight}/{b.neighbour_window} b={b.bm25_b}, any@10 = "
        f"{100 * sum(hits[best_in_sample, s] for s in samples) / n_total:.1f}."
    )
    return "\n".join(lines)


def loo_grid(base: RecallConfig, /) -> list[RecallConfig]:
    """Dense weight x neighbour weight x window x BM25 b, around the defaults."""
    grid = []
    for b, w, nb, win in itertools.product(
        (0.0, 0.75), (0.2, 0.3, 0.4, 0.5, 0.6), (0.0, 0.25, 0.5, 0.75), (1, 2, 3)
    ):
        if nb == 0.0 and win != base.neighbour_window:
            continue  # the window is irrelevant without smoothing
        grid.append(
            replace(base, bm25_b=b, dense_weight=w, neighbour_weight=nb, neighbour_window=win)
        )
    return grid


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
    parser.add_argument("--no-loo", action="store_true", help="skip the leave-one-out check")
    parser.add_argument("--no-timing", action="store_true", help="skip the timing section")
    parser.add_argument("--stored", type=int, default=10_000, help="turns stored for timing")
    parser.add_argument("--probes", type=int, default=500, help="timed save + recall calls")
    args = parser.parse_args(argv)

    conversations = load_conversations(args.data.resolve())
    embeddings = CachedEmbeddings(load_embedder(args.embedder))
    embed = embeddings.as_embed()
    base = RecallConfig()
    plain = replace(base, neighbour_weight=0.0)
    modes = {
        "dense": replace(plain, mode="dense"),
        "bm25": replace(plain, mode="bm25"),
        "hybrid": base,
    }
    print(f"# LoCoMo retrieval recall: {args.data.name}\n")
    started = time.perf_counter()
    tallies, store_seconds = memory_recall(conversations, modes, embeddings)
    print("## VectorMemory() end to end (the headline)\n")
    print(
        "A fresh `VectorMemory(mode='memory')` per conversation with default settings; "
        "turns stored with `add`, questions asked with `search(k=10)`. `dense` and `bm25` are "
        "plain rankings (`recall=dict(mode=..., neighbour_weight=0)`); `hybrid` is the default "
        f"`RecallConfig()`. Storing took {store_seconds:.1f} s, everything "
        f"{time.perf_counter() - started:.1f} s.\n"
    )
    print(results_table(tallies))
    if args.memory_only:
        return 0
    print()
    skips = SkipCounts()
    full_depth = max(len(c.turns) for c in conversations)
    per_conversation: dict[str, list[Candidates]] = {}
    started = time.perf_counter()
    for conversation in conversations:
        questions = scorable_questions(conversation, skips)
        per_conversation[conversation.sample_id] = gather_candidates(
            conversation, questions, embed, base=base, depth=full_depth, b_values=(0.0, 0.75)
        )
    everything = [c for cs in per_conversation.values() for c in cs]
    print(
        f"{len(conversations)} conversations, {sum(len(c.turns) for c in conversations)} turns, "
        f"{len(everything)} questions of categories 1-4 scored; skipped "
        f"{skips.no_evidence} questions without usable evidence and "
        f"{len(skips.malformed_entries)} malformed or unknown evidence entries "
        f"{skips.malformed_entries}. Candidates gathered in "
        f"{time.perf_counter() - started:.1f} s.\n"
    )
    print(f"## Pure re-ranking (top-{base.candidates} candidates per ranker)\n")
    print("The same modes through the pure functions, as a cross-check of the table above.\n")
    print(results_table({name: evaluate(everything, config) for name, config in modes.items()}))
    ablations = {
        "dense + neighbour smoothing": replace(base, mode="dense"),
        "bm25 + neighbour smoothing": replace(base, mode="bm25"),
        "hybrid without smoothing": plain,
        "hybrid, RRF k=60 fusion": replace(base, fusion="rrf", rrf_k=60.0),
        "hybrid, RRF k=10 fusion": replace(base, fusion="rrf", rrf_k=10.0),
        "hybrid, BM25 b=0.75": replace(base, bm25_b=0.75),
        "hybrid, top-50 candidates": replace(base, candidates=50),
    }
    print("\n## Ablations (all categories)\n")
    print("| variant | any@5 | any@10 | all@5 | all@10 |\n|---|---|---|---|---|")
    variants: list[tuple[str, RecallTally]] = [
        (name, evaluate(everything, config)) for name, config in ablations.items()
    ]
    variants.append(
        (
            "hybrid, every turn's dense score (no top-N)",
            evaluate(everything, base, depth=full_depth),
        )
    )
    for name, tally in variants:
        cells = " | ".join(f"{tally.rate(kind, k):.1f}" for kind in ("any", "all") for k in KS)
        print(f"| {name} | {cells} |")

    if not args.no_loo:
        grid = loo_grid(base)
        print("\n## Leave-one-conversation-out check (recall-any@10)\n")
        print(
            f"Each held-out conversation is scored with the grid point ({len(grid)} points: dense "
            "weight, neighbour weight / window, BM25 b) that is best on the other conversations.\n"
        )
        print(leave_one_out(per_conversation, grid))

    if not args.no_timing:
        print("\n## Timing\n")
        print(lexical_timing(conversations, base, stored=args.stored, probes=args.probes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
