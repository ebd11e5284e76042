"""A store made before shards, before and after ``memories reshard``.

Run from the repository root::

    python benchmarks/reshard.py [--users 500] [--docs 5]

Builds, in a temporary folder, the layout every store had before shards: a
Chroma collection per user namespace (``--docs`` random 384-dimension unit
vectors each). Then, each in a fresh process: one query per user on the old
layout (resident memory, open files, query latency), the reshard itself
(:meth:`memories.integrations.chroma.ChromaStore.reshard`, timed), and the same
queries on the resharded store. The two reads are printed side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

DIM = 384
PREFIX = "bench"


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _store(folder: str) -> Any:
    from memories.integrations.chroma import ChromaStore

    return ChromaStore(path=folder, collection=PREFIX)


def _unit(rng: np.random.Generator, n: int) -> list[list[float]]:
    rows = rng.normal(size=(n, DIM))
    unit: list[list[float]] = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).tolist()
    return unit


def build(folder: str, users: int, docs: int) -> dict[str, Any]:
    """The old layout: a collection per namespace, written as the store before shards did."""
    store, rng = _store(folder), np.random.default_rng(0)
    for user in range(users):
        namespace = f"users/u{user}"
        own = store._own_collection_made(namespace, incomplete=False)
        own.add(
            ids=[str(i) for i in range(docs)],
            documents=[f"{namespace} turn {i}" for i in range(docs)],
            embeddings=_unit(rng, docs),
            metadatas=[{"namespace": namespace, "turn": i} for i in range(docs)],
        )
    return {}


def read(folder: str, users: int, docs: int) -> dict[str, Any]:
    """One query of 4 results per user, as each user's next turn would make."""
    store, rng, took = _store(folder), np.random.default_rng(1), []
    for user in range(users):
        start = time.perf_counter()
        found = store.nearest(f"users/u{user}", _unit(rng, 1)[0], n=4)
        took.append((time.perf_counter() - start) * 1000)
        assert len(found) == min(4, docs), found
    took.sort()
    return {
        "rss_mb": _rss_mb(),
        "open_files": len(os.listdir("/proc/self/fd")),
        "p50_ms": statistics.median(took),
        "p95_ms": took[int(0.95 * (len(took) - 1))],
        "collections": len(store._get_client().list_collections()),
    }


def reshard(folder: str, users: int, docs: int) -> dict[str, Any]:
    store = _store(folder)
    start = time.perf_counter()
    done = store.reshard()
    return {
        "seconds": time.perf_counter() - start,
        "moved": sum(d.moved for d in done),
        "collections": len(store._get_client().list_collections()),
    }


STEPS = {"build": build, "read": read, "reshard": reshard}


def _child(step: str, folder: str, users: int, docs: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--step", step, "--folder", folder, "--users", str(users),
         "--docs", str(docs)],
        check=True, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument("--docs", type=int, default=5)
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)  # the child process
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        print(json.dumps(STEPS[args.step](args.folder, args.users, args.docs)))
        return
    with tempfile.TemporaryDirectory(prefix="memories-reshard-") as folder:
        _child("build", folder, args.users, args.docs)
        before = _child("read", folder, args.users, args.docs)
        moved = _child("reshard", folder, args.users, args.docs)
        after = _child("read", folder, args.users, args.docs)
    print(f"{args.users} users x {args.docs} documents, one query each, in a fresh process")
    print(f"{'':28}{'before (collection each)':>26}{'after reshard':>16}")
    for name, unit in (("rss_mb", "MB"), ("open_files", ""), ("p50_ms", "ms"), ("p95_ms", "ms")):
        print(f"{name + (' ' + unit if unit else ''):28}{before[name]:>26.1f}{after[name]:>16.1f}")
    print(f"{'collections':28}{before['collections']:>26}{after['collections']:>16}")
    print(f"reshard: {moved['moved']} namespaces moved in {moved['seconds']:.1f} s")


if __name__ == "__main__":
    main()
