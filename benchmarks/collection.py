"""CollectionMemory: model calls and prompt tokens per turn per policy; latency at 10,000 memories.

Run from the repository root::

    python benchmarks/collection.py [--turns 60] [--stored 10000] [--probes 100] [--data FILE]

Two tables, one run:

1. **Cost of keeping the collection**: the same ``--turns`` LoCoMo turns
   through ``save_context`` under each policy (``turn``, ``every_n`` with 3,
   ``background`` with ``flush`` at the end, ``manual`` with one ``refresh``
   at the end), with a scripted model that proposes one insert per turn (a
   model's reply is not what is measured; the prompts we send are). Printed:
   model calls per turn and prompt tokens per turn (tiktoken cl100k), beside
   the vector memory, which calls no model.
2. **Latency at ``--stored`` memories** (embedded persistent Chroma, MiniLM,
   SQLite ledger): ``save_context`` of a turn (offline mode: the user's line
   stored with the duplicate check), ``search(k=5)``, and ``put``; beside
   ``VectorMemory`` (``save_context``, ``search(k=5)``) on the same texts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from benchmarks.vector_latency import DEFAULT_DATA, PrefillCache, chat_texts
from memories.kernel.tokens import TiktokenCounter
from memories.long_term.collection import CollectionMemory
from memories.long_term.vector import VectorMemory


class CountingModel(BaseChatModel):
    """Proposes one insert per reply (the prompt's last human line); counts calls and tokens."""

    calls: int = 0
    tokens: int = 0

    @property
    def _llm_type(self) -> str:
        return "counting"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls += 1
        self.tokens += TiktokenCounter()(messages)
        lines = [line for line in messages[-1].text.splitlines() if line.startswith("Human: ")]
        reply = [{"op": "insert", "content": lines[-1][7:]}] if lines else []
        return ChatResult(generations=[ChatGeneration(message=AIMessage(json.dumps(reply)))])


def cost_table(texts: Sequence[str], folder: str) -> None:
    print(f"\n## Model calls and prompt tokens per turn ({len(texts)} turns)\n")
    print("| memory, policy | model calls / turn | prompt tokens / turn |")
    print("| --- | --- | --- |")
    for policy, options in [
        ("turn", {}),
        ("every_n (3)", {"every_n": 3}),
        ("background", {"debounce": 0.0}),
        ("manual (one refresh at the end)", {}),
    ]:
        model = CountingModel()
        memory = CollectionMemory(
            llm=model,
            policy=policy.split(" ")[0],  # type: ignore[arg-type]
            update_method="json",
            mode="memory",
            collection=f"b{uuid.uuid4().hex[:8]}",
            url=f"sqlite:///{folder}/cost-{uuid.uuid4().hex[:6]}.db",
            **options,
        )
        for text in texts:
            memory.save_context({"input": text}, {"output": "ok"})
        memory.flush(timeout=60)
        if policy.startswith("manual"):
            memory.refresh()
        turns = len(texts)
        print(f"| collection, {policy} | {model.calls / turns:.2f} | {model.tokens / turns:.0f} |")
    print("| vector memory (peer) | 0.00 | 0 |")


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return 1000 * (time.perf_counter() - start)


def stats(samples: Sequence[float]) -> str:
    return f"{statistics.median(samples):.1f} | {float(np.percentile(samples, 95)):.1f}"


def latency_table(texts: Sequence[str], probes: Sequence[str], folder: str) -> None:
    embeddings = PrefillCache()
    collection = CollectionMemory(
        path=f"{folder}/chroma",
        url=f"sqlite:///{folder}/ledger.db",
        embeddings=embeddings,
        collection="bench-collection",
    )
    vector = VectorMemory(path=f"{folder}/chroma", embeddings=embeddings, collection="bench-vector")
    start = time.perf_counter()
    embeddings.embed_documents(list(texts))  # both prefills below read these from the cache
    print(f"\nEmbedded {len(texts)} texts in {time.perf_counter() - start:.1f} s (cached)")
    start = time.perf_counter()
    collection.put_many(list(texts), progress=False)
    filled = time.perf_counter() - start
    start = time.perf_counter()
    vector.add(list(texts), progress=False)
    print(
        f"Prefilled {len(texts)} memories in {filled:.1f} s (collection, put_many) and "
        f"{time.perf_counter() - start:.1f} s (vector, add); embeddings cached.\n"
    )
    embeddings.caching = False
    rows: dict[str, list[float]] = {k: [] for k in ("cs", "cq", "cp", "vs", "vq")}
    for probe in probes:
        turn = ({"input": probe}, {"output": "ok"})
        rows["cs"].append(timed(lambda turn=turn: collection.save_context(*turn)))
        rows["cq"].append(timed(lambda probe=probe: collection.search(probe, k=5)))
        rows["cp"].append(timed(lambda probe=probe: collection.put(f"{probe} (noted)")))
        rows["vs"].append(timed(lambda turn=turn: vector.save_context(*turn)))
        vector.flush()
        rows["vq"].append(timed(lambda probe=probe: vector.search(probe, k=5)))
    print(f"## Latency at {len(texts)} memories ({len(probes)} probes, ms)\n")
    print("| operation | median | p95 |")
    print("| --- | --- | --- |")
    saved = "collection save_context (offline insert, duplicate check)"
    print(f"| {saved} | {stats(rows['cs'])} |")
    print(f"| collection search k=5 | {stats(rows['cq'])} |")
    print(f"| collection put | {stats(rows['cp'])} |")
    peer = "vector memory save_context (peer; background write, flushed between)"
    print(f"| {peer} | {stats(rows['vs'])} |")
    print(f"| vector memory search k=5 (peer) | {stats(rows['vq'])} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--stored", type=int, default=10_000)
    parser.add_argument("--probes", type=int, default=100)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    texts = chat_texts(args.data, args.stored + args.probes)
    distinct = len(dict.fromkeys(texts))
    marked = [t if i < distinct else f"{t} (take {i // distinct + 1})" for i, t in enumerate(texts)]
    folder = tempfile.mkdtemp(prefix="collection-bench-")
    cost_table(texts[: args.turns], folder)
    latency_table(marked[: args.stored], marked[args.stored :], folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
