"""Per-turn cost of VectorMemory at 10,000 stored turns, on the default persistent store.

Run from the repository root::

    python benchmarks/vector_latency.py [--stored 10000] [--turns 200] [--data LOCOMO_JSON]
    python benchmarks/vector_latency.py --stored 100000 --modes persistent  # scale, ~15 min

A ``VectorMemory(k=10)`` with every other setting at its default (embedded
persistent Chroma in a temporary folder, MiniLM embeddings, hybrid recall,
background writes) is prefilled with ``--stored`` turns through ``add`` in
batches. A turn is one ``save_context`` plus one ``load_memory_variables``
with the next question, as a chain does; that is the hot path, what the user
waits for. Texts are LoCoMo chat turns when the data file is there, else
generated sentences. The turns are run three ways, each on a store of its
own (prefilling again is quick: the embeddings of the prefill are cached):

- ``write="sync"``: the turn is in Chroma when ``save_context`` returns.
- background, chat pacing: between ``save_context`` and the next question
  the user reads the answer and types (an untimed pause of 0.3 s, then
  the background writer is let finish).
- background, back-to-back: no pause at all, so the writer competes with
  the next search for the 2 cores (and the GIL); the most turns left
  waiting at a turn's end shows whether it keeps up.

For each it prints median and p95 of the hot path's wall time and of the
calling thread's CPU time (which leaves out waiting for a machine that
other jobs keep busy), the whole process's CPU per turn (every thread: the
background write included), the difference (other threads: the background
writer, and Chroma's own threads in every mode), and then embedding one
turn and one query alone for reference.

Each run's turns are followed, on the same store, by the *floor*: what any
hybrid search must do for the same questions, timed back to back in one
step -- embed the query, Chroma's nearest ``candidates`` (100), and our BM25
index's top ``candidates``. The ratio of a run's median to that floor's is
the figure to compare between machines and runs (the machine is shared).

Past 20,000 stored turns (``--stored 100000``) the prefill is *composed*:
each stored turn pairs two LoCoMo turns (``"input: A\noutput: B"``, every
pair once) and its vector is the normalised sum of the two turns' real
MiniLM vectors, so only the 2,760 distinct LoCoMo turns are embedded (a
turn's text embedding is close to that sum; what is measured is the index's
size and shape, not the model). The timed turns pay for real embeddings.
All runs then share one store, and the scale figures are printed: save and
recall apart, resident memory, the store's size on disk, the lexical index's
bytes per turn, and the first search of a new memory on the store (in this
process; ``benchmarks/scale_out.py`` times a restarted process's).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.embeddings import Embeddings

from memories.kernel.embeddings import default_embeddings
from memories.long_term.vector import VectorMemory
from memories.stores.vector.writes import background_writer

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
# The user's pause between turns in the chat-paced run, untimed.
PAUSE_SECONDS = 0.3
# Past this many stored turns the prefill is composed (see the module's docstring).
COMPOSED_FROM = 20_000
_WORDS = (
    "we went hiking painting cooking the lake mountains my sister brother dog cat school work "
    "music guitar concert weekend yesterday adoption agency support group camping beach "
    "pottery class friends family birthday running marathon book novel garden flowers"
)


def chat_texts(path: Path, count: int) -> list[str]:
    """``count`` chat turns: LoCoMo's (cycled) when ``path`` exists, else made-up sentences."""
    texts: list[str] = []
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        for sample in data:
            for key, session in sample["conversation"].items():
                if re.fullmatch(r"session_\d+", key):
                    texts.extend(f"{t['speaker']}: {t['text']}" for t in session)
    if not texts:
        rng = random.Random(0)
        texts = [" ".join(rng.choices(_WORDS.split(), k=rng.randint(6, 30))) for _ in range(2_000)]
    return [texts[i % len(texts)] for i in range(count)]


class PrefillCache(Embeddings):
    """The default embeddings, remembering texts while ``caching`` is on (the prefills).

    It is switched off before the timed turns, which pay for every embedding.
    """

    def __init__(self) -> None:
        self.inner = default_embeddings()
        self.caching = True
        self._cache: dict[str, list[float]] = {}
        # Composed vectors stay in one array (as lists they would take 1.2 GB
        # at 100,000 and swell the resident memory being measured).
        self._rows: dict[str, int] = {}
        self._matrix = np.zeros((0, 0), dtype=np.float32)

    def compose(self, turns: list[str], count: int) -> list[str]:
        """``count`` distinct two-turn texts; each one's vector is the normalised sum of its turns'.

        Only the distinct ``turns`` are embedded; the composed vectors are cached.
        """
        distinct = list(dict.fromkeys(turns))
        vectors = np.asarray(self.embed_documents(distinct), dtype=np.float32)
        n = len(distinct)
        if count > n * (n - 1):
            raise ValueError(f"{n} distinct turns make at most {n * (n - 1)} pairs; got {count}.")
        first = np.arange(count) % n
        second = (first + 1 + np.arange(count) // n) % n
        summed = vectors[first] + vectors[second]
        summed /= np.linalg.norm(summed, axis=1, keepdims=True)
        pairs = zip(first.tolist(), second.tolist(), strict=True)
        texts = [f"input: {distinct[a]}\noutput: {distinct[b]}" for a, b in pairs]
        self._rows, self._matrix = {t: i for i, t in enumerate(texts)}, summed
        return texts

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not self.caching:
            return self.inner.embed_documents(texts)
        if texts and all(t in self._rows for t in texts):
            composed: list[list[float]] = self._matrix[[self._rows[t] for t in texts]].tolist()
            return composed
        new = [t for t in dict.fromkeys(texts) if t not in self._cache]
        self._cache.update(zip(new, self.inner.embed_documents(new), strict=True))
        return [self._cache[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def timed(run: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU milliseconds of one call (CPU of this thread only)."""
    wall, cpu = time.perf_counter(), time.thread_time()
    run()
    return 1000 * (time.perf_counter() - wall), 1000 * (time.thread_time() - cpu)


def quantiles(values: Sequence[float]) -> tuple[float, float]:
    """Median and 95th percentile."""
    return statistics.median(values), float(np.percentile(values, 95))


@dataclass
class Run:
    """Per-turn samples of one way of running the turns."""

    name: str
    hot: list[tuple[float, float]] = field(default_factory=list)
    """Wall and calling-thread CPU ms of save_context + load_memory_variables."""
    process_cpu: list[float] = field(default_factory=list)
    """CPU ms of the whole process (every thread) per turn, waiting included."""
    background_wall: list[float] = field(default_factory=list)
    """Ms the background writer was still busy after the user's pause (chat pacing)."""
    max_queued: int = 0
    """Most turns waiting to be written at any turn's end."""
    final_flush_ms: float = 0.0
    """flush() after the last turn."""
    save: list[float] = field(default_factory=list)
    """Wall ms of save_context alone."""
    recall: list[float] = field(default_factory=list)
    """Wall ms of load_memory_variables alone."""
    floor: list[tuple[float, float, float]] = field(default_factory=list)
    """Wall ms of the floor's parts for the same questions: embed, nearest, lexical."""

    def floor_row(self) -> str:
        """The run beside its floor: medians and p95s, and the ratio of the medians."""
        ours = quantiles([s[0] for s in self.hot])
        floor = quantiles([sum(parts) for parts in self.floor])
        parts = [statistics.median(p[i] for p in self.floor) for i in range(3)]
        cells = " | ".join(f"{c:.2f}" for c in (*ours, *floor, *parts))
        return f"| {self.name} | {cells} | {ours[0] / floor[0]:.2f}x |"

    def row(self) -> str:
        wall, cpu = quantiles([s[0] for s in self.hot]), quantiles([s[1] for s in self.hot])
        process = statistics.median(self.process_cpu)
        background = process - statistics.median([s[1] for s in self.hot])
        cells = [*wall, *cpu, process, max(background, 0.0)]
        text = " | ".join(f"{c:.2f}" for c in cells)
        return f"| {self.name} | {text} | {self.max_queued} |"


#: The ways of running the turns: name -> write mode (see the module's docstring).
RUNS = {"sync": "sync", "chat": "background", "back-to-back": "background"}
_TITLES = {
    "sync": "sync",
    "chat": "background, chat pacing",
    "back-to-back": "background, back-to-back",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Prefill, measure, print markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stored", type=int, default=10_000, help="turns stored before timing")
    parser.add_argument("--turns", type=int, default=200, help="timed turns per run")
    parser.add_argument("--warmup", type=int, default=20, help="untimed turns before each run")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--modes", default="persistent,memory", help="Chroma modes to measure, comma-separated"
    )
    parser.add_argument(
        "--runs",
        default=",".join(RUNS),
        help=f"runs to make, comma-separated, of: {', '.join(RUNS)}",
    )
    args = parser.parse_args(argv)
    unknown = set(args.runs.split(",")) - set(RUNS)
    if unknown:
        parser.error(f"unknown runs {sorted(unknown)}; use some of: {', '.join(RUNS)}")
    embeddings = PrefillCache()
    for mode in args.modes.split(","):
        embeddings.caching = True
        measure(mode, args, embeddings)
    return 0


def measure(mode: str, args: argparse.Namespace, embeddings: PrefillCache) -> None:
    """Run the turns each way asked, beside their floor; print the tables."""
    per_run = args.warmup + args.turns
    names = args.runs.split(",")
    composed = args.stored > COMPOSED_FROM
    texts = chat_texts(args.data, len(names) * (2 * per_run + 1) + 2 * args.turns)
    live, questions = iter(texts[: -2 * args.turns]), texts[-2 * args.turns :: 2]
    if composed:
        embeddings.caching = True
        prefill = embeddings.compose(chat_texts(args.data, args.stored), args.stored)
    else:
        prefill = chat_texts(args.data, args.stored)
    runs: list[Run] = []
    prefill_seconds: list[float] = []
    scale: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as root:
        for number, name in enumerate(names):
            # A fresh store for each run (Chroma's adds get slower as single-turn
            # adds pile up after a bulk load, which would penalise the last run),
            # except at scale, where prefilling takes minutes: one store for all.
            shared = composed and number > 0
            folder = f"{root}/store" if composed else f"{root}/store{number}"
            memory = VectorMemory(
                mode=mode,
                path=folder,
                collection="latency",
                k=10,
                embeddings=embeddings,
                write=RUNS[name],
            )
            if not shared:
                embeddings.caching = True
                started = time.perf_counter()
                for start in range(0, len(prefill), 1000):
                    batch = prefill[start : start + 1000]
                    metadatas = [{"turn": start + i} for i in range(len(batch))]
                    memory.add(batch, metadatas=metadatas, progress=False)
                prefill_seconds.append(time.perf_counter() - started)
                embeddings.caching = False
            run = run_turns(memory, _TITLES[name], live, args)
            run.floor = floor(memory, embeddings.inner, questions)
            runs.append(run)
        if composed:
            scale = footprint(memory, folder, prefill, embeddings, questions[0])
    embedder = embeddings.inner
    pairs = [(texts[2 * i], texts[2 * i + 1]) for i in range(args.turns)]
    embed_doc = [
        timed(lambda q=q, a=a: embedder.embed_documents([f"input: {q}\noutput: {a}"]))
        for q, a in pairs
    ]
    embed_query = [timed(lambda q=q: embedder.embed_query(q)) for q, _ in pairs]

    print(f"# VectorMemory per-turn cost at {args.stored:,} stored turns, mode={mode!r}\n")
    how = "one store for all runs" if composed else "each run on a store of its own"
    kind = "composed turns (see the module's docstring)" if composed else "LoCoMo turns"
    print(
        f"Chroma mode {mode!r}, k=10, defaults otherwise; {how}, prefilled with "
        f"{args.stored:,} {kind} by add() in batches of 1,000 (in {prefill_seconds[0]:.1f} s), "
        f"then {args.turns} timed turns after {args.warmup} warm-up turns; one turn = "
        "save_context + load_memory_variables (the hot path).\n"
    )
    print(
        "| run | hot path median ms | p95 ms | hot CPU median ms | p95 ms "
        "| process CPU/turn ms | other threads' CPU/turn ms | max queued |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for run in runs:
        print(run.row())
    for name, samples in (("embed one stored turn", embed_doc), ("embed one query", embed_query)):
        wall, cpu = quantiles([s[0] for s in samples]), quantiles([s[1] for s in samples])
        cells = " | ".join(f"{c:.2f}" for c in (*wall, *cpu))
        print(f"| {name} (alone) | {cells} | | | |")
    print(
        "\nBeside the floor (embed the query + Chroma's nearest 100 + our BM25 top 100, the "
        f"same {len(questions)} questions on the same store, right after the run's turns):\n"
    )
    print(
        "| run | ours median ms | p95 ms | floor median ms | p95 ms | embed | nearest "
        "| lexical | ours / floor |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        print(run.floor_row())
    for run in runs:
        if run.background_wall:
            written, written_p95 = quantiles(run.background_wall)
            print(
                f"\nChat pacing: after the user's pause of {PAUSE_SECONDS} s the background "
                f"writer was busy for {written:.1f} ms more (median; p95 {written_p95:.1f})."
            )
        elif run.name.endswith("back-to-back"):
            print(
                f"\nBack-to-back: at most {run.max_queued} turn(s) waited at a turn's end; "
                f"flush() after the last turn took {run.final_flush_ms:.1f} ms."
            )
    if scale:
        print_scale(runs, scale, args.stored)
    print(flush=True)


def floor(
    memory: VectorMemory, embedder: Embeddings, questions: Sequence[str]
) -> list[tuple[float, float, float]]:
    """Wall ms of each part of the floor, per question: embed, nearest, lexical."""
    backend: Any = memory.backend
    store, namespace, space = backend.store, backend._key, backend._space
    recall, config = backend.outbox.recall, memory.recall
    candidates = config.candidates
    parts = []
    for question in questions:
        started = time.perf_counter()
        vector = embedder.embed_query(question)
        embedded = time.perf_counter()
        store.nearest(namespace, vector, n=candidates)
        nearest = time.perf_counter()
        recall.lexical(space, question, config, limit=candidates)
        done = time.perf_counter()
        parts.append(
            (1000 * (embedded - started), 1000 * (nearest - embedded), 1000 * (done - nearest))
        )
    return parts


def footprint(
    memory: VectorMemory, folder: str, texts: Sequence[str], embeddings: PrefillCache, query: str
) -> dict[str, float]:
    """The scale figures: memory, disk, the lexical index per turn, a search after a restart."""
    memory.flush()
    figures = {"rss_mb": _rss_mb(), "disk_mb": _folder_mb(folder)}
    # A restart, as far as this process goes: nothing of the namespace is known in it.
    backend: Any = memory.backend
    backend.outbox.recall._known.clear()
    again = VectorMemory(
        mode=memory.mode, path=folder, collection="latency", k=10, embeddings=embeddings
    )
    figures["first_search_s"] = (
        timed(lambda: again.load_memory_variables({"input": query}))[0] / 1000
    )
    figures["rss_after_restart_mb"] = _rss_mb()
    outbox = backend.outbox.where
    figures["lexical_bytes_per_turn"] = os.path.getsize(outbox) / max(1, backend.count())
    return figures


def print_scale(runs: Sequence[Run], scale: dict[str, float], stored: int) -> None:
    print(f"\nAt {stored:,} stored turns (one namespace):\n")
    print("| figure | value |")
    print("|---|---|")
    for run in runs:
        for part, samples in (("save_context", run.save), ("load_memory_variables", run.recall)):
            median, p95 = quantiles(samples)
            print(f"| {part}, {run.name}: median / p95 ms | {median:.2f} / {p95:.2f} |")
    print(f"| resident memory (RSS) after the runs | {scale['rss_mb']:.0f} MB |")
    print(f"| store on disk (Chroma folder and outbox) | {scale['disk_mb']:.0f} MB |")
    print(f"| recall index per turn (SQL file) | {scale['lexical_bytes_per_turn']:.0f} bytes |")
    print(
        f"| first search of a new memory on the store (nothing of the namespace known; a "
        f"process restart: benchmarks/scale_out.py) | "
        f"{scale['first_search_s']:.1f} s (RSS then {scale['rss_after_restart_mb']:.0f} MB) |"
    )


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _folder_mb(folder: str) -> float:
    total = 0
    for where, _, files in os.walk(folder):
        total += sum(os.path.getsize(os.path.join(where, f)) for f in files)
    return total / 2**20


def run_turns(
    memory: VectorMemory, name: str, live: Iterator[str], args: argparse.Namespace
) -> Run:
    """Warm-up turns, then timed ones; chat pacing lets the writer finish between turns."""
    run = Run(name)
    chat = name.endswith("chat pacing")
    count = args.warmup + args.turns
    texts = [next(live) for _ in range(2 * count + 1)]
    backend: Any = memory.backend
    for i in range(count):
        question, answer, following = texts[2 * i], texts[2 * i + 1], texts[2 * i + 2]
        cpu = time.process_time()
        save = timed(lambda q=question, a=answer: memory.save_context({"input": q}, {"output": a}))
        if chat:
            # The user reads the answer and types (a pause longer than the writer
            # ever puts a write off): the writer has time to finish.
            time.sleep(PAUSE_SECONDS)
            waited = time.perf_counter()
            background_writer().flush()
            waited_ms = 1000 * (time.perf_counter() - waited)
        load = timed(lambda f=following: memory.load_memory_variables({"input": f}))
        queued = len(backend._pending)
        if i >= args.warmup:
            run.hot.append((save[0] + load[0], save[1] + load[1]))
            run.save.append(save[0])
            run.recall.append(load[0])
            run.process_cpu.append(1000 * (time.process_time() - cpu))
            run.max_queued = max(run.max_queued, queued)
            if chat:
                run.background_wall.append(waited_ms)
    run.final_flush_ms = timed(memory.flush)[0]
    return run


if __name__ == "__main__":
    raise SystemExit(main())
