"""Issue 15: a turn on a SQL history is one transaction, with a fixed number of statements.

SQLAlchemy's events count what reaches the database: every statement is a
network round trip on PostgreSQL, and every commit a WAL commit on SQLite.
Before the batch (memories.stores.sql.Database.batch), a token buffer's turn made
four commits on save and two on load.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from sqlalchemy import event

from memories import SQLHistory, SQLiteHistory, SummaryBufferMemory, TokenBufferMemory, WindowMemory
from memories.core.base import ChatMemory
from memories.core.state import SeenState
from memories.errors import BackendError
from memories.kernel.steps import run
from memories.stores.history import InMemoryHistory
from memories.stores.history.base import Changes
from memories.testing import ScriptedChatModel
from tests import needs
from tests.postgres import find_pg_bin, postgres_server

MEMORIES: dict[str, Callable[..., ChatMemory]] = {
    "window": lambda history: WindowMemory(k=5, chat_memory=history),
    "token_buffer": lambda history: TokenBufferMemory(max_token_limit=500, chat_memory=history),
    "summary_buffer": lambda history: SummaryBufferMemory(max_token_limit=500, chat_memory=history),
}
#: The most statements one save / one load sends, each memory (SQLite's BEGIN IMMEDIATE included).
STATEMENTS = {
    "window": (2, 1),
    "token_buffer": (3, 1),  # the messages and the window; nothing read back (was 4)
    "summary_buffer": (4, 1),
}


def count(engine: Any) -> Counter[str]:
    seen: Counter[str] = Counter()
    event.listen(engine, "before_cursor_execute", lambda *a: seen.update(["statements"]))
    event.listen(engine, "commit", lambda *a: seen.update(["commits"]))
    event.listen(engine, "rollback", lambda *a: seen.update(["rollbacks"]))
    return seen


def turn_counts(memory: ChatMemory, seen: Counter[str]) -> tuple[Counter[str], Counter[str]]:
    for i in range(12):  # past the first turns, which build state
        memory.save_context({"input": f"question {i}"}, {"output": f"answer {i}"})
        memory.load_memory_variables({})
    seen.clear()
    memory.save_context({"input": "one more"}, {"output": "and its answer"})
    saved = Counter(seen)
    seen.clear()
    memory.load_memory_variables({})
    return saved, Counter(seen)


@pytest.mark.parametrize("kind", sorted(MEMORIES))
def test_one_transaction_per_save_and_per_load_on_sqlite(tmp_path: Path, kind: str) -> None:
    history = SQLiteHistory(tmp_path / "chat.db", session_id="s")
    seen = count(history._db.engine)
    saved, loaded = turn_counts(MEMORIES[kind](history), seen)
    assert saved["commits"] == 1 and loaded["commits"] == 1, (saved, loaded)
    most_saved, most_loaded = STATEMENTS[kind]
    assert saved["statements"] <= most_saved and loaded["statements"] <= most_loaded, (
        saved,
        loaded,
    )


def test_a_failed_turn_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One transaction means all or nothing: a state write that fails takes the turn back."""
    history = SQLiteHistory(tmp_path / "chat.db", session_id="s")
    memory = TokenBufferMemory(max_token_limit=500, chat_memory=history)
    memory.save_context({"input": "kept"}, {"output": "yes"})

    def broken(key: str, value: dict[str, Any]) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(history, "save_state", broken)
    with pytest.raises(OSError, match="disk full"):
        memory.save_context({"input": "lost"}, {"output": "no"})
    assert [m.text for m in history.messages] == ["kept", "yes"]
    monkeypatch.undo()
    memory.save_context({"input": "next"}, {"output": "fine"})
    assert "next" in memory.load_memory_variables({})["history"]


@pytest.mark.server
@pytest.mark.skipif(find_pg_bin() is None, reason=needs.NO_POSTGRES)
def test_round_trips_on_postgresql() -> None:
    with postgres_server() as url:
        for kind, make in sorted(MEMORIES.items()):
            history = SQLHistory(url, session_id=kind)
            seen = count(history._db.engine)
            saved, loaded = turn_counts(make(history), seen)
            assert saved["commits"] == 1 and loaded["commits"] == 1, (kind, saved, loaded)
            # No BEGIN IMMEDIATE here, but the session's advisory lock: the same bounds.
            most_saved, most_loaded = STATEMENTS[kind]
            assert saved["statements"] <= most_saved, (kind, saved)
            assert loaded["statements"] <= most_loaded, (kind, loaded)


def test_an_async_turn_is_one_transaction_too(tmp_path: Path) -> None:
    history = SQLiteHistory(tmp_path / "chat.db", session_id="s")
    seen = count(history._db.engine)
    memory = TokenBufferMemory(max_token_limit=500, chat_memory=history)

    async def turn(i: int) -> Counter[str]:
        seen.clear()
        await memory.asave_context({"input": f"question {i}"}, {"output": f"answer {i}"})
        saved = Counter(seen)
        seen.clear()
        await memory.aload_memory_variables({})
        assert seen["commits"] == 1, seen
        return saved

    for i in range(3):
        saved = asyncio.run(turn(i))
    assert saved["commits"] == 1, saved
    assert [m.text for m in history.messages][-2:] == ["question 2", "answer 2"]


# -- the driver route: unwatched statements on SQLite skip SQLAlchemy's execution context --


def test_unwatched_statements_run_on_the_driver_in_the_same_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No listener, no echo: a turn skips ``exec_driver_sql``; SQLite runs the same statements."""
    history = SQLiteHistory(tmp_path / "chat.db", session_id="s")
    engine = history._db.engine
    traced: list[str] = []
    event.listen(engine, "connect", lambda dbapi, _: dbapi.set_trace_callback(traced.append))
    engine.dispose()  # new connections, traced by SQLite itself

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a hot statement went through SQLAlchemy's execution context")

    memory = TokenBufferMemory(max_token_limit=500, chat_memory=history)
    memory.save_context({"input": "warm"}, {"output": "up"})  # the state row is made
    monkeypatch.setattr(sa.Connection, "exec_driver_sql", refused)
    traced.clear()
    memory.save_context({"input": "one more"}, {"output": "and its answer"})
    saved = [s for s in traced if s.split()[0] not in ("BEGIN", "COMMIT")]
    assert traced[0] == "BEGIN IMMEDIATE" and traced[-1] == "COMMIT", traced
    assert len(saved) <= STATEMENTS["token_buffer"][0] - 1, saved  # less BEGIN IMMEDIATE
    traced.clear()
    assert "and its answer" in memory.load_memory_variables({})["history"]
    assert traced.count("COMMIT") <= 1 and len(traced) - traced.count("COMMIT") <= 1, traced


def test_a_watched_engine_sees_every_statement_through_sqlalchemy(tmp_path: Path) -> None:
    """A cursor listener (or echo / the sqlalchemy.engine log) turns the driver route off."""
    history = SQLiteHistory(tmp_path / "chat.db", session_id="s")
    seen = count(history._db.engine)
    history.add_messages([HumanMessage("hi")])
    assert [m.text for m in history.messages] == ["hi"]
    assert seen["statements"] >= 2  # the INSERT and the read


def test_the_sqlalchemy_log_sees_driver_route_statements(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    history = SQLiteHistory(tmp_path / "chat.db", session_id="s")
    history.add_messages([HumanMessage("warm")])
    with caplog.at_level(logging.INFO, logger="sqlalchemy.engine"):
        history.add_messages([HumanMessage("logged")])
    assert any("INSERT INTO memories_messages" in r.getMessage() for r in caplog.records)


def test_a_driver_error_is_the_librarys_own_and_names_the_database(tmp_path: Path) -> None:
    history = SQLiteHistory(tmp_path / "chat.db", session_id="s")
    history.add_messages([HumanMessage("kept")])
    with sqlite3.connect(tmp_path / "chat.db") as raw:
        raw.execute("ALTER TABLE memories_messages RENAME TO elsewhere")
    with pytest.raises(BackendError, match=r"chat\.db") as caught:
        history.add_messages([HumanMessage("lost")])
    assert isinstance(caught.value.__cause__, sa.exc.OperationalError)
    assert "no such table" in str(caught.value)


def test_a_state_is_parsed_once_and_never_read_stale(tmp_path: Path) -> None:
    """A history hands back the same dict while the stored text is the same, and only then."""
    mine = SQLiteHistory(tmp_path / "chat.db", session_id="s")
    other = SQLiteHistory(tmp_path / "chat.db", session_id="s")  # another process's view
    written = {"v": 1}
    mine.save_state("k", written)
    assert mine.load_state("k") is written
    other.save_state("k", {"v": 2})
    assert mine.load_state("k") == {"v": 2}
    with pytest.raises(RuntimeError, match="rolled back"), mine.batch(write=True):
        mine.save_state("k", {"v": 3})
        raise RuntimeError("rolled back")
    assert mine.load_state("k") == {"v": 2}
    state, _ = mine.state_and_changes("k", after=None, edits_after=None)
    assert state == {"v": 2}


@pytest.mark.parametrize("kind", ["token_buffer", "summary_buffer"])
def test_a_state_another_process_moved_is_read_with_its_own_cursors(
    tmp_path: Path, kind: str
) -> None:
    """The one-statement read guesses cursors from the state this process saw last.

    Two memories on one file stand for two processes: each saves and folds in
    turn, so each finds the state moved by the other. What each shows must
    equal what a memory that never guessed shows.
    """

    def memory() -> ChatMemory:
        history = SQLiteHistory(tmp_path / "chat.db", session_id="s")
        if kind == "summary_buffer":
            llm = ScriptedChatModel(responses=[f"summary {i}" for i in range(100)], echo=False)
            return SummaryBufferMemory(
                llm=llm, max_token_limit=60, token_counter="chars", chat_memory=history
            )
        return TokenBufferMemory(max_token_limit=60, token_counter="chars", chat_memory=history)

    first, second = memory(), memory()
    for i in range(12):
        writer, reader = (first, second) if i % 2 else (second, first)
        writer.save_context({"input": f"question {i} " * 3}, {"output": f"answer {i} " * 3})
        shown = reader.load_memory_variables({})["history"]
        assert shown == memory().load_memory_variables({})["history"], i
        assert f"answer {i}" in shown


def test_seen_state_reads_state_and_changes_together_only_while_its_guess_holds() -> None:
    """A guess behind the stored state (another process moved it) or ahead (a rollback) misses.

    A miss costs a second read, after the cursors of the state read back, so
    the changes are always those after the state's own cursors.
    """
    reads: list[str] = []

    class Counted(InMemoryHistory):
        def load_state(self, key: str, /) -> dict[str, Any] | None:
            reads.append("state")
            return super().load_state(key)

        def changes(self, *, after: int | None, edits_after: int | None) -> Changes:
            reads.append("changes")
            return super().changes(after=after, edits_after=edits_after)

        def state_and_changes(
            self, key: str, /, *, after: int | None, edits_after: int | None
        ) -> tuple[dict[str, Any] | None, Changes]:
            reads.append("state+changes")
            return InMemoryHistory.load_state(self, key), InMemoryHistory.changes(
                self, after=after, edits_after=edits_after
            )

    history = Counted()
    history.append([HumanMessage("one"), HumanMessage("two"), HumanMessage("three")])
    seen: SeenState[int] = SeenState(lambda state: int(state["after"]))

    def read() -> tuple[int | None, list[int] | None, list[str]]:
        reads.clear()
        state, changes = run(seen.reading(history, "k", lambda after: (after, None)))
        return state, None if changes is None else [e.seq for e in changes.entries], list(reads)

    assert read() == (None, None, ["state"])  # nothing seen, nothing stored
    history.save_state("k", {"after": 0})
    assert read() == (0, [1, 2, 3], ["state", "changes"])  # nothing seen yet: two reads
    mine = {"after": 1}
    history.save_state("k", mine)
    seen.saw(mine, 1)
    assert read() == (1, [2, 3], ["state+changes"])  # the guess holds: one read
    history.save_state("k", {"after": 2})  # moved by another process
    assert read() == (2, [3], ["state+changes", "changes"])
    assert read() == (2, [3], ["state+changes"])  # the state read last is the next guess
    seen.saw({"after": 3}, 3)  # saved, then rolled back: the stored state is behind
    assert read() == (2, [3], ["state+changes", "changes"])


@pytest.mark.parametrize("rows", [1, 2, 600])
def test_one_insert_statement_gives_every_row_its_id_in_order(tmp_path: Path, rows: int) -> None:
    """Rows go in with one INSERT per 256; each message gets its own seq, in the order given."""
    history = SQLiteHistory(tmp_path / "chat.db", session_id="s")
    other = SQLiteHistory(tmp_path / "chat.db", session_id="other")
    other.add_messages([HumanMessage("elsewhere")])
    seen = count(history._db.engine)
    texts = [f"message {i}" for i in range(rows)]
    seqs = history.append([HumanMessage(t) for t in texts])
    assert seen["statements"] == -(-rows // 256), seen
    assert seqs == sorted(seqs) and len(set(seqs)) == rows
    stored = [(e.seq, e.message.text) for e in history.entries()]
    assert stored == list(zip(seqs, texts, strict=True))


def test_a_token_buffer_save_writes_its_window_without_reading_the_log(tmp_path: Path) -> None:
    """The save folds its own messages into the window this process holds: no SELECT."""
    history = SQLiteHistory(tmp_path / "chat.db", session_id="s")
    statements: list[str] = []
    event.listen(
        history._db.engine, "before_cursor_execute", lambda c, cur, s, *a: statements.append(s)
    )
    memory = TokenBufferMemory(max_token_limit=500, chat_memory=history)
    memory.save_context({"input": "warm"}, {"output": "up"})
    memory.load_memory_variables({})
    statements.clear()
    memory.save_context({"input": "one more"}, {"output": "and its answer"})
    assert not [s for s in statements if s.lstrip().upper().startswith("SELECT")], statements


def test_rows_another_writer_slipped_under_a_saved_window_show_on_the_next_load(
    tmp_path: Path,
) -> None:
    """Two processes alternate saves: each one's window misses the other's rows until a load."""
    path = tmp_path / "chat.db"

    def opened() -> TokenBufferMemory:
        history = SQLiteHistory(path, session_id="s")
        return TokenBufferMemory(max_token_limit=50, token_counter="chars", chat_memory=history)

    mine, theirs = opened(), opened()
    for i in range(6):
        if i % 2:
            theirs.save_context({"input": f"theirs {i}"}, {"output": f"answer {i}"})
        mine.save_context({"input": f"mine {i}"}, {"output": f"answer {i}"})
    log = InMemoryHistory()
    log.add_messages(SQLiteHistory(path, session_id="s").messages)
    afresh = TokenBufferMemory(max_token_limit=50, token_counter="chars", chat_memory=log)
    expected = afresh.load_memory_variables({})["history"]
    assert mine.load_memory_variables({})["history"] == expected
    assert theirs.load_memory_variables({})["history"] == expected
    assert opened().load_memory_variables({})["history"] == expected  # from the stored window


def test_threads_saving_through_one_token_buffer_show_what_a_fresh_count_shows(
    tmp_path: Path,
) -> None:
    """Concurrent saves fold their own rows unread: each one takes the window inside its write
    transaction, so the next save (waiting for the write lock) folds into the window it wrote."""
    import threading

    path = tmp_path / "chat.db"
    memory = TokenBufferMemory(
        max_token_limit=60, token_counter="chars", chat_memory=SQLiteHistory(path, session_id="s")
    )
    memory.save_context({"input": "start"}, {"output": "ok"})

    def saves(name: str) -> None:
        for i in range(10):
            memory.save_context({"input": f"{name} {i}"}, {"output": f"done {i}"})

    threads = [threading.Thread(target=saves, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    log = InMemoryHistory()
    log.add_messages(SQLiteHistory(path, session_id="s").messages)
    afresh = TokenBufferMemory(max_token_limit=60, token_counter="chars", chat_memory=log)
    assert len(log.messages) == 82
    assert memory.load_memory_variables({}) == afresh.load_memory_variables({})
