"""Example selection at 10,000 examples: ExampleMemory beside LangChain's example selectors.

Run from the repository root::

    python benchmarks/examples.py [--examples 10000] [--queries 200] [--k 4] [--data LOCOMO_JSON]

Examples are LoCoMo chat turns (``input``: a turn, ``output``: the reply that
follows it), queries are LoCoMo's questions; without the data file, made-up
sentences. Every selector gets the same examples and the same embeddings
(the default offline MiniLM; each text embedded once and cached, so the
timings are of selection, not of embedding documents; the query embedding
is paid on every selection, as in use).

Rows, one run, side by side:

- latency of ``select_examples`` (median and p95, ms): ours with dense,
  hybrid and dense+MMR selection; LangChain's ``SemanticSimilarityExampleSelector``
  and ``MaxMarginalRelevanceExampleSelector`` over ``InMemoryVectorStore``
  (the store their docs use), and over Chroma when ``langchain-chroma`` is installed;
- overlap@k of each of ours with the LangChain selector of the same kind:
  the share of their ``k`` examples that ours also selects.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.example_selectors import (
    MaxMarginalRelevanceExampleSelector,
    SemanticSimilarityExampleSelector,
)
from langchain_core.vectorstores import InMemoryVectorStore

from benchmarks.vector_latency import DEFAULT_DATA, PrefillCache, chat_texts
from memories.long_term.examples import ExampleMemory

Selector = Callable[[dict[str, str]], list[dict[str, Any]]]


def examples_and_queries(
    path: Path, count: int, queries: int
) -> tuple[list[dict[str, str]], list[str]]:
    """``count`` input/output examples from consecutive chat turns, and ``queries`` questions.

    LoCoMo's dev split has 2,760 turns: past that, a turn comes again marked
    ``(take 2)``, ``(take 3)``..., so no two examples are the same text (exact
    copies tie, and a tie is broken differently by each selector). The queries
    are LoCoMo's questions about the conversations (else later generated turns).
    """
    texts = chat_texts(path, count + 1)
    distinct = len(dict.fromkeys(texts))
    marked = [t if i < distinct else f"{t} (take {i // distinct + 1})" for i, t in enumerate(texts)]
    examples = [{"input": marked[i], "output": texts[i + 1]} for i in range(count)]
    asked: list[str] = []
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        asked = [qa["question"] for sample in data for qa in sample.get("qa", [])]
    if len(asked) < queries:
        asked += chat_texts(Path("/nonexistent"), count + queries)[count:]
    return examples, asked[:queries]


def latency(select: Selector, queries: Sequence[str]) -> tuple[float, float, list[list[str]]]:
    """Median and p95 ms of one selection, and what each query selected (outputs as keys)."""
    samples, chosen = [], []
    select({"input": queries[0]})  # warm up (index load, first query)
    for query in queries:
        start = time.perf_counter()
        picked = select({"input": query})
        samples.append(1000 * (time.perf_counter() - start))
        chosen.append([e["input"] + "\x00" + e["output"] for e in picked])
    return statistics.median(samples), float(np.percentile(samples, 95)), chosen


def overlap(ours: list[list[str]], theirs: list[list[str]]) -> float:
    """Mean share of their selection that ours also made (as multisets)."""
    shares = [
        sum((Counter(a) & Counter(b)).values()) / max(len(b), 1)
        for a, b in zip(ours, theirs, strict=True)
    ]
    return 100 * statistics.mean(shares)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)

    examples, queries = examples_and_queries(args.data, args.examples, args.queries)
    embeddings = PrefillCache()
    start = time.perf_counter()
    embeddings.embed_documents([e["input"] for e in examples])
    print(f"{len(examples)} examples embedded in {time.perf_counter() - start:.1f} s (cached)")

    folder = tempfile.mkdtemp(prefix="examples-bench-")
    ours: dict[str, Selector] = {}
    for name, options in [
        ("dense", {"recall": {"mode": "dense"}}),
        ("hybrid", {}),
        ("dense + MMR", {"recall": {"mode": "dense"}, "mmr": True}),
    ]:
        memory = ExampleMemory(
            path=f"{folder}/chroma",
            collection=f"b{uuid.uuid4().hex[:8]}",
            embeddings=embeddings,
            k=args.k,
            input_keys=["input"],
            **options,
        )
        start = time.perf_counter()
        memory.add_examples(examples, progress=False)
        print(
            f"ours, {name}: {len(examples)} examples stored in {time.perf_counter() - start:.1f} s"
        )
        ours[name] = memory.select_examples

    theirs: dict[str, Selector] = {}
    for name, cls in [
        ("similarity", SemanticSimilarityExampleSelector),
        ("MMR", MaxMarginalRelevanceExampleSelector),
    ]:
        selector = cls.from_examples(
            examples, embeddings, InMemoryVectorStore, k=args.k, input_keys=["input"]
        )
        theirs[f"LangChain {name} (InMemoryVectorStore)"] = selector.select_examples
    try:
        from langchain_chroma import Chroma
    except ImportError:
        print("langchain-chroma is not installed: no LangChain-over-Chroma row")
    else:
        selector = SemanticSimilarityExampleSelector.from_examples(
            examples, embeddings, Chroma, k=args.k, input_keys=["input"]
        )
        theirs["LangChain similarity (Chroma)"] = selector.select_examples

    embeddings.caching = False  # queries pay for their embedding
    results = {name: latency(select, queries) for name, select in {**ours, **theirs}.items()}
    print(f"\n{len(examples)} examples, {len(queries)} queries, k={args.k}\n")
    print("| selector | median ms | p95 ms | overlap@k with LangChain's of the same kind |")
    print("| --- | --- | --- | --- |")
    peer = {
        "dense": "LangChain similarity (InMemoryVectorStore)",
        "hybrid": "LangChain similarity (InMemoryVectorStore)",
        "dense + MMR": "LangChain MMR (InMemoryVectorStore)",
    }
    for name, (median, p95, chosen) in results.items():
        share = ""
        if name in peer:
            share = f"{overlap(chosen, results[peer[name]][2]):.1f}% (vs {peer[name]})"
        label = name if name.startswith("LangChain") else f"ExampleMemory, {name}"
        print(f"| {label} | {median:.2f} | {p95:.2f} | {share} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
