"""Per-turn cost of VectorMemory at 10,000 stored turns, on the default persistent store.

Run from the repository root::

    python benchmarks/vector_latency.py [--stored 10000] [--turns 200] [--data LOCOMO_JSON]

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
  the background writer is let finish (untimed), as it would while the
  user reads the answer and types; its time is printed apart.
- background, back-to-back: no pause at all, so the writer competes with
  the next search for the 2 cores (and the GIL); the most turns left
  waiting at a turn's end shows whether it keeps up.

For each it prints median and p95 of the hot path's wall time and of the
calling thread's CPU time (which leaves out waiting for a machine that
other jobs keep busy), the whole process's CPU per turn (every thread: the
background write included), the difference (other threads: the background
writer, and Chroma's own threads in every mode), and then embedding one
turn and one query alone for reference.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.embeddings import Embeddings

from memories.embeddings import default_embeddings
from memories.vector import VectorMemory
from memories.vector.writes import background_writer

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
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

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not self.caching:
            return self.inner.embed_documents(texts)
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
    """Ms from save_context's return until the background writer was idle (chat pacing)."""
    max_queued: int = 0
    """Most turns waiting to be written at any turn's end."""
    final_flush_ms: float = 0.0
    """flush() after the last turn."""

    def row(self) -> str:
        wall, cpu = quantiles([s[0] for s in self.hot]), quantiles([s[1] for s in self.hot])
        process = statistics.median(self.process_cpu)
        background = process - statistics.median([s[1] for s in self.hot])
        cells = [*wall, *cpu, process, max(background, 0.0)]
        text = " | ".join(f"{c:.2f}" for c in cells)
        return f"| {self.name} | {text} | {self.max_queued} |"


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
    args = parser.parse_args(argv)
    embeddings = PrefillCache()
    for mode in args.modes.split(","):
        embeddings.caching = True
        measure(mode, args, embeddings)
    return 0


def measure(mode: str, args: argparse.Namespace, embeddings: PrefillCache) -> None:
    """Run the turns three ways, each on a freshly prefilled store in ``mode``; print the table."""
    per_run = args.warmup + args.turns
    texts = chat_texts(args.data, args.stored + 3 * (2 * per_run + 1))
    prefill, live = texts[: args.stored], iter(texts[args.stored :])
    runs = []
    prefill_seconds = []
    # A fresh store for each run: Chroma's adds get slower as single-turn adds
    # pile up after a bulk load, which would penalise whichever run came last.
    for name, write in (
        ("sync", "sync"),
        ("background, chat pacing", "background"),
        ("background, back-to-back", "background"),
    ):
        with tempfile.TemporaryDirectory() as folder:
            memory = VectorMemory(
                mode=mode,  # type: ignore[arg-type]
                path=folder,
                collection=f"latency-{Path(folder).name.lower()}",
                k=10,
                embeddings=embeddings,
                write=write,  # type: ignore[arg-type]
            )
            embeddings.caching = True
            started = time.perf_counter()
            for start in range(0, len(prefill), 1000):
                batch = prefill[start : start + 1000]
                memory.add(
                    batch,
                    metadatas=[{"turn": start + i} for i in range(len(batch))],
                    progress=False,
                )
            prefill_seconds.append(time.perf_counter() - started)
            embeddings.caching = False
            runs.append(run_turns(memory, name, live, args))
    embedder = embeddings.inner
    pairs = [(prefill[2 * i], prefill[2 * i + 1]) for i in range(args.turns)]
    embed_doc = [
        timed(lambda q=q, a=a: embedder.embed_documents([f"input: {q}\noutput: {a}"]))
        for q, a in pairs
    ]
    embed_query = [timed(lambda q=q: embedder.embed_query(q)) for q, _ in pairs]

    print(f"# VectorMemory per-turn cost at {args.stored:,} stored turns, mode={mode!r}\n")
    print(
        f"Chroma mode {mode!r}, k=10, defaults otherwise. Each run on a store of its own, "
        f"prefilled with {args.stored:,} turns by add() in batches of 1,000 (the first in "
        f"{prefill_seconds[0]:.1f} s), then {args.turns} timed turns after {args.warmup} "
        "warm-up turns; one turn = save_context + load_memory_variables (the hot path).\n"
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
    chat, back = runs[1], runs[2]
    written, written_p95 = quantiles(chat.background_wall)
    print(
        f"\nChat pacing: a turn's background write was done {written:.1f} ms (median; p95 "
        f"{written_p95:.1f}) after save_context returned. Back-to-back: at most "
        f"{back.max_queued} turn(s) waited at a turn's end; flush() after the last turn took "
        f"{back.final_flush_ms:.1f} ms.\n",
        flush=True,
    )


def run_turns(
    memory: VectorMemory, name: str, live: Iterator[str], args: argparse.Namespace
) -> Run:
    """Warm-up turns, then timed ones; chat pacing lets the writer finish between turns."""
    run = Run(name)
    chat = name.endswith("chat pacing")
    count = args.warmup + args.turns
    texts = [next(live) for _ in range(2 * count + 1)]
    for i in range(count):
        question, answer, following = texts[2 * i], texts[2 * i + 1], texts[2 * i + 2]
        cpu = time.process_time()
        save = timed(lambda q=question, a=answer: memory.save_context({"input": q}, {"output": a}))
        if chat:
            # The user reads the answer and types: the writer has time to finish.
            waited = time.perf_counter()
            background_writer().flush()
            waited_ms = 1000 * (time.perf_counter() - waited)
        load = timed(lambda f=following: memory.load_memory_variables({"input": f}))
        queued = memory._index.pending_count()
        if i >= args.warmup:
            run.hot.append((save[0] + load[0], save[1] + load[1]))
            run.process_cpu.append(1000 * (time.process_time() - cpu))
            run.max_queued = max(run.max_queued, queued)
            if chat:
                run.background_wall.append(waited_ms)
    run.final_flush_ms = timed(memory.flush)[0]
    return run


if __name__ == "__main__":
    raise SystemExit(main())
