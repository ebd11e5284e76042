"""Per-turn cost of VectorMemory at 10,000 stored turns, on the default persistent store.

Run from the repository root::

    python benchmarks/vector_latency.py [--stored 10000] [--turns 200] [--data LOCOMO_JSON]

A ``VectorMemory(k=10)`` with every other setting at its default (embedded
persistent Chroma in a temporary folder, MiniLM embeddings, hybrid recall) is
prefilled with ``--stored`` turns through ``add`` in batches, then each
measured turn is one ``save_context`` plus one ``load_memory_variables``, as a
chain does. Texts are LoCoMo chat turns when the data file is there, else
generated sentences. It prints the median and p95 of wall time and of process
CPU time (which leaves out waiting for a machine that other jobs keep busy),
and the same for the parts: embedding the stored turn, embedding the query,
and the rest (outbox, Chroma write, Chroma query, BM25, fusion).
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
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.embeddings import Embeddings

from memories.vector import VectorMemory
from memories.vector.memory import default_embeddings

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
    """Wall and CPU milliseconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return 1000 * (time.perf_counter() - wall), 1000 * (time.process_time() - cpu)


def row(name: str, samples: Sequence[tuple[float, float]]) -> str:
    """A markdown row: median and p95 of wall and CPU milliseconds."""
    wall = [s[0] for s in samples]
    cpu = [s[1] for s in samples]
    cells = [
        statistics.median(wall),
        float(np.percentile(wall, 95)),
        statistics.median(cpu),
        float(np.percentile(cpu, 95)),
    ]
    return f"| {name} | " + " | ".join(f"{c:.2f}" for c in cells) + " |"


def main(argv: Sequence[str] | None = None) -> int:
    """Prefill, measure, print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stored", type=int, default=10_000, help="turns stored before timing")
    parser.add_argument("--turns", type=int, default=200, help="timed turns")
    parser.add_argument("--warmup", type=int, default=20, help="untimed turns first")
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
    """Prefill a memory in ``mode`` and print its per-turn table."""

    texts = chat_texts(args.data, args.stored + 2 * (args.warmup + args.turns))
    prefill, live = texts[: args.stored], texts[args.stored :]
    with tempfile.TemporaryDirectory() as folder:
        memory = VectorMemory(
            mode=mode,  # type: ignore[arg-type]
            path=folder,
            collection=f"latency-{Path(folder).name.lower()}",
            k=10,
            embeddings=embeddings,
        )
        started = time.perf_counter()
        for start in range(0, len(prefill), 1000):
            batch = prefill[start : start + 1000]
            memory.add(
                batch,
                metadatas=[{"turn": start + i} for i in range(len(batch))],
                progress=False,
            )
        prefill_seconds = time.perf_counter() - started
        embeddings.caching = False

        turns: list[tuple[float, float]] = []
        embed_doc: list[tuple[float, float]] = []
        embed_query: list[tuple[float, float]] = []
        embedder = embeddings.inner
        for i in range(args.warmup + args.turns):
            question, answer = live[2 * i], live[2 * i + 1]
            following = live[2 * i + 2] if 2 * i + 2 < len(live) else question

            def turn(q: str = question, a: str = answer, f: str = following) -> None:
                memory.save_context({"input": q}, {"output": a})
                memory.load_memory_variables({"input": f})

            sample = timed(turn)
            if i >= args.warmup:
                turns.append(sample)
                doc = f"input: {question}\noutput: {answer}"
                embed_doc.append(timed(lambda d=doc: embedder.embed_documents([d])))
                embed_query.append(timed(lambda f=following: embedder.embed_query(f)))
        rest = [
            (t[0] - d[0] - q[0], t[1] - d[1] - q[1])
            for t, d, q in zip(turns, embed_doc, embed_query, strict=True)
        ]
        stored = len(memory._index)

    print(f"# VectorMemory per-turn cost at {stored:,} stored turns, mode={mode!r}\n")
    print(
        f"Chroma mode {mode!r}, k=10, defaults otherwise. Prefill of {args.stored:,} turns with "
        f"add() in batches of 1,000: {prefill_seconds:.1f} s. {args.turns} timed turns after "
        f"{args.warmup} warm-up turns; one turn = save_context + load_memory_variables.\n"
    )
    print("| operation | median ms | p95 ms | CPU median ms | CPU p95 ms |")
    print("|---|---|---|---|---|")
    print(row("save_context + load_memory_variables (k=10)", turns))
    print(row("  of which: embed the stored turn (timed apart)", embed_doc))
    print(row("  of which: embed the query (timed apart)", embed_query))
    print(row("  the rest: outbox, Chroma write + query, BM25, fusion", rest))
    print(flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
