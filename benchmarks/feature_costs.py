"""What a configured feature adds to an in-memory token buffer turn, beside the plain memory.

Run from the repository root::

    PYTHONPATH=. python benchmarks/feature_costs.py [--rounds 9] [--turns 300]

Three token buffers (500 tokens) take the same turns, interleaved round by
round in one process: a plain one (nothing to count, no retention), one with
``retention={"keep_messages": 200}``, and one made to start an accounting
operation on every save and load, as a memory with calls to count does.
Prints each one's median µs a turn and its median ratio to the plain one.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from benchmarks.short_term import make_turns
from memories import TokenBufferMemory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--turns", type=int, default=300, help="turns a round")
    args = parser.parse_args()
    turns = make_turns(args.turns * args.rounds + 300)
    counting = TokenBufferMemory(max_token_limit=500)
    counting.__dict__["_accounted"] = True  # as a memory with calls to count
    memories = {
        "plain": TokenBufferMemory(max_token_limit=500),
        "keep_messages=200": TokenBufferMemory(
            max_token_limit=500, retention={"keep_messages": 200}
        ),
        "an operation per save and load": counting,
    }

    def turn(memory: TokenBufferMemory, human: str, ai: str) -> None:
        memory.save_context({"input": human}, {"output": ai})
        memory.load_memory_variables({})

    for memory in memories.values():
        for human, ai in turns[:300]:
            turn(memory, human, ai)
    medians: dict[str, list[float]] = {name: [] for name in memories}
    gc.disable()
    for r in range(args.rounds):
        chunk = turns[300 + r * args.turns : 300 + (r + 1) * args.turns]
        for name, memory in memories.items():
            times = []
            for human, ai in chunk:
                started = time.perf_counter_ns()
                turn(memory, human, ai)
                times.append(time.perf_counter_ns() - started)
            medians[name].append(statistics.median(times) / 1e3)
    plain = medians["plain"]
    for name, values in medians.items():
        ratio = statistics.median(a / b for a, b in zip(values, plain, strict=True))
        print(f"{name:32s} {statistics.median(values):7.1f} µs  {ratio:.2f}x")


if __name__ == "__main__":
    main()
