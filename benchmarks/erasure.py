"""What making an erasure physical costs: erase time with and without compaction.

Run from the repository root::

    python benchmarks/erasure.py [--turns 60 10000] [--facts 60]

For each size, two users each get ``--turns`` chat turns (a SQLite log),
``--turns`` vector documents (embedded Chroma, bulk-added), ``--facts``
collection items and 60 profile versions. The folder is copied three times
and one user erased in each copy:

- ``rows only``: ``erase_user(..., compaction=False)`` (what erasure did before);
- ``secure_delete``: the same with ``PRAGMA secure_delete = ON`` on every SQLite
  connection the library opens, then ``wal_checkpoint(TRUNCATE)`` of each file
  (the cheaper alternative to a VACUUM);
- ``compaction``: ``erase_user(...)`` as it is now (FTS merge, VACUUM, WAL emptied,
  Chroma's index files' unused capacity zeroed).

Prints the seconds each took, the size of the files, and how many copies of the
erased user's marker word every file of the folder still holds after.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository (tests' embeddings) importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.messages import AIMessage, HumanMessage

from memories import erase_user
from memories.core.combined import leaves_of
from memories.core.config import create_memory, with_namespace, with_session
from memories.stores import sql

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"
USERS = ("maya", "omar")


def config_for(folder: Path) -> dict[str, Any]:
    url = f"sqlite:///{folder / 'memories.db'}"
    vector = {"path": str(folder / "chroma"), "embeddings": EMBEDDINGS, "write": "sync"}
    return {
        "type": "combined",
        "memories": [
            {"type": "buffer", "history": {"type": "sql", "url": url, "session_id": "x"}},
            {"type": "profile", "url": url, "policy": "manual"},
            {"type": "collection", "url": url, **vector, "policy": "manual",
             "memory_key": "facts"},
            {"type": "vector", **vector, "memory_key": "recalled"},
        ],
    }  # fmt: skip


def marker(user: str) -> str:
    return f"Zq{user}secret"


def fill(folder: Path, turns: int, facts: int) -> None:
    config = config_for(folder)
    for user in USERS:
        memory = create_memory(with_session(with_namespace(config, f"users.{user}"), user))
        leaves = {type(leaf).__name__: leaf for leaf in leaves_of(memory)}
        word, history = marker(user), leaves["BufferMemory"].chat_memory
        for start in range(0, turns, 250):
            history.append([
                m for i in range(start, min(start + 250, turns))
                for m in (HumanMessage(f"{user} says {i} {word}"), AIMessage(f"noted {i}"))
            ])  # fmt: skip
        texts = [f"{user} turn {i} {word}" for i in range(turns)]
        leaves["VectorMemory"].add(texts, progress=False)
        for i in range(facts):
            leaves["CollectionMemory"].put(f"{user} keeps fact {i}: {word}")
        for i in range(60):
            leaves["ProfileMemory"].put({"name": user, "turn": i, "secret": word})


def copies(folder: Path, word: str) -> int:
    needle = word.lower().encode()
    return sum(f.read_bytes().lower().count(needle) for f in folder.rglob("*") if f.is_file())


def size(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6


def erase(folder: Path, **options: Any) -> float:
    start = time.perf_counter()
    report = erase_user(config_for(folder), namespace="users.maya", session="maya", **options)
    seconds = time.perf_counter() - start
    for line in report.files:
        print(f"      {line.text()}")
    return seconds


def with_secure_delete(folder: Path) -> float:
    configure: Callable[..., None] = sql._configure_sqlite

    def secure(connection: Any, record: Any) -> None:
        configure(connection, record)
        connection.execute("PRAGMA secure_delete = ON")

    sql._configure_sqlite = secure  # engines made from now on (this copy's URLs are new)
    try:
        start = time.perf_counter()
        erase_user(config_for(folder), namespace="users.maya", session="maya", compaction=False)
        for file in folder.rglob("*.db"):
            with sqlite3.connect(file) as connection:
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return time.perf_counter() - start
    finally:
        sql._configure_sqlite = configure


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[60, 10_000])
    parser.add_argument("--facts", type=int, default=60)
    args = parser.parse_args()
    for turns in args.turns:
        root = Path(tempfile.mkdtemp(prefix="memories-erasure-"))
        try:
            start = time.perf_counter()
            fill(root / "filled", turns, args.facts)
            took = time.perf_counter() - start
            print(f"{turns} turns and documents per user, {args.facts} facts: "
                  f"{size(root / 'filled'):.1f} MB, filled in {took:.0f} s")  # fmt: skip
            runs: dict[str, Callable[[Path], float]] = {
                "rows only": lambda folder: erase(folder, compaction=False),
                "secure_delete": with_secure_delete,
                "compaction": erase,
            }
            for name, run in runs.items():
                folder = root / name.replace(" ", "-")
                shutil.copytree(root / "filled", folder)
                print(f"  {name}:")
                seconds = run(folder)
                left, kept = copies(folder, marker("maya")), copies(folder, marker("omar"))
                print(f"    {seconds:.2f} s; {size(folder):.1f} MB after; erased user's "
                      f"marker {left} times in the files, the other's {kept}")  # fmt: skip
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
