"""Transcript retention: raw history past keep_days / keep_messages is hidden at once and swept.

The clock is injected into the history (it stamps rows), so nothing sleeps.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memories import (
    BufferMemory,
    InMemoryHistory,
    SQLHistory,
    SQLiteHistory,
    SummaryBufferMemory,
    TokenBufferMemory,
    WindowMemory,
    create_memory,
)
from memories.errors import ConfigError
from memories.kernel.retention import DAY, Retention
from memories.stores.history.base import ChatHistory
from memories.stores.history.records import Edit
from tests.summary.fakes import ScriptedLLM


class Clock:
    """A clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def days(self, n: float) -> None:
        self.now += n * DAY


MakeHistory = Callable[[str, Clock], ChatHistory]


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def make_history(request: pytest.FixtureRequest, tmp_path: Path) -> MakeHistory:
    if request.param == "memory":
        return lambda session, clock: InMemoryHistory(session_id=session, clock=clock)
    if request.param == "sqlite":
        path = tmp_path / "chat.db"
        return lambda session, clock: SQLiteHistory(path, session_id=session, clock=clock)
    url = request.getfixturevalue("postgres_url")
    prefix = request.node.name
    return lambda session, clock: SQLHistory(url, session_id=f"{prefix}-{session}", clock=clock)


def turn(memory: object, text: str) -> None:
    memory.save_context({"input": f"q {text}"}, {"output": f"a {text}"})  # type: ignore[attr-defined]


def shown(memory: object) -> list[str]:
    return [m.content for m in memory.load_memory_variables({})["history"]]  # type: ignore[attr-defined]


def test_messages_older_than_keep_days_are_hidden_at_once_then_swept(
    make_history: MakeHistory,
) -> None:
    clock = Clock()
    history = make_history("u1", clock)
    memory = BufferMemory(chat_memory=history, retention={"keep_days": 7}, return_messages=True)
    turn(memory, "old")
    clock.days(5)
    turn(memory, "recent")
    clock.days(3)  # "old" is 8 days old, "recent" 3
    assert shown(memory) == ["q recent", "a recent"]
    assert [e.message.content for e in memory.chat_memory.entries()] == ["q recent", "a recent"]
    assert len(history.records()) == 4  # hidden, not deleted yet
    assert memory.sweep(dry_run=True) == {history.session_id: 2}
    assert len(history.records()) == 4
    assert memory.sweep(batch=1) == {history.session_id: 2}
    assert [e.message.content for e in history.records()] == ["q recent", "a recent"]
    assert memory.sweep() == {}  # nothing left to do: a second run is a no-op
    assert shown(memory) == ["q recent", "a recent"]


def test_keep_messages_keeps_the_newest_n(make_history: MakeHistory) -> None:
    clock = Clock()
    history = make_history("u1", clock)
    memory = BufferMemory(chat_memory=history, retention={"keep_messages": 3}, return_messages=True)
    for n in range(3):
        turn(memory, str(n))
    assert shown(memory) == ["a 1", "q 2", "a 2"]
    assert memory.sweep() == {history.session_id: 3}
    assert [e.message.content for e in history.records()] == ["a 1", "q 2", "a 2"]


def test_an_expired_message_cannot_be_edited_and_its_edits_go_with_it(
    make_history: MakeHistory,
) -> None:
    clock = Clock()
    history = make_history("u1", clock)
    memory = BufferMemory(chat_memory=history, retention={"keep_messages": 2}, return_messages=True)
    memory.save_messages([HumanMessage("hi", id="h1"), AIMessage("hello", id="a1")])
    memory.edit_message("h1", HumanMessage("hi there"))
    memory.save_messages([HumanMessage("next", id="h2"), AIMessage("ok", id="a2")])
    assert shown(memory) == ["next", "ok"]
    with pytest.raises(Exception, match="h1"):
        memory.delete_messages(["h1"])
    memory.sweep()
    # The replacement of h1 was written after the horizon, but its target is gone: no orphan.
    assert not [r for r in history.records() if isinstance(r, Edit)]
    assert [e.message.content for e in history.records()] == ["next", "ok"]


def test_a_sweep_of_a_shared_database_covers_every_session(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "chat.db"
    one = BufferMemory(
        chat_memory=SQLiteHistory(path, session_id="one", clock=clock),
        retention={"keep_days": 1},
    )
    two = BufferMemory(chat_memory=SQLiteHistory(path, session_id="two", clock=clock))
    turn(one, "1")
    turn(two, "2")
    clock.days(2)
    turn(two, "3")
    assert one.sweep() == {"one": 2, "two": 2}
    assert [e.message.content for e in two.chat_memory.records()] == ["q 3", "a 3"]


def test_sqlite_reuses_the_space_a_sweep_frees(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "chat.db"
    memory = BufferMemory(chat_memory=SQLiteHistory(path, clock=clock), retention={"keep_days": 1})
    for n in range(300):
        turn(memory, "x" * 200 + str(n))
    clock.days(2)
    memory.sweep()
    with sqlite3.connect(path) as db:
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
        pages = db.execute("PRAGMA page_count").fetchone()[0]
    assert free > 0  # the deleted rows' pages are free...
    for n in range(300):
        turn(memory, "y" * 200 + str(n))
    with sqlite3.connect(path) as db:
        # ...and the next rows fill them instead of growing the file.
        assert db.execute("PRAGMA page_count").fetchone()[0] <= pages + 2


def test_a_token_buffer_window_never_names_an_expired_message(make_history: MakeHistory) -> None:
    clock = Clock()
    history = make_history("u1", clock)
    memory = TokenBufferMemory(
        chat_memory=history,
        retention={"keep_days": 7},
        max_token_limit=10_000,
        return_messages=True,
    )
    turn(memory, "old")
    clock.days(8)
    turn(memory, "new")
    assert shown(memory) == ["q new", "a new"]
    memory.sweep()
    state = history.load_state(memory.state_key)
    assert state is not None
    kept = {e.seq for e in history.records()}
    assert set(state["seqs"]) <= kept and state["last"] in kept
    turn(memory, "more")
    assert shown(memory) == ["q new", "a new", "q more", "a more"]


def test_a_window_shows_what_is_left_of_an_exchange_cut_by_retention(
    make_history: MakeHistory,
) -> None:
    clock = Clock()
    memory = WindowMemory(
        chat_memory=make_history("u1", clock),
        retention={"keep_messages": 3},
        k=2,
        return_messages=True,
    )
    turn(memory, "0")
    turn(memory, "1")
    assert shown(memory) == ["a 0", "q 1", "a 1"]


def test_a_seven_day_retention_keeps_the_summary(make_history: MakeHistory) -> None:
    clock = Clock()
    history = make_history("u1", clock)
    llm = ScriptedLLM()
    memory = SummaryBufferMemory(
        llm=llm,
        chat_memory=history,
        max_token_limit=40,
        token_counter="chars",
        retention={"keep_days": 7},
    )
    for n in range(4):
        turn(memory, f"I am Ada and I like tea, message {n}")
    summary = memory.moving_summary_buffer
    assert summary.startswith("summary")
    calls = llm.calls
    clock.days(8)
    turn(memory, "new")
    memory.sweep()
    assert memory.moving_summary_buffer == summary
    assert llm.calls == calls  # nothing summarised anew
    text = memory.load_memory_variables({})["history"]
    assert summary in text and "q new" in text and "message 3" not in text
    state = history.load_state(memory.state_key)
    assert state is not None
    kept = {e.seq for e in history.records()}
    assert state["folded"] not in kept and all(seq in kept for seq in state["seqs"])
    assert state["folded"] < min(kept)


def test_retention_round_trips_through_config(tmp_path: Path) -> None:
    config = {
        "type": "token_buffer",
        "chat_memory": {"type": "sqlite", "path": str(tmp_path / "c.db"), "session_id": "s"},
        "retention": {"keep_days": 7},
    }
    memory = create_memory(config)
    assert memory.retention == Retention(keep_days=7)
    assert memory.to_config() == config
    memory.retention = None
    assert isinstance(memory.chat_memory, SQLiteHistory)
    assert memory.sweep() == {}


@pytest.mark.parametrize(
    ("value", "wrong"),
    [
        ({}, "keep_days or keep_messages"),
        ({"keep_days": 0}, "keep_days"),
        ({"keep_messages": 1.5}, "keep_messages"),
        ({"keep_weeks": 1}, "keep_weeks"),
        ("7d", "7d"),
    ],
)
def test_a_bad_retention_is_a_config_error_naming_it(value: object, wrong: str) -> None:
    with pytest.raises(ConfigError, match=wrong):
        BufferMemory(retention=value)


def test_async_reads_and_sweeps_hide_and_delete_the_same(make_history: MakeHistory) -> None:
    import asyncio

    clock = Clock()
    history = make_history("u1", clock)
    memory = TokenBufferMemory(
        chat_memory=history, retention={"keep_days": 7}, max_token_limit=10_000
    )

    async def scenario() -> tuple[str, dict[str, int]]:
        await memory.asave_context({"input": "old"}, {"output": "o"})
        clock.days(8)
        await memory.asave_context({"input": "new"}, {"output": "n"})
        loaded = await memory.aload_memory_variables({})
        return loaded["history"], await memory.asweep()

    text, swept = asyncio.run(scenario())
    assert text == "Human: new\nAI: n"
    assert swept == {history.session_id: 2}


def test_a_background_summary_sweeps_its_session_after_its_fold(tmp_path: Path) -> None:
    from memories.kernel.background import Debouncer

    clock = Clock()
    history = SQLiteHistory(tmp_path / "chat.db", session_id="u1", clock=clock)
    with Debouncer(delay=3600, name="retention-test") as scheduler:
        memory = SummaryBufferMemory(
            llm=ScriptedLLM(),
            chat_memory=history,
            max_token_limit=40,
            token_counter="chars",
            retention={"keep_days": 7},
            summarize="background",
            scheduler=scheduler,
        )
        for n in range(4):
            turn(memory, f"I am Ada and I like tea, message {n}")
        assert memory.flush(timeout=30)
        summary = memory.moving_summary_buffer
        assert summary.startswith("summary") and len(history.records()) == 8
        clock.days(8)
        turn(memory, "new")
        assert memory.flush(timeout=30)
    assert [r.message.content for r in history.records()] == ["q new", "a new"]  # type: ignore[union-attr]
    assert memory.moving_summary_buffer == summary


def test_a_sweep_cut_short_keeps_what_it_deleted_and_the_next_run_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memories.stores.history.sql as sql

    clock = Clock()
    history = SQLiteHistory(tmp_path / "chat.db", session_id="u1", clock=clock)
    memory = BufferMemory(chat_memory=history, retention={"keep_days": 1})
    for n in range(10):
        turn(memory, str(n))
    clock.days(2)
    turn(memory, "kept")
    real = sql.Database.transaction
    writes = 0

    def crash_on_the_third_write(self: sql.Database, *, write: bool = False) -> object:
        nonlocal writes
        if write:
            writes += 1
            if writes == 3:
                raise KeyboardInterrupt("the process dies here")
        return real(self, write=write)

    monkeypatch.setattr(sql.Database, "transaction", crash_on_the_third_write)
    with pytest.raises(KeyboardInterrupt):
        memory.sweep(batch=4)
    monkeypatch.undo()
    assert len(history.records()) == 22 - 8  # two batches of 4 went, each whole
    assert memory.sweep(batch=4) == {"u1": 12}
    assert [e.message.content for e in history.records()] == ["q kept", "a kept"]
