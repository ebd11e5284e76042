"""Several processes sharing one memory: what a search costs when the others write.

Run from the repository root::

    python benchmarks/scale_out.py [--turns 10000 100000] [--processes 1 2 4]
                                   [--searches 40] [--baseline e79e25f]

Every process of a web app (workers behind a load balancer, a Celery worker,
a second host) reads and writes the same user's memory. This benchmark runs
one ``chroma run`` server on loopback and, for each implementation, size and
process count:

1. fills one namespace with ``--turns`` turns (``VectorMemory.add``, LoCoMo
   chat turns when ``shared/data/locomo`` is there, cheap hashed embeddings of
   64 dimensions so that the model's cost hides nothing);
2. starts a fresh process and times its *first search* (what a restart costs);
3. starts ``P`` worker processes on the namespace, each with its own outbox
   connection to the shared outbox database (the recall index beside it):
   - *quiet*: every worker searches ``--searches`` times, no one writes;
   - *writes*: every worker saves a turn, then searches, ``--searches``
     times; with P >= 2 each search comes after the other workers' writes
     (with P = 1, after its own);
   and reports the p50 and p95 of its searches and its resident memory.

The implementations run side by side in the same run: ``current`` is this
checkout, ``baseline`` a git revision (default ``e79e25f``, the last one with
the per-process BM25 index, which each process rebuilds from Chroma after
another process's write) checked out in a temporary worktree. With
``--pgvector``, ``pgvector`` is this checkout on a throwaway PostgreSQL with
pgvector (``vectors=``; no Chroma server in its path).

``--first-search`` measures instead what a fresh process waits for with the
*default* embeddings (MiniLM, int8 activations) on the default embedded store
(issue 37)::

    python benchmarks/scale_out.py --first-search [--turns 10000] [--runs 5]
                                   [--store DIR] [--baseline REV]

It fills a persistent store with ``--turns`` turns once (MiniLM; ``--store``
reuses a folder filled before), then starts ``--runs`` fresh processes per
implementation and model cache state: *cold* (an empty ``MEMORIES_CACHE_DIR``:
the model is rewritten in the process) and *warm* (a cache filled by an
untimed process); since issue 37's fourth pass nothing is cached, so the two
differ only for an older ``--baseline``. Each imports the library and Chroma's client (timed apart),
builds ``VectorMemory`` and runs one search: "build -> first result" is that
span, in wall and process CPU seconds, split into the model's load (the
imports of onnxruntime, tokenizers and onnx; the session; the model bytes
and the tokenizer) and the rest (Chroma, the index, the query). Medians of
the runs; the load average before and after is printed, since wall time on a
shared machine is mostly waiting for a core.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from math import nan
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"


class HashEmbeddings(Embeddings):
    """64 dimensions from hashed words: similar texts are close, no model is run."""

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 64
        for word in text.lower().split():
            digest = hashlib.blake2b(word.encode(), digest_size=2).digest()
            vector[digest[0] % 64] += 1.0 if digest[1] % 2 else -1.0
        norm = sum(v * v for v in vector) ** 0.5 or 1.0
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


_WORDS = [
    "we",
    "went",
    "hiking",
    "painting",
    "cooking",
    "the",
    "lake",
    "mountains",
    "my",
    "sister",
    "brother",
    "dog",
    "cat",
    "school",
    "work",
    "music",
    "guitar",
    "concert",
    "weekend",
    "yesterday",
    "adoption",
    "agency",
    "support",
    "group",
    "camping",
    "beach",
    "pottery",
    "class",
    "friends",
    "family",
    "birthday",
    "running",
    "marathon",
    "book",
    "novel",
    "garden",
    "flowers",
]


def chat_texts(count: int) -> list[str]:
    """``count`` chat turns, LoCoMo's cycled (numbered, so that every turn is distinct)."""
    texts: list[str] = []
    if DATA.is_file():
        for sample in json.loads(DATA.read_text(encoding="utf-8")):
            for key, session in sample["conversation"].items():
                if key.startswith("session_") and isinstance(session, list):
                    texts.extend(f"{t['speaker']}: {t['text']}" for t in session)
    if not texts:
        print(f"{DATA} not found: made-up sentences instead of LoCoMo's turns", file=sys.stderr)
        rng = random.Random(0)
        texts = [" ".join(rng.choices(_WORDS, k=rng.randint(6, 30))) for _ in range(2_000)]
    return [f"{texts[i % len(texts)]} ({i})" for i in range(count)]


# -- the worker (run in a process of its own) ------------------------------------------


def _memory(options: dict[str, Any]) -> Any:
    from memories.long_term.vector import VectorMemory

    where: dict[str, Any] = (
        {"vectors": options["vectors"]}
        if options.get("vectors")
        else {
            "mode": "http",
            "port": options["port"],
            "outbox": options["outbox"],
            "collection": options["collection"],
        }
    )
    return VectorMemory(
        **where,
        namespace=options["namespace"],
        session_id=f"worker-{os.getpid()}",
        embeddings=HashEmbeddings(),
        k=10,
    )


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def worker(options: dict[str, Any]) -> dict[str, Any]:
    """One process's part; its figures as a dict (printed as JSON)."""
    questions = chat_texts(options.get("searches", 1) + 7)[7:]
    if options["job"] == "fill":
        memory = _memory(options)
        texts = chat_texts(options["turns"])
        for start in range(0, len(texts), 5_000):
            batch = texts[start : start + 5_000]
            turns = [{"session": "fill", "turn": start + i} for i in range(len(batch))]
            memory.add(batch, metadatas=turns, progress=False)
        memory.flush()
        return {"count": memory.backend.count()}
    if options["job"] == "first_default":
        return first_default(options)
    if options["job"] == "fill_default":
        from memories.long_term.vector import VectorMemory

        memory = VectorMemory(path=options["store"], namespace=options["namespace"], k=10)
        texts = chat_texts(options["turns"])
        turns = [{"session": "fill", "turn": i} for i in range(len(texts))]
        memory.add(texts, metadatas=turns, progress=False)
        memory.flush()
        return {"count": memory.backend.count()}
    if options["job"] == "first":
        started = time.perf_counter()
        memory = _memory(options)
        opened = time.perf_counter()
        memory.search(questions[0])
        searched = time.perf_counter()
        return {
            "first_s": searched - started,
            "open_s": opened - started,
            "first_search_s": searched - opened,
            "rss_mb": _rss_mb(),
        }
    memory = _memory(options)
    memory.search(questions[0])  # connected, warmed up
    _wait_until(options["start_at"])
    latencies, errors = [], []
    for i, question in enumerate(questions):
        if options["job"] == "writes":
            memory.save_context({"input": f"{question} [{os.getpid()}:{i}]"}, {"output": "ok"})
            memory.flush()
            time.sleep(0.02)  # let the other workers' writes land between ours
        started = time.perf_counter()
        try:
            memory.search(question)
        except Exception as exc:  # counted and shown: a failed search is a result too
            errors.append(f"{type(exc).__name__}: {exc}"[:160])
            continue
        latencies.append(1000 * (time.perf_counter() - started))
    return {"latencies_ms": latencies, "errors": errors, "rss_mb": _rss_mb()}


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = _clock()
    return wall - start[0], cpu - start[1]


def first_default(options: dict[str, Any]) -> dict[str, Any]:
    """A fresh process's first search with the default embeddings, its model load split out."""
    started = _clock()
    from memories.integrations import chroma, minilm

    from memories.long_term.vector import VectorMemory

    if hasattr(chroma, "import_client_code"):  # an older baseline imports Chroma when made
        chroma.import_client_code("persistent")
    parts: dict[str, list[float]] = {}

    def timed(name: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = _clock()
            try:
                return function(*args, **kwargs)
            finally:
                spent = _since(start)
                totals = parts.setdefault(name, [0.0, 0.0])
                totals[0], totals[1] = totals[0] + spent[0], totals[1] + spent[1]

        return wrapper

    for name in ("_load_runtime", "_import", "_make_session"):
        if hasattr(minilm, name):
            setattr(minilm, name, timed(name, getattr(minilm, name)))
    imports = _since(started)
    built = _clock()
    memory = VectorMemory(
        path=options["store"], namespace=options["namespace"], session_id="first", k=10
    )
    results = memory.search(chat_texts(8)[7])
    first = _since(built)
    load = parts.get("_load_runtime", [0.0, 0.0])
    return {
        "imports": imports,
        "first": first,
        "model_load": load,
        "model_imports": parts.get("_import", [0.0, 0.0]),
        "session": parts.get("_make_session", [0.0, 0.0]),
        "rest": [first[i] - load[i] for i in (0, 1)],
        "found": len(results),
        "rss_mb": _rss_mb(),
    }


def first_search_table(args: argparse.Namespace) -> int:
    """``--first-search``: fresh processes' build -> first result with the default embeddings."""
    work = Path(tempfile.mkdtemp(prefix="memories-first-search-"))
    store = Path(args.store) if args.store else work / "store"
    trees = {"current": ROOT}
    try:
        if args.baseline:
            trees["baseline"] = work / "baseline"
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(trees["baseline"]), args.baseline],
                cwd=ROOT, check=True, capture_output=True,
            )  # fmt: skip
        options = {"store": str(store), "namespace": "first-search", "turns": args.turns[0]}
        if not store.exists():
            started = time.monotonic()
            fill = {**options, "job": "fill_default"}
            _collect([_spawn(ROOT, fill, work / "fill-cache")], timeout=7_200)
            print(f"filled {args.turns[0]:,} turns in {time.monotonic() - started:.0f} s")
        print(f"load average before: {os.getloadavg()}")
        rows = []
        for name, tree in trees.items():
            warm = work / f"{name}-warm-cache"
            _collect([_spawn(tree, {**options, "job": "first_default"}, warm)], timeout=600)
            for cache in ("cold", "warm"):
                runs = []
                for i in range(args.runs):
                    folder = warm if cache == "warm" else work / f"{name}-cold-{i}"
                    job = {**options, "job": "first_default"}
                    (result,) = _collect([_spawn(tree, job, folder)], timeout=600)
                    runs.append(result)
                rows.append((name, cache, runs))
        print(f"load average after: {os.getloadavg()}")
    finally:
        if "baseline" in trees:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(trees["baseline"])],
                cwd=ROOT, capture_output=True,
            )  # fmt: skip
        shutil.rmtree(work, ignore_errors=True)  # the caches (and the store unless --store)

    def median(runs: list[dict[str, Any]], key: str) -> str:
        wall = statistics.median(r[key][0] for r in runs)
        cpu = statistics.median(r[key][1] for r in runs)
        return f"{wall:.3f} / {cpu:.3f}"

    keys = ("first", "model_load", "model_imports", "session", "rest", "imports")
    print(f"\nmedian of {args.runs} fresh processes, wall / CPU seconds, {args.turns[0]:,} turns:")
    print(
        "| implementation | model cache | build -> first result | model load | of which "
        "onnxruntime/tokenizers/onnx imports | of which session | rest (Chroma, index, query) "
        "| before: library + Chroma imports | RSS (MB) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, cache, runs in rows:
        rss = statistics.median(r["rss_mb"] for r in runs)
        cells = " | ".join(median(runs, key) for key in keys)
        print(f"| {name} | {cache} | {cells} | {rss:.0f} |")
    return 0


def _wait_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.time()))


# -- the driver ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_chroma(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    chroma = Path(sys.executable).with_name("chroma")
    command = [str(chroma) if chroma.exists() else "chroma", "run", "--path", str(folder)]
    log = (folder.parent / "chroma.log").open("ab")
    process = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=log
    )
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).raise_for_status()
            return process, port
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("chroma run did not answer in 60 s")


_BOOT = """
import json, sys
tree = sys.argv[1]
sys.path.insert(0, tree)
if tree != {root!r}:
    # The baseline's own integrations, not this checkout's (the editable install maps those).
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "memories.integrations", tree + "/integrations/__init__.py",
        submodule_search_locations=[tree + "/integrations"])
    module = importlib.util.module_from_spec(spec)
    sys.modules["memories.integrations"] = module
    spec.loader.exec_module(module)
import importlib.util
spec = importlib.util.spec_from_file_location("scale_out", {root!r} + "/benchmarks/scale_out.py")
scale_out = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scale_out)
print(json.dumps(scale_out.worker(json.loads(sys.argv[2]))))
"""


def _spawn(tree: Path, options: dict[str, Any], cache: Path | None = None) -> subprocess.Popen[str]:
    boot = _BOOT.format(root=str(ROOT))
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if cache is not None:  # the folder of the MiniLM model cache (issue 37)
        env["MEMORIES_CACHE_DIR"] = str(cache)
    return subprocess.Popen(
        [sys.executable, "-c", boot, str(tree), json.dumps(options)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tree,
    )


def _collect(processes: Sequence[subprocess.Popen[str]], timeout: float) -> list[dict[str, Any]]:
    results = []
    for process in processes:
        out, _ = process.communicate(timeout=timeout)
        if process.returncode:
            raise RuntimeError(f"a worker failed (exit {process.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def _quantiles(values: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    work = Path(tempfile.mkdtemp(prefix="memories-scale-out-"))
    trees = {"current": ROOT}
    if args.baseline:
        baseline = work / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(baseline), args.baseline],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
        trees["baseline"] = baseline
    server, port = _start_chroma(work / "chroma")
    rows = []
    postgres = contextlib.ExitStack()
    vectors: dict[str, str] = {}
    if args.pgvector:
        sys.path.insert(0, str(ROOT))
        from tests.postgres import postgres_server

        vectors["pgvector"] = postgres.enter_context(postgres_server(with_vector=True))
        trees["pgvector"] = ROOT
    try:
        for turns in args.turns:
            for name, tree in trees.items():
                base = {
                    "vectors": vectors.get(name),
                    "port": port,
                    "outbox": str(work / f"{name}-outbox.db"),
                    "collection": f"scale-{name}",
                    "namespace": f"n{turns}",
                    "turns": turns,
                    "searches": args.searches,
                }
                started = time.monotonic()
                _collect([_spawn(tree, {**base, "job": "fill"})], timeout=3_600)
                fill_s = time.monotonic() - started
                (first,) = _collect([_spawn(tree, {**base, "job": "first"})], timeout=600)
                for count in args.processes:
                    row: dict[str, Any] = {
                        "impl": name, "turns": turns, "processes": count, "fill_s": fill_s,
                        "first_s": first["first_s"], "first_rss_mb": first["rss_mb"],
                        "open_s": first.get("open_s"),  # a baseline's worker may not say
                        "first_search_s": first.get("first_search_s"),
                    }  # fmt: skip
                    for job in ("quiet", "writes"):
                        start_at = time.time() + 8.0  # every worker imported and warmed up
                        options = {**base, "job": job, "start_at": start_at}
                        results = _collect(
                            [_spawn(tree, options) for _ in range(count)], timeout=3_600
                        )
                        latencies = [ms for r in results for ms in r["latencies_ms"]]
                        row[job] = _quantiles(latencies) if latencies else (nan, nan)
                        row[f"{job}_errors"] = [e for r in results for e in r["errors"]]
                        row["rss_mb"] = max(r["rss_mb"] for r in results)
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
        postgres.close()
        if "baseline" in trees:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(trees["baseline"])],
                cwd=ROOT, capture_output=True,
            )  # fmt: skip
        shutil.rmtree(work, ignore_errors=True)
    return rows


def _first(row: dict[str, Any]) -> str:
    """The restart's first search: the memory's opening (imports, connections) and the search."""
    if row.get("open_s") is None:
        return f"{row['first_s']:.2f}"
    return f"{row['first_s']:.2f}: {row['open_s']:.2f} + {row['first_search_s']:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--searches", type=int, default=40, help="searches per worker and phase")
    parser.add_argument("--baseline", default="e79e25f", help="git revision to compare ('' none)")
    parser.add_argument(
        "--pgvector", action="store_true", help="also this checkout on PostgreSQL with pgvector"
    )
    parser.add_argument(
        "--first-search", action="store_true", help="fresh processes' first search, MiniLM"
    )
    parser.add_argument("--runs", type=int, default=5, help="--first-search: processes per row")
    parser.add_argument("--store", help="--first-search: a store folder, filled if absent")
    args = parser.parse_args(argv)
    if args.first_search:
        return first_search_table(args)
    rows = run(args)
    print(
        "| implementation | turns | processes | search p50 / p95, no writes (ms) "
        "| search p50 / p95 after writes (ms) | after / no writes (p50) "
        "| first search after restart (s): open + search | RSS per process (MB) "
        "| failed searches |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in sorted(rows, key=lambda r: (r["turns"], r["processes"], r["impl"])):
        (q50, q95), (w50, w95) = r["quiet"], r["writes"]
        failed = len(r["quiet_errors"]) + len(r["writes_errors"])
        print(
            f"| {r['impl']} | {r['turns']:,} | {r['processes']} | {q50:.1f} / {q95:.1f} "
            f"| {w50:.1f} / {w95:.1f} | {w50 / q50:.2f}x | {_first(r)} | {r['rss_mb']:.0f} "
            f"| {failed} |"
        )
    errors = sorted({e for r in rows for e in r["quiet_errors"] + r["writes_errors"]})
    for error in errors[:5]:
        print(f"failed search: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
