"""Every history backend runs the history contract; SQL-specific behaviour below."""

from __future__ import annotations

import multiprocessing
import weakref
from pathlib import Path

import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import AIMessage, HumanMessage

from memories import BackendUnavailableError, ConfigError
from memories.stores.history import InMemoryHistory, LangChainHistory, SQLHistory, SQLiteHistory
from tests.contract.history_contract import HistoryContract, MakeHistory
from tests.helpers import fill_history_fast


class TestInMemoryHistory(HistoryContract):
    shared_across_instances = False

    @pytest.fixture
    def make_history(self) -> MakeHistory:
        return lambda session_id: InMemoryHistory(session_id=session_id)


class TestSQLiteHistory(HistoryContract):
    @pytest.fixture
    def make_history(self, tmp_path: Path) -> MakeHistory:
        return lambda session_id: SQLiteHistory(tmp_path / "h.db", session_id=session_id)


class TestSQLHistoryByURL(HistoryContract):
    @pytest.fixture
    def make_history(self, tmp_path: Path) -> MakeHistory:
        url = f"sqlite:///{tmp_path / 'url.db'}"
        return lambda session_id: SQLHistory(url, session_id=session_id)


class TestLangChainHistory(HistoryContract):
    shared_across_instances = False

    @pytest.fixture
    def make_history(self) -> MakeHistory:
        return lambda session_id: LangChainHistory(InMemoryChatMessageHistory())


def test_sqlite_history_survives_a_restart(tmp_path: Path) -> None:
    SQLiteHistory(tmp_path / "h.db", session_id="u").append([HumanMessage("hi"), AIMessage("yo")])
    SQLiteHistory(tmp_path / "h.db", session_id="u").save_state("k", {"n": 1})
    reopened = SQLiteHistory(tmp_path / "h.db", session_id="u")
    assert reopened.messages == [HumanMessage("hi"), AIMessage("yo")]
    assert reopened.load_state("k") == {"n": 1}


def _process_writer(path: str, n: int) -> None:
    history = SQLiteHistory(path, session_id="shared")
    for i in range(40):
        history.append([HumanMessage(f"{n}-{i}"), AIMessage(f"{n}-{i}")])


def test_appending_from_two_processes_loses_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "p.db")
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_process_writer, args=(path, n)) for n in range(2)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=60)
        assert p.exitcode == 0
    contents = [e.message.content for e in SQLiteHistory(path, session_id="shared").entries()]
    assert sorted(set(contents)) == sorted(f"{n}-{i}" for n in range(2) for i in range(40))
    assert len(contents) == 160


def test_bad_database_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not a usable SQLAlchemy database URL"):
        SQLHistory("nosuchdialect://x", session_id="s")


def test_unwritable_sqlite_location_is_reported(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(BackendUnavailableError):
        SQLiteHistory(blocker / "sub" / "h.db", session_id="s")


def test_empty_session_id_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="session_id"):
        SQLiteHistory(tmp_path / "h.db", session_id="")


def test_reading_the_tail_of_a_long_log_reads_only_the_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = SQLiteHistory(tmp_path / "long.db", session_id="long")
    fill_history_fast(tmp_path / "long.db", "long", 50_000)  # 100,000 messages
    parsed: list[str] = []
    import memories.stores.history.sql as sql

    original = sql.load_message
    monkeypatch.setattr(sql, "load_message", lambda text: parsed.append(text) or original(text))
    sql._decoded.cache_clear()  # parsed rows are kept per process: count these afresh
    assert len(history.entries(last=10)) == 10
    assert history.start_of_last_exchanges(3) is not None
    assert len(parsed) == 10


def test_credentials_never_reach_an_error_or_a_repr(tmp_path: Path) -> None:
    """Issue 10, item 3: 'Cannot open the database postgresql://u:p@...' printed the password."""
    from memories import BackendError, ProfileStore
    from memories.stores.history.sql import SQLHistory
    from memories.stores.sql import redacted

    url = "postgresql+psycopg://maya:s3cret-pw@127.0.0.1:1/db"
    with pytest.raises(BackendError) as opening:
        SQLHistory(url, session_id="s")
    assert "s3cret-pw" not in str(opening.value) and "127.0.0.1:1" in str(opening.value)
    with pytest.raises(BackendError) as store:
        ProfileStore(url)
    assert "s3cret-pw" not in str(store.value)
    with pytest.raises(ConfigError) as bad:
        SQLHistory("nonsense://u:hunter2@h/db", session_id="s")
    assert "hunter2" not in str(bad.value)
    assert redacted("not a url //u:pw@h") == "not a url //u:***@h"
    history = SQLHistory(f"sqlite:///{tmp_path / 'x.db'}", session_id="s")
    assert repr(history) == f"SQLHistory('sqlite:///{tmp_path / 'x.db'}', session_id='s')"


def test_a_server_that_never_answers_fails_within_the_connect_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing waits forever: a port that accepts connections and never speaks."""
    import socket
    import time

    import memories.stores.sql

    monkeypatch.setattr(memories.stores.sql, "CONNECT_TIMEOUT_SECONDS", 2)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever answers
        port = silent.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(BackendUnavailableError):
            SQLHistory(f"postgresql+psycopg://u:p@127.0.0.1:{port}/db", session_id="s")
        assert time.monotonic() - start < 20


def _plan_of_id_lookup(path: Path) -> str:
    import sqlite3

    from sqlalchemy.dialects import sqlite as sqlite_dialect

    from memories.stores.history.sql import _with_ids

    query = _with_ids("sqlite", "long", ["m-1", "m-2"])
    literal = {"literal_binds": True}
    sql = str(query.compile(dialect=sqlite_dialect.dialect(), compile_kwargs=literal))
    with sqlite3.connect(path) as connection:
        return " ".join(str(row) for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}"))


def test_a_message_is_found_by_id_through_an_index_not_a_scan_of_the_session(
    tmp_path: Path,
) -> None:
    """An agent's turn names its messages by id: 77 ms a turn at 100,000 messages, by LIKE."""
    from langchain_core.messages import HumanMessage, RemoveMessage

    path = tmp_path / "long.db"
    history = SQLiteHistory(path, session_id="long")
    fill_history_fast(path, "long", 50_000)
    history.write([HumanMessage("named", id="m-1")])
    assert "ix_memories_messages_session_message_id" in _plan_of_id_lookup(path)
    assert history.seqs_of(["m-1", "absent"]) == {"m-1": 100_001}
    history.write([RemoveMessage(id="m-1")])
    assert history.seqs_of(["m-1"]) == {} and history.entries(last=1)[0].message.text == (
        "an answer"
    )


def test_a_file_made_before_the_id_index_gets_it_when_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    import memories.stores.sql
    from memories.stores.history.sql import metadata

    path = tmp_path / "old.db"
    history = SQLiteHistory(path, session_id="s")
    history.add_messages([HumanMessage("hi", id="m-1")])
    with sqlite3.connect(path) as connection:  # the tables as an older version made them
        connection.execute("DROP INDEX ix_memories_messages_session_message_id")
    assert "ix_memories_messages_session_message_id" not in _plan_of_id_lookup(path)
    assert id(metadata) in memories.stores.sql._ready[history._db.engine]
    monkeypatch.setattr(memories.stores.sql, "_ready", weakref.WeakKeyDictionary())
    assert SQLiteHistory(path, session_id="s").seqs_of(["m-1"]) == {"m-1": 1}  # a new process
    assert "ix_memories_messages_session_message_id" in _plan_of_id_lookup(path)


def test_extra_ddl_that_fails_is_logged_and_the_tables_still_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlalchemy as sa

    from memories.stores.sql import EXTRA_DDL, ensure_tables, get_engine

    tables = sa.MetaData(info={EXTRA_DDL: {"sqlite": ["CREATE INDEX broken ON nowhere (x)"]}})
    sa.Table("things", tables, sa.Column("x", sa.Integer))
    url = f"sqlite:///{tmp_path / 'extra.db'}"
    with caplog.at_level("WARNING"):
        ensure_tables(get_engine(url), url, tables)
    assert "CREATE INDEX broken" in caplog.text and "only slower" in caplog.text
    with get_engine(url).connect() as connection:
        assert connection.exec_driver_sql("SELECT count(*) FROM things").scalar() == 0


def test_a_sqlite_file_deleted_under_a_memory_fails_with_one_clear_error(tmp_path: Path) -> None:
    """SQLite would go on writing into the deleted file: the turn would be lost without a word."""
    from memories import TokenBufferMemory

    path = tmp_path / "chats" / "chat.db"
    memory = TokenBufferMemory(chat_memory=SQLiteHistory(str(path), session_id="s"))
    memory.save_context({"input": "hi"}, {"output": "hello"})
    path.unlink()
    with pytest.raises(BackendUnavailableError, match="is gone") as caught:
        memory.save_context({"input": "lost?"}, {"output": "no: refused"})
    assert str(path) in str(caught.value) and "memory.close()" in str(caught.value)
    with pytest.raises(BackendUnavailableError, match="is gone"):
        memory.load_memory_variables({})
    assert not path.exists()  # nothing made a new, empty file in its place


def test_a_sql_history_lists_its_stores_sessions_last_active_first(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    for session in ("alpha", "beta_1", "beta%2"):
        SQLiteHistory(path, session_id=session).append([HumanMessage("hi"), AIMessage("yo")])
    edited = SQLiteHistory(path, session_id="alpha")
    edited.append([HumanMessage("again")])
    edited.delete([1])
    assert SQLiteHistory.lists_sessions and not InMemoryHistory.lists_sessions
    found, total = edited.sessions()
    assert total == 3
    assert [(s.session_id, s.messages, s.edits) for s in found] == [
        ("alpha", 3, 1),
        ("beta%2", 2, 0),
        ("beta_1", 2, 0),
    ]
    assert edited.count() == 2
    page, total = edited.sessions(contains="_", limit=5)  # no LIKE wildcard
    assert ([s.session_id for s in page], total) == (["beta_1"], 1)
    page, total = edited.sessions(limit=1, offset=2)
    assert ([s.session_id for s in page], total) == (["beta_1"], 3)


def test_a_history_of_one_session_says_it_cannot_list_others() -> None:
    with pytest.raises(NotImplementedError, match="InMemoryHistory keeps one session"):
        InMemoryHistory(session_id="s").sessions()


def test_a_read_only_view_can_do_what_it_says_and_writes_nothing(tmp_path: Path) -> None:
    """It copied ``lists_sessions`` from its history, yet listing sessions raised."""
    from memories.stores.history.readonly import ReadOnlyView

    history = SQLiteHistory(tmp_path / "v.db", session_id="a")
    history.append([HumanMessage("hi"), AIMessage("yo")])
    view = ReadOnlyView(history)
    assert view.lists_sessions
    found, total = view.sessions()
    assert total == 1 and found[0].session_id == "a"
    with pytest.raises(PermissionError, match="read-only"):
        view.purge(2)
    with pytest.raises(PermissionError, match="read-only"):
        view.clear()
    assert history.count() == 2


def test_a_turns_own_rows_are_not_parsed_again_when_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window re-read the two rows its save had just written, parsing each (35 µs a turn)."""
    import memories.stores.history.sql as sql
    from memories import WindowMemory

    parsed: list[str] = []
    original = sql.load_message
    monkeypatch.setattr(sql, "load_message", lambda text: parsed.append(text) or original(text))
    memory = WindowMemory(k=2, chat_memory=SQLiteHistory(tmp_path / "w.db", session_id="s"))
    for i in range(3):
        memory.save_context({"input": f"q{i}"}, {"output": f"a{i}"})
        assert memory.load_memory_variables({})["history"].endswith(f"AI: a{i}")
    assert parsed == []
    mine = HumanMessage("as saved")
    memory.chat_memory.add_messages([mine])
    mine.content = "changed by the caller afterwards"
    assert memory.chat_memory.messages[-1] == HumanMessage("as saved")


def test_a_read_only_view_tells_its_historys_time() -> None:
    from memories.stores.history.readonly import ReadOnlyView

    assert ReadOnlyView(InMemoryHistory(session_id="s", clock=lambda: 5.0)).clock() == 5.0


def test_an_in_memory_history_never_reuses_a_seq_after_clear() -> None:
    history = InMemoryHistory(session_id="s")
    [first] = history.append([HumanMessage("hi")])
    history.save_state("k", {"v": 1})
    history.clear()
    assert history.records() == [] and history.load_state("k") is None
    [again] = history.append([HumanMessage("again")])
    assert again > first
    assert [e.seq for e in history.entries()] == [again]


def test_a_message_changed_in_place_by_one_users_app_never_changes_anothers(
    tmp_path: Path,
) -> None:
    alice, bob = (SQLiteHistory(f"sqlite:///{tmp_path / f'{n}.db'}") for n in ("alice", "bob"))
    for history in (alice, bob):  # a file per user: the same ids, the same rows
        history.add_messages([HumanMessage("hi"), AIMessage("hello")])
    read_back = SQLiteHistory(f"sqlite:///{tmp_path / 'alice.db'}").messages
    read_back[1].content = "hello (redacted in place by alice's app)"
    assert [m.text for m in bob.messages] == ["hi", "hello"]
    assert [m.text for m in SQLiteHistory(f"sqlite:///{tmp_path / 'bob.db'}").messages] == [
        "hi",
        "hello",
    ]


def test_private_in_memory_databases_never_share_a_parsed_message() -> None:
    # Every private in-memory database has the URL "sqlite://": one user's still
    # never shows another's message objects.
    alice, bob = SQLHistory("sqlite://"), SQLHistory("sqlite://")
    for history in (alice, bob):
        history.add_messages([HumanMessage("hi"), AIMessage("hello")])
    alice.messages[1].content = "hello (redacted in place by alice's app)"
    assert [m.text for m in bob.messages] == ["hi", "hello"]
