"""What a transcript retention costs a turn, beside the same memory without one.

Run from the repository root::

    python benchmarks/retention.py [--messages 1000 20000] [--turns 200]

For each log size, a SQLite session is filled with recent messages (nothing
expired: the costliest case for ``keep_days``, every row kept), then a window
and a token buffer memory each run ``--turns`` turns (a save and a load),
without a retention, with ``keep_days=7`` and with ``keep_messages=200``.
Prints milliseconds per turn, side by side.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from memories import SQLiteHistory, TokenBufferMemory, WindowMemory

POLICIES: dict[str, Any] = {
    "none": None,
    "keep_days=7": {"keep_days": 7},
    "keep_messages=200": {"keep_messages": 200},
}
MEMORIES: list[tuple[type, dict[str, Any]]] = [
    (WindowMemory, {"k": 5}),
    (TokenBufferMemory, {"max_token_limit": 500, "token_counter": "chars"}),
]


def fill(path: Path, messages: int) -> None:
    history = SQLiteHistory(path, session_id="s")
    for start in range(0, messages, 500):
        history.append(
            [
                m
                for i in range(start, start + 500, 2)
                for m in (HumanMessage(f"q{i}"), AIMessage("a"))
            ]
        )


def per_turn(path: Path, cls: type, options: dict[str, Any], retention: Any, turns: int) -> float:
    memory = cls(chat_memory=SQLiteHistory(path, session_id="s"), retention=retention, **options)
    memory.load_memory_variables({})
    start = time.perf_counter()
    for _ in range(turns):
        memory.save_context({"input": "hi"}, {"output": "hello"})
        memory.load_memory_variables({})
    return (time.perf_counter() - start) / turns * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[1000, 20000])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    print(f"{'messages':>8}  {'memory':<18}" + "".join(f"{name:>20}" for name in POLICIES))
    with tempfile.TemporaryDirectory() as folder:
        for messages in args.messages:
            for cls, options in MEMORIES:
                path = Path(folder) / f"{messages}-{cls.__name__}.db"
                fill(path, messages)
                cells = [per_turn(path, cls, options, p, args.turns) for p in POLICIES.values()]
                row = "".join(f"{ms:>17.2f} ms" for ms in cells)
                print(f"{messages:>8}  {cls.__name__:<18}{row}")


if __name__ == "__main__":
    main()
