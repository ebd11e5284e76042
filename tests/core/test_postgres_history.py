"""The SQL history on a real PostgreSQL server: several app servers share one database."""

from __future__ import annotations

import subprocess
import sys
import time
import weakref

import pytest
from langchain_core.messages import HumanMessage

from memories import SQLHistory, TokenBufferMemory
from tests import needs
from tests.contract.history_contract import HistoryContract, MakeHistory
from tests.postgres import find_pg_bin

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(find_pg_bin() is None, reason=needs.NO_POSTGRES),
]


class TestPostgresHistory(HistoryContract):
    @pytest.fixture
    def make_history(self, postgres_url: str, request: pytest.FixtureRequest) -> MakeHistory:
        prefix = request.node.name  # each test its own sessions in the shared database
        return lambda session_id: SQLHistory(postgres_url, session_id=f"{prefix}-{session_id}")


def test_two_app_servers_share_a_conversation(postgres_url: str) -> None:
    """Two memories on separate histories (as two servers would hold) see one conversation."""
    server_a = TokenBufferMemory(
        chat_memory=SQLHistory(postgres_url, session_id="shared-user"), max_token_limit=1000
    )
    server_b = TokenBufferMemory(
        chat_memory=SQLHistory(postgres_url, session_id="shared-user"), max_token_limit=1000
    )
    server_a.save_context({"input": "I am Ada"}, {"output": "Hello Ada"})
    server_b.save_context({"input": "What is my name?"}, {"output": "Ada"})
    expected = "Human: I am Ada\nAI: Hello Ada\nHuman: What is my name?\nAI: Ada"
    assert server_a.load_memory_variables({})["history"] == expected
    assert server_b.load_memory_variables({})["history"] == expected


def test_a_lock_held_by_a_stuck_server_fails_the_save_within_the_statement_timeout(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing waits forever: another server holds the session's lock and never commits."""
    import time

    import psycopg
    from sqlalchemy.engine import make_url

    import memories.stores.sql
    from memories import BackendUnavailableError, WindowMemory

    monkeypatch.setattr(memories.stores.sql, "STATEMENT_TIMEOUT_SECONDS", 1)
    url = f"{postgres_url}?application_name=stuck-lock-test"  # an engine of its own
    memory = WindowMemory(k=2, chat_memory=SQLHistory(url, session_id="stuck"))
    memory.save_context({"input": "first"}, {"output": "kept"})
    plain = make_url(postgres_url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(plain) as stuck:  # a transaction that holds the lock and hangs
        stuck.execute("SELECT pg_advisory_xact_lock(hashtextextended('stuck', 0))")
        start = time.monotonic()
        with pytest.raises(BackendUnavailableError, match="statement timeout") as failed:
            memory.save_context({"input": "second"}, {"output": "lost?"})
        waited = time.monotonic() - start
        stuck.rollback()
    assert waited < 10, f"waited {waited:.1f} s"
    assert "stuck-lock-test" in str(failed.value) or "127.0.0.1" in str(failed.value)
    # The failed turn wrote nothing; the next one goes through.
    assert memory.load_memory_variables({})["history"] == "Human: first\nAI: kept"
    memory.save_context({"input": "second"}, {"output": "saved"})
    assert memory.load_memory_variables({})["history"].endswith("Human: second\nAI: saved")


def test_postgres_connections_carry_the_bounds_unless_the_url_sets_them(postgres_url: str) -> None:
    from sqlalchemy import text

    from memories.stores.sql import get_engine

    defaults = get_engine(f"{postgres_url}?application_name=bounds-default")
    given = get_engine(
        f"{postgres_url}?application_name=bounds-given&keepalives_idle=60"
        "&options=-c%20statement_timeout%3D5000"
    )
    for engine, statement_timeout, idle in ((defaults, "30s", "10"), (given, "5s", "60")):
        with engine.connect() as connection:
            assert connection.execute(text("SHOW statement_timeout")).scalar() == statement_timeout
            parameters = connection.connection.driver_connection.info.get_parameters()
            assert parameters["keepalives_idle"] == idle
            assert parameters["keepalives_count"] == "3"
            assert parameters["tcp_user_timeout"] == "25000"


def test_a_message_is_found_by_id_through_the_expression_index(postgres_url: str) -> None:
    from langchain_core.messages import HumanMessage
    from sqlalchemy import text

    from memories.stores.history.sql import _with_ids

    history = SQLHistory(postgres_url, session_id="by-id")
    history.write([HumanMessage("named", id="pg-m-1"), HumanMessage("other", id="pg-m-2")])
    assert history.seqs_of(["pg-m-2", "absent"]) == {"pg-m-2": history.entries()[-1].seq}
    engine = history._db.engine
    query = _with_ids("postgresql", "by-id", ["pg-m-1"])
    with engine.connect() as connection:
        connection.execute(text("SET enable_seqscan = off"))  # a small table: show the index works
        sql = str(query.compile(engine, compile_kwargs={"literal_binds": True}))
        plan = " ".join(row[0] for row in connection.exec_driver_sql(f"EXPLAIN {sql}"))
    assert "ix_memories_messages_session_message_id" in plan


def test_opening_a_busy_database_does_not_wait_on_its_writers(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The id index is looked for before CREATE INDEX, which would lock out writers first."""
    import time

    import psycopg
    from sqlalchemy.engine import make_url

    import memories.stores.sql

    SQLHistory(postgres_url, session_id="busy").add_messages([HumanMessage("made")])
    monkeypatch.setattr(memories.stores.sql, "STATEMENT_TIMEOUT_SECONDS", 2)
    plain = make_url(postgres_url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(plain) as writer:  # another server, mid-transaction on the table
        writer.execute(
            "INSERT INTO memories_messages (session_id, type, message, created_at) "
            """VALUES ('other', 'human', '{"type": "human", "data": {"content": "x"}}', 0)"""
        )
        start = time.monotonic()
        with caplog.at_level("WARNING"):
            history = SQLHistory(f"{postgres_url}?application_name=busy-open", session_id="busy")
            assert [e.message.text for e in history.entries()] == ["made"]
        waited = time.monotonic() - start
        writer.rollback()
    assert waited < 1.5, f"waited {waited:.1f} s"
    assert "Could not run" not in caplog.text


def test_a_large_table_is_not_indexed_on_opening_and_the_warning_says_how(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Building on a big table would lock its writers out for the build: left to the DBA."""
    import sqlalchemy as sa

    import memories.stores.sql
    from memories.stores.history.sql import _id_index_ddl, metadata
    from memories.stores.sql import EXTRA_DDL

    url = f"{postgres_url}?application_name=large-table"
    history = SQLHistory(url, session_id="large")
    history.write([HumanMessage("named", id="large-1")])
    engine = history._db.engine
    with engine.begin() as connection:
        connection.execute(sa.text("DROP INDEX ix_memories_messages_session_message_id"))
    monkeypatch.setitem(metadata.info, EXTRA_DDL, _id_index_ddl(1))  # "large": 1 row or more
    monkeypatch.setattr(memories.stores.sql, "_ready", weakref.WeakKeyDictionary())
    with caplog.at_level("WARNING"):
        reopened = SQLHistory(url, session_id="large")
        assert reopened.seqs_of(["large-1"]) == {"large-1": history.entries()[-1].seq}
    assert "holds 1 rows or more" in caplog.text
    assert "CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_memories_messages_session" in caplog.text
    with engine.connect() as connection:
        found = connection.execute(
            sa.text("SELECT to_regclass('ix_memories_messages_session_message_id')")
        ).scalar()
    assert found is None
    monkeypatch.setitem(metadata.info, EXTRA_DDL, _id_index_ddl(100_000))
    monkeypatch.setattr(memories.stores.sql, "_ready", weakref.WeakKeyDictionary())
    SQLHistory(url, session_id="large").entries()  # a small table: made on opening
    with engine.connect() as connection:
        found = connection.execute(
            sa.text("SELECT to_regclass('ix_memories_messages_session_message_id')")
        ).scalar()
    assert found is not None


_MAKE_TABLES = """
import sys, time
import sqlalchemy as sa
from memories.stores.sql import Database

url, start = sys.argv[1], float(sys.argv[2])
metadata = sa.MetaData()
for i in range(30):
    sa.Table(f"race_{i}", metadata, sa.Column("id", sa.Integer, primary_key=True))
time.sleep(max(0.0, start - time.time()))
with Database(url, metadata).transaction() as connection:
    connection.execute(sa.text("SELECT 1"))
"""


def test_processes_making_the_same_new_tables_at_once_all_succeed(postgres_url: str) -> None:
    # Two sessions creating one table both pass create_all's existence check, and the
    # second failed on PostgreSQL's catalog index (pg_type_typname_nsp_index) until
    # making tables took an advisory lock.
    start = time.time() + 3.0  # every process imported and waiting
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _MAKE_TABLES, postgres_url, str(start)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    failures = [w.communicate(timeout=120)[1] for w in workers if w.wait(timeout=120) != 0]
    assert failures == []
