"""A store made before shards: as it was, migrated on first open, and after.

Run from the repository root::

    python benchmarks/reshard.py [--users 500] [--docs 5] [--reshard]

Builds, in a temporary folder, the layout every store had before shards: a
Chroma collection per user namespace (``--docs`` random 384-dimension unit
vectors each). Then, each in a fresh process, one query per user (resident
memory, open files, query latency): on the old layout as it was read before
(``demote_on_open=False``); on first open by today's store, which moves each
namespace into its shard as it first looks it up (the latency is the first
query's, the move included); and on the migrated store. The three are printed
side by side. With ``--reshard`` the migration is
:meth:`memories.integrations.chroma.ChromaStore.reshard` instead (timed), and
the first-open column reads an already migrated store.
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


def _store(folder: str, *, demote_on_open: bool = True) -> Any:
    from memories.integrations.chroma import ChromaStore

    return ChromaStore(path=folder, collection=PREFIX, demote_on_open=demote_on_open)


def _unit(rng: np.random.Generator, n: int) -> list[list[float]]:
    rows = rng.normal(size=(n, DIM))
    unit: list[list[float]] = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).tolist()
    return unit


def build(folder: str, users: int, docs: int) -> dict[str, Any]:
    """The old layout: a collection per namespace, written as the store before shards did."""
    from memories.integrations.chroma import moves

    store, rng = _store(folder, demote_on_open=False), np.random.default_rng(0)
    for user in range(users):
        namespace = f"users/u{user}"
        own = moves.own_collection_made(store, namespace, incomplete=False)
        own.add(
            ids=[str(i) for i in range(docs)],
            documents=[f"{namespace} turn {i}" for i in range(docs)],
            embeddings=_unit(rng, docs),
            metadatas=[{"namespace": namespace, "turn": i} for i in range(docs)],
        )
    return {}


def read(folder: str, users: int, docs: int, *, demote_on_open: bool = True) -> dict[str, Any]:
    """One query of 4 results per user, as each user's next turn would make."""
    store, rng, took = _store(folder, demote_on_open=demote_on_open), np.random.default_rng(1), []
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


def read_old(folder: str, users: int, docs: int) -> dict[str, Any]:
    """The old layout read as it was: no namespace moved on opening."""
    return read(folder, users, docs, demote_on_open=False)


STEPS = {"build": build, "read-old": read_old, "read": read, "reshard": reshard}


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
    parser.add_argument(
        "--reshard", action="store_true", help="migrate with reshard, not on first open"
    )
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)  # the child process
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        print(json.dumps(STEPS[args.step](args.folder, args.users, args.docs)))
        return
    with tempfile.TemporaryDirectory(prefix="memories-reshard-") as folder:
        _child("build", folder, args.users, args.docs)
        before = _child("read-old", folder, args.users, args.docs)
        moved = _child("reshard", folder, args.users, args.docs) if args.reshard else None
        first = _child("read", folder, args.users, args.docs)
        after = _child("read", folder, args.users, args.docs)
    print(f"{args.users} users x {args.docs} documents, one query each, in a fresh process")
    columns = ("before (collection each)", "first open (moves)", "after")
    if moved is not None:
        columns = ("before (collection each)", "after reshard", "again")
    print(f"{'':16}" + "".join(f"{c:>26}" for c in columns))
    rows = (("rss_mb", "MB"), ("open_files", ""), ("p50_ms", "ms"), ("p95_ms", "ms"))
    for name, unit in rows:
        label = name + (" " + unit if unit else "")
        print(f"{label:16}" + "".join(f"{r[name]:>26.1f}" for r in (before, first, after)))
    print(
        f"{'collections':16}" + "".join(f"{r['collections']:>26}" for r in (before, first, after))
    )
    if moved is not None:
        print(f"reshard: {moved['moved']} namespaces moved in {moved['seconds']:.1f} s")


if __name__ == "__main__":
    main()
