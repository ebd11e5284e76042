"""Short-term turns beside their floors and LangChain's classes, medians of interleaved runs.

Run from the repository root::

    PYTHONPATH=. python benchmarks/turn_floors.py [--quick] [--repeats N]

A turn is ``save_context`` + ``load_memory_variables`` (scripted 5-80-word
messages, tiktoken ``cl100k_base``). Every row prints ours, its floor and
LangChain's class, measured in the same run: ``--repeats`` (5) rounds on
fresh histories; within a round the floors and ours take turns turn by turn
(in a rotating order), so a shared machine's load hits them alike; each cell
is the median over the rounds of each round's median turn.

- **SQLite floor**: raw ``sqlite3`` doing a turn's durable work, in the same
  WAL mode (``synchronous=NORMAL``): two rows in one commit, then read the
  last 20 rows and parse them. Our window (k=5) and token buffer (500 tokens)
  on ``SQLiteHistory`` at 2,000 turns are compared with it, and LangChain's
  window and token buffer on ``SQLChatMessageHistory`` (a SQLite file).
  LangChain's token buffer re-reads and re-counts the whole history once per
  message it prunes, and its prune never persists: a turn at 2,000 turns
  would take minutes, so it runs at 100 turns (``LANGCHAIN_SQL_TOKEN_TURNS``)
  and is extrapolated to 2,000 (quadratic), marked ``≈``.
- **In-memory floor**: encode the two new messages once, build them, keep a
  running window of counts within 500 tokens and format it; our in-memory
  token buffer and LangChain's (its default in-memory history) at 1,000 and
  10,000 turns are compared with it.
- **Round trips**: statements and commits per save and per load, counted
  with SQLAlchemy events, on SQLite and (when a PostgreSQL server can be
  started here) on PostgreSQL over loopback, with its latency.
"""

from __future__ import annotations

import argparse
import gc
import json
import sqlite3
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, get_buffer_string
from sqlalchemy import event

from benchmarks.short_term import (
    LANGCHAIN_TOKEN_PREFILL,
    Plan,
    Turn,
    counting_llm,
    make_turns,
    time_run,
)
from memories import SQLHistory, SQLiteHistory, SummaryBufferMemory, TokenBufferMemory, WindowMemory
from memories.core.base import ChatMemory
from memories.kernel.tokens import load_encoding
from memories.stores.history import ChatHistory, InMemoryHistory
from memories.testing import ScriptedChatModel

warnings.filterwarnings("ignore", message=".*deprecated.*")

LIMIT = 500
WINDOW_K = 5


def _median_p95(samples_ns: Sequence[int]) -> tuple[float, float]:
    ordered = sorted(samples_ns)
    return statistics.median(ordered) / 1e3, ordered[round(0.95 * (len(ordered) - 1))] / 1e3


# -- floors -------------------------------------------------------------------------


#: One turn of a subject (save + load, or the floor's work by hand), given (human, AI).
Turner = Callable[[str, str], object]


def sqlite_floor(
    turns: Sequence[Turn], prefilled: int, folder: Path, *, counted: bool = False
) -> Turner:
    """A turn's durable work in raw sqlite3 (same pragmas as ours), prefilled.

    With ``counted``, a token buffer's durable work: the two new messages are
    counted with tiktoken and folded into a running window of (id, count)
    within 500 tokens, which is written as a state row in the turn's commit;
    the read starts at the window's first row.
    """
    connection = sqlite3.connect(folder / f"floor-{counted}.db", isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    connection.execute(
        "CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT, type TEXT, "
        "message TEXT, created_at REAL)"
    )
    connection.execute("CREATE INDEX ix ON log (session, id)")
    connection.execute(
        "CREATE TABLE state (session TEXT, key TEXT, value TEXT, PRIMARY KEY (session, key))"
    )
    encoding = load_encoding("cl100k_base")
    window: deque[tuple[int, int]] = deque()
    total = 0

    def row(kind: str, text: str) -> tuple[str, str, str, float]:
        return ("s", kind, json.dumps({"type": kind, "data": {"content": text}}), time.time())

    def counting(human: str, ai: str) -> None:
        nonlocal total
        for kind, text in (("human", human), ("ai", ai)):
            seq = connection.execute(insert, row(kind, text)).lastrowid
            count = len(encoding.encode(text)) + 4
            window.append((seq, count))
            total += count
        while total > LIMIT:
            total -= window.popleft()[1]
        state = json.dumps({"seqs": [s for s, _ in window], "counts": [c for _, c in window]})
        connection.execute(upsert, ("s", "window", state))

    insert = "INSERT INTO log (session, type, message, created_at) VALUES (?, ?, ?, ?)"
    upsert = (
        "INSERT INTO state (session, key, value) VALUES (?, ?, ?) "
        "ON CONFLICT (session, key) DO UPDATE SET value = excluded.value"
    )
    read = (
        "SELECT message FROM log WHERE session = ? AND id >= ? ORDER BY id"
        if counted
        else "SELECT message FROM log WHERE session = ? ORDER BY id DESC LIMIT 20"
    )

    def turn(human: str, ai: str) -> None:
        connection.execute("BEGIN")
        if counted:
            counting(human, ai)
        else:
            connection.executemany(insert, [row("human", human), row("ai", ai)])
        connection.execute("COMMIT")
        rows = connection.execute(read, ("s", window[0][0]) if counted else ("s",)).fetchall()
        [json.loads(text) for (text,) in rows]

    for human, ai in turns[:prefilled]:
        if counted:
            counting(human, ai)
        else:
            connection.executemany(insert, [row("human", human), row("ai", ai)])
    return turn


def in_memory_floor(turns: Sequence[Turn], prefilled: int) -> Turner:
    """The least an in-memory token buffer turn must do, prefilled."""
    encoding = load_encoding("cl100k_base")
    window: deque[tuple[Any, int]] = deque()
    total = 0

    def turn(human: str, ai: str) -> str:
        nonlocal total
        for message in (HumanMessage(human), AIMessage(ai)):
            count = len(encoding.encode(message.text)) + 4
            window.append((message, count))
            total += count
        while total > LIMIT:
            total -= window.popleft()[1]
        return get_buffer_string([m for m, _ in window])

    for human, ai in turns[:prefilled]:
        turn(human, ai)
    return turn


def memory_turner(
    memory: Any, turns: Sequence[Turn], prefilled: int, *, tail: int | None = None
) -> Turner:
    """A memory's turn (save_context + load_memory_variables), its history prefilled.

    ``tail``: prefill only the last messages (LangChain's token buffer: see short_term.py).
    """
    prefix = [m for human, ai in turns[:prefilled] for m in (HumanMessage(human), AIMessage(ai))]
    memory.chat_memory.add_messages(prefix[-tail:] if tail is not None else prefix)

    def turn(human: str, ai: str) -> None:
        memory.save_context({"input": human}, {"output": ai})
        memory.load_memory_variables({"input": human})

    return turn


def interleaved(subjects: dict[str, Turner], live: Sequence[Turn], warmup: int) -> dict[str, float]:
    """Median µs of each subject's turn, the subjects taking turns turn by turn.

    Each live turn is played by every subject, in an order that rotates, so
    a shared machine's load at any moment hits them all alike.
    """
    names = list(subjects)
    for human, ai in live[:warmup]:
        for name in names:
            subjects[name](human, ai)
    gc.collect()
    times: dict[str, list[int]] = {name: [] for name in names}
    clock = time.perf_counter_ns
    for i, (human, ai) in enumerate(live[warmup:]):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            start = clock()
            subjects[name](human, ai)
            times[name].append(clock() - start)
    return {name: statistics.median(found) / 1e3 for name, found in times.items()}


# -- ours and LangChain's ------------------------------------------------------------


def ours(kind: str, history: ChatHistory) -> ChatMemory:
    if kind == "window":
        return WindowMemory(k=WINDOW_K, chat_memory=history)
    if kind == "summary_buffer":
        summaries = ScriptedChatModel(responses=["The user asked many questions."] * 10_000)
        return SummaryBufferMemory(
            llm=summaries, max_token_limit=LIMIT, token_counter="tiktoken", chat_memory=history
        )
    return TokenBufferMemory(max_token_limit=LIMIT, chat_memory=history)


def timed(memory: Any, turns: Sequence[Turn], n: int, warmup: int, measured: int) -> float:
    """Median µs of a turn at ``n`` turns (the history prefilled through ``add_messages``)."""
    gc.collect()
    return time_run(memory, turns, Plan(n, warmup, measured), prefill_tail=None).median_us


def langchain_sql(kind: str, url: str, session: str) -> Any:
    from langchain_classic.memory import (
        ConversationBufferWindowMemory,
        ConversationTokenBufferMemory,
    )
    from langchain_community.chat_message_histories import SQLChatMessageHistory

    history = SQLChatMessageHistory(session_id=session, connection=url)
    if kind == "window":
        return ConversationBufferWindowMemory(k=WINDOW_K, chat_memory=history)
    return ConversationTokenBufferMemory(
        llm=counting_llm(), max_token_limit=LIMIT, chat_memory=history
    )


def langchain_in_memory() -> Any:
    from langchain_classic.memory import ConversationTokenBufferMemory

    return ConversationTokenBufferMemory(llm=counting_llm(), max_token_limit=LIMIT)


#: Turns at which LangChain's token buffer on SQL is measured (its turn grows quadratically).
LANGCHAIN_SQL_TOKEN_TURNS = 100
SQLITE_TURNS = 2_000


def sqlite_round(
    turns: Sequence[Turn], warmup: int, measured: int, folder: Path
) -> dict[str, float]:
    """One round at 2,000 turns: the floors and ours interleaved turn by turn, then LangChain's."""
    n = SQLITE_TURNS
    prefilled = n - warmup - measured
    subjects = {
        "floor": sqlite_floor(turns, prefilled, folder),
        "counted floor": sqlite_floor(turns, prefilled, folder, counted=True),
    }
    for kind in ("window", "token_buffer"):
        memory = ours(kind, SQLiteHistory(folder / f"{kind}.db", session_id="s"))
        subjects[kind] = memory_turner(memory, turns, prefilled)
    found = interleaved(subjects, turns[prefilled:n], warmup)
    url = f"sqlite:///{folder / 'langchain.db'}"
    # It reads and parses the whole history every turn: a few turns are enough.
    found["langchain window"] = timed(langchain_sql("window", url, "window"), turns, n, 1, 5)
    small = LANGCHAIN_SQL_TOKEN_TURNS
    found["langchain token_buffer"] = (
        timed(langchain_sql("token_buffer", url, "token_buffer"), turns, small, 0, 2)
        * (n / small) ** 2
    )
    return found


def in_memory_round(turns: Sequence[Turn], n: int, warmup: int, measured: int) -> dict[str, float]:
    """One round at ``n`` turns: the floor, ours and LangChain's interleaved turn by turn (µs)."""
    prefilled = n - warmup - measured
    subjects = {
        "floor": in_memory_floor(turns, prefilled),
        "token_buffer": memory_turner(ours("token_buffer", InMemoryHistory()), turns, prefilled),
        "langchain token_buffer": memory_turner(
            langchain_in_memory(), turns, prefilled, tail=LANGCHAIN_TOKEN_PREFILL
        ),
    }
    return interleaved(subjects, turns[prefilled:n], warmup)


def medians(rounds: Sequence[dict[str, float]]) -> dict[str, float]:
    """Each cell's median over the rounds."""
    return {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}


# -- round trips ---------------------------------------------------------------------


def round_trips(make_history: Callable[[str], Any], kinds: Sequence[str]) -> dict[str, Any]:
    """Per kind: (statements, commits) of one save and one load, and the turn's median µs."""
    found = {}
    for kind in kinds:
        history = make_history(kind)
        seen: Counter[str] = Counter()
        engine = history._db.engine
        event.listen(engine, "before_cursor_execute", lambda *a, s=seen: s.update(["sql"]))
        event.listen(engine, "commit", lambda *a, s=seen: s.update(["commit"]))
        memory = ours(kind, history)
        times = []
        for i in range(40):
            seen.clear()
            start = time.perf_counter_ns()
            memory.save_context({"input": f"question {i} " * 8}, {"output": f"answer {i} " * 8})
            saved = Counter(seen)
            seen.clear()
            memory.load_memory_variables({})
            times.append(time.perf_counter_ns() - start)
        found[kind] = (saved, Counter(seen), _median_p95(times[10:])[0])
    return found


def print_rows(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def row(
    label: str,
    found: dict[str, float],
    kind: str,
    rounds: Sequence[dict[str, float]],
    *,
    floor_key: str = "floor",
) -> tuple[str, ...]:
    """ours | floor | ours/floor | LangChain | LangChain/ours (medians) | ours/floor each round."""
    mine, floor, theirs = found[kind], found[floor_key], found[f"langchain {kind}"]
    spread = " ".join(f"{r[kind] / r[floor_key]:.1f}" for r in rounds)
    approx = "≈" if "memory" not in label and kind == "token_buffer" else ""
    return (
        label, f"{mine:,.0f}", f"{floor:,.0f}", f"{mine / floor:.1f}x",
        f"{approx}{theirs / 1e6:,.0f} s" if theirs >= 1e6 else f"{theirs:,.0f}",
        f"{approx}{theirs / mine:,.0f}x", spread,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns measured")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (5)")
    args = parser.parse_args(argv)
    warmup, measured = (10, 40) if args.quick else (50, 200)
    sizes = (1_000, 10_000)
    turns = make_turns(10_000 + warmup + measured)
    started = time.perf_counter()
    header = ("per turn, µs (median of rounds)", "ours", "floor", "ours/floor", "LangChain",
              "LangChain/ours", "ours/floor each round")  # fmt: skip
    rows: list[tuple[str, ...]] = [header]

    with tempfile.TemporaryDirectory(prefix="memories-floors-") as tmp:
        folder = Path(tmp)
        rounds = []
        for attempt in range(args.repeats):
            run_folder = folder / f"sqlite-{attempt}"
            run_folder.mkdir()
            rounds.append(sqlite_round(turns, warmup, measured, run_folder))
        found = medians(rounds)
        for kind in ("window", "token_buffer"):
            rows.append(row(f"SQLite {kind} at {SQLITE_TURNS:,} turns", found, kind, rounds))
        label = "  the same, beside a floor that counts and keeps the window too"
        rows.append(row(label, found, "token_buffer", rounds, floor_key="counted floor"))
        for n in sizes:
            rounds = [in_memory_round(turns, n, warmup, measured) for _ in range(args.repeats)]
            label = f"in-memory token_buffer {LIMIT} at {n:,} turns"
            rows.append(row(label, medians(rounds), "token_buffer", rounds))
        print_rows(rows)
        print(
            "\nThe floor of SQLite rows: two rows in one commit, then read the last 20 and "
            "parse them.\nThe counting floor adds a token buffer's own durable work: count the "
            "two messages (tiktoken),\nwrite the window's ids and counts as a state row in the "
            "same commit, read from its first row."
        )
        print(
            f"≈: LangChain's SQL token buffer measured at {LANGCHAIN_SQL_TOKEN_TURNS} turns "
            f"(two turns a round) and extrapolated to {SQLITE_TURNS:,} (quadratic)."
        )
        print()

        print("Statements / commits per save and per load (SQLAlchemy events), turn median:")
        kinds = ("window", "token_buffer", "summary_buffer")
        sqlite_trips = round_trips(
            lambda kind: SQLiteHistory(folder / f"trips-{kind}.db", session_id="s"), kinds
        )
        servers: dict[str, dict[str, Any]] = {"SQLite": sqlite_trips}
        try:
            from tests.postgres import find_pg_bin, postgres_server

            if find_pg_bin() is not None:
                with postgres_server() as pg:
                    servers["PostgreSQL (loopback)"] = round_trips(
                        lambda kind: SQLHistory(pg, session_id=kind), kinds
                    )
        except Exception as exc:  # a benchmark reports what it could not measure
            print(f"  PostgreSQL not measured: {type(exc).__name__}: {exc}")
        for server, trips in servers.items():
            for kind, (saved, loaded, median) in trips.items():
                print(
                    f"  {server:22} {kind:15} save: {saved['sql']} statements, "
                    f"{saved['commit']} commit; load: {loaded['sql']} statements, "
                    f"{loaded['commit']} commit; turn median {median:.0f} µs"
                )
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
