"""A thread keeps one connection to a SQLite file between transactions (memories.stores.kept).

It saves a pool checkout and return twice a turn, and must cost nothing
else: the connection goes back when its thread ends, is closed at exit (no
``-wal`` file left), is never reused in a forked child, and many threads at
once neither exhaust the pool nor wait on it.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from memories import SQLiteHistory, TokenBufferMemory
from memories.stores.kept import kept
from tests.probes import python

needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux /proc")


def _memory(path: Path, session: str = "s") -> TokenBufferMemory:
    return TokenBufferMemory(
        max_token_limit=200, chat_memory=SQLiteHistory(path, session_id=session)
    )


def _turn(memory: TokenBufferMemory, i: int) -> None:
    memory.save_context({"input": f"question {i}"}, {"output": f"answer {i}"})
    assert f"answer {i}" in memory.load_memory_variables({})["history"]


def _driver(memory: TokenBufferMemory) -> object:
    """The sqlite3 connection this thread keeps for the memory's database."""
    mine = kept(memory.chat_memory.database.engine)  # type: ignore[attr-defined]
    assert mine is not None
    return mine.connection.driver_connection


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


@needs_proc
def test_a_thread_gives_its_connection_back_when_it_ends(tmp_path: Path) -> None:
    memory = _memory(tmp_path / "t.db")
    _turn(memory, 0)
    pool = memory.chat_memory.database.engine.pool  # type: ignore[attr-defined]
    before = (pool.checkedout(), _open_files())
    for i in range(200):  # threads come and go, as in a web server's
        thread = threading.Thread(target=_turn, args=(memory, i))
        thread.start()
        thread.join(timeout=30)
    gc.collect()
    assert pool.checkedout() == before[0]
    # The pool keeps at most its size of connections open (3 files each: db, -wal, -shm).
    assert _open_files() <= before[1] + 3 * pool.size()
    assert memory.chat_memory.count() == 402
    # and their room to keep one with it: a new thread keeps one again
    engine, found = memory.chat_memory.database.engine, []  # type: ignore[attr-defined]
    thread = threading.Thread(target=lambda: (_turn(memory, 0), found.append(kept(engine))))
    thread.start()
    thread.join(timeout=30)
    assert found and found[0] is not None


def test_more_threads_than_the_pool_holds_neither_wait_nor_fail(tmp_path: Path) -> None:
    memory = _memory(tmp_path / "many.db")
    start, finish, failures = threading.Barrier(64), threading.Barrier(64), []

    def work(n: int) -> None:  # a worker of a pool: it lives on after its turns
        mine = _memory(tmp_path / "many.db", session=f"s{n}")
        start.wait(timeout=30)
        try:
            for i in range(3):
                _turn(mine, i)
        except Exception as exc:  # reported below
            failures.append(exc)
        finish.wait(timeout=90)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(64)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    pool = memory.chat_memory.database.engine.pool  # type: ignore[attr-defined]
    assert pool.checkedout() <= pool.size()  # the threads still alive here keep at most that


def test_no_wal_file_is_left_after_the_process_exits(tmp_path: Path) -> None:
    # A daemon thread that kept a connection is never joined: its connection is closed too.
    script = (
        "import sys, threading; from memories import SQLiteHistory, TokenBufferMemory\n"
        "def turn(session):\n"
        "    m = TokenBufferMemory(chat_memory=SQLiteHistory(sys.argv[1], session_id=session))\n"
        "    m.save_context({'input': 'hi'}, {'output': 'yo'}); m.load_memory_variables({})\n"
        "done, idle = threading.Event(), threading.Event()\n"
        "def background():\n"
        "    turn('daemon'); done.set(); idle.wait()\n"
        "threading.Thread(target=background, daemon=True).start()\n"
        "done.wait(60); turn('main')\n"
    )
    database = tmp_path / "exit.db"
    python("-c", script, str(database))
    assert database.is_file()
    assert not Path(f"{database}-wal").exists()


def _child_turn(
    memory: TokenBufferMemory, parents: int, answer: multiprocessing.Queue[object]
) -> None:
    try:
        _turn(memory, 1)  # the parent's memory object, inherited
        answer.put(id(_driver(memory)) != parents)
    except Exception as exc:
        answer.put(repr(exc))


def test_a_forked_child_never_uses_its_parents_connection(tmp_path: Path) -> None:
    memory = _memory(tmp_path / "fork.db")
    _turn(memory, 0)
    parents = _driver(memory)
    context = multiprocessing.get_context("fork")
    answer: multiprocessing.Queue[object] = context.Queue()
    child = context.Process(target=_child_turn, args=(memory, id(parents), answer))
    child.start()
    got = answer.get(timeout=60)
    child.join(timeout=60)
    assert got is True
    _turn(memory, 2)  # the parent's connection still works
    assert _driver(memory) is parents
    assert memory.chat_memory.count() == 6


def _closed_in_child(connection: Any, answer: multiprocessing.Queue[object]) -> None:
    answer.put(connection.closed)


def test_a_forked_child_never_closes_another_threads_connection(tmp_path: Path) -> None:
    """The child drops the other threads (and their thread-locals) before any fork hook runs."""
    memory, ready, done, found = (
        _memory(tmp_path / "fork2.db"),
        threading.Event(),
        threading.Event(),
        [],
    )

    def worker() -> None:
        _turn(memory, 0)
        found.append(kept(memory.chat_memory.database.engine))  # type: ignore[attr-defined]
        ready.set()
        done.wait(timeout=60)

    thread = threading.Thread(target=worker)
    thread.start()
    ready.wait(timeout=60)
    context = multiprocessing.get_context("fork")
    answer: multiprocessing.Queue[object] = context.Queue()
    child = context.Process(target=_closed_in_child, args=(found[0], answer))
    child.start()
    got = answer.get(timeout=60)
    child.join(timeout=60)
    done.set()
    thread.join(timeout=60)
    assert got is False


def test_a_failed_transaction_gives_its_connection_back(tmp_path: Path) -> None:
    memory = _memory(tmp_path / "fail.db")
    _turn(memory, 0)
    first = kept(memory.chat_memory.database.engine)  # type: ignore[attr-defined]
    assert first is not None
    with pytest.raises(RuntimeError), memory.chat_memory.database.transaction():  # type: ignore[attr-defined]
        raise RuntimeError("a failure inside the transaction")
    assert first.closed  # given back to the pool
    _turn(memory, 1)


def test_async_turns_keep_every_saved_turn(tmp_path: Path) -> None:
    memories = [_memory(tmp_path / "async.db", session=f"a{n}") for n in range(8)]

    async def turns(memory: TokenBufferMemory) -> None:
        for i in range(5):
            await memory.asave_context({"input": f"q{i}"}, {"output": f"a{i}"})
            assert f"a{i}" in (await memory.aload_memory_variables({}))["history"]

    async def everyone() -> None:
        await asyncio.gather(*(turns(m) for m in memories))

    asyncio.run(everyone())
    assert [m.chat_memory.count() for m in memories] == [10] * 8


def test_an_in_memory_database_keeps_no_connection() -> None:
    from memories import SQLHistory

    history = SQLHistory("sqlite://", session_id="s")
    history.add_messages([])
    assert kept(history.database.engine) is None


def test_a_listener_added_after_a_connection_was_kept_sees_every_statement(tmp_path: Path) -> None:
    from sqlalchemy import event

    memory = _memory(tmp_path / "watched.db")
    _turn(memory, 0)
    assert kept(memory.chat_memory.database.engine) is not None  # type: ignore[attr-defined]
    seen: list[str] = []
    engine = memory.chat_memory.database.engine  # type: ignore[attr-defined]
    event.listen(engine, "before_cursor_execute", lambda *a: seen.append(a[2].split()[0]))
    event.listen(engine, "commit", lambda *a: seen.append("COMMIT"))
    _turn(memory, 1)
    assert seen == ["BEGIN", "INSERT", "INSERT", "COMMIT", "SELECT", "COMMIT"]
