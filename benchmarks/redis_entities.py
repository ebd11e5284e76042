"""RedisEntityStore beside LangChain's RedisEntityStore: what keeping every version costs.

Run from the repository root::

    python -m benchmarks.redis_entities [--entities 200] [--writes 2000] [--reads 2000]

A throwaway ``redis-server`` is started on loopback (``tests/redis_server.py``).
Both stores get the same ``--writes`` summaries (over ``--entities`` names,
a few hundred characters each) and the same ``--reads``; each call's time is
measured, p50 and p95 printed side by side. LangChain's store overwrites one
string per entity (``SET``, ``GETEX``); ours appends a version in one
watched ``MULTI``/``EXEC`` (type checks, the sequence, the list, the index)
and reads the newest version with its times to live kept in one transaction.
Ours also lists the current entities (LangChain's cannot): its time is
printed for ``--entities`` names.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import warnings
from collections.abc import Callable

from memories.stores.entities.redis_summaries import RedisEntityStore
from tests.redis_server import redis_server


def timed(calls: list[Callable[[], object]]) -> tuple[float, float]:
    """p50 and p95 of the calls, in milliseconds."""
    times = []
    for call in calls:
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=200)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--reads", type=int, default=2000)
    args = parser.parse_args()
    from langchain_classic.memory.entity import RedisEntityStore as LangChainRedis

    rng = random.Random(7)
    names = [f"Entity{i}" for i in range(args.entities)]
    writes = [(rng.choice(names), f"Summary {i}: " + "words " * 60) for i in range(args.writes)]
    reads = [rng.choice(names) for _ in range(args.reads)]
    with redis_server() as server, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = LangChainRedis(url=server.url, session_id="theirs", redis_client=None)
        ours = RedisEntityStore(url=server.url, session_id="ours")
        rows = []
        for label, store in (
            ("LangChain RedisEntityStore", theirs),
            ("memories RedisEntityStore", ours),
        ):
            set_p50, set_p95 = timed([lambda s=store, e=e, v=v: s.set(e, v) for e, v in writes])
            get_p50, get_p95 = timed([lambda s=store, e=e: s.get(e, "") for e in reads])
            rows.append((label, set_p50, set_p95, get_p50, get_p95))
        listing = timed([ours.entities for _ in range(20)])
        versions = sum(len(ours.history(name)) for name in names)
        where = server.url
    print(f"redis-server on loopback ({where}); {args.writes} writes over {args.entities} entities")
    print(f"{'store':28} {'set p50':>8} {'set p95':>8} {'get p50':>8} {'get p95':>8}  (ms)")
    for label, *numbers in rows:
        print(f"{label:28} " + " ".join(f"{n:8.3f}" for n in numbers))
    print(
        f"ours keeps {versions} versions (LangChain's: {args.entities} values); "
        f"entities() of {args.entities} names: p50 {listing[0]:.2f} ms (LangChain's cannot list)"
    )


if __name__ == "__main__":
    main()
