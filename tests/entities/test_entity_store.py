"""Entity stores: LangChain's interface, checked on LangChain's store first, then on ours.

Ours keep every version of a summary (LangChain's overwrite), survive a
restart (SQL), keep sessions apart, and run on PostgreSQL as on SQLite.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from memories.errors import ConfigError
from memories.stores.entities.summaries import (
    EntityStore,
    InMemoryEntityStore,
    LangChainEntityStore,
    SQLEntityStore,
    SQLiteEntityStore,
    as_entity_store,
    create_entity_store,
)
from tests import needs
from tests.entities.conftest import needs_redis
from tests.postgres import find_pg_bin

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def langchain_in_memory() -> Any:
    from langchain_classic.memory.entity import InMemoryEntityStore as LangChainStore

    return LangChainStore()


def langchain_sqlite(tmp_path: Path) -> Any:
    from langchain_classic.memory.entity import SQLiteEntityStore as LangChainSQLite

    return LangChainSQLite(db_file=str(tmp_path / "lc.db"))


STORES: dict[str, Callable[[Path], Any]] = {
    # The reference first: the interface checks run on LangChain's own stores.
    "langchain-memory": lambda tmp: langchain_in_memory(),
    "langchain-sqlite": langchain_sqlite,
    "langchain-wrapped": lambda tmp: LangChainEntityStore(langchain_in_memory()),
    "memory": lambda tmp: InMemoryEntityStore(),
    "sqlite": lambda tmp: SQLiteEntityStore(db_file=tmp / "entities.db"),
    "sql": lambda tmp: SQLEntityStore(f"sqlite:///{tmp / 'sql.db'}", session_id="u1"),
}


REDIS = pytest.param("redis", marks=needs_redis)


def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "redis":
        return request.getfixturevalue("redis_store")()
    return STORES[request.param](tmp_path)


@pytest.fixture(params=[*STORES, REDIS])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return make_store(request, tmp_path)


def test_get_set_delete_exists_clear_behave_as_langchains(any_store: Any) -> None:
    store = any_store
    assert store.get("Jane") is None
    assert store.get("Jane", "") == ""
    assert not store.exists("Jane")
    store.set("Jane", "Jane lives in Oslo.")
    store.set("Oslo", "A city.")
    assert store.get("Jane", "") == "Jane lives in Oslo."
    assert store.exists("Jane")
    store.set("Jane", "Jane moved to Rome.")
    assert store.get("Jane") == "Jane moved to Rome."
    store.delete("Jane")
    assert not store.exists("Jane") and store.get("Jane", "none") == "none"
    assert store.exists("Oslo")
    store.clear()
    assert not store.exists("Oslo") and store.get("Oslo") is None


OURS = ["memory", "sqlite", "sql", REDIS]


@pytest.fixture(params=OURS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> EntityStore:
    made: EntityStore = make_store(request, tmp_path)
    return made


def test_every_version_of_a_summary_is_kept(store: EntityStore) -> None:
    store.set("Jane", "Jane lives in Oslo.")
    store.set("Jane", "Jane moved to Rome.")
    store.delete("Jane")
    store.set("Jane", "Jane is back.")
    assert [v.value for v in store.history("Jane")] == [
        "Jane lives in Oslo.",
        "Jane moved to Rome.",
        None,
        "Jane is back.",
    ]
    assert [v.entity for v in store.history("Jane")] == ["Jane"] * 4
    times = [v.created_at for v in store.history("Jane")]
    assert times == sorted(times)


def test_an_empty_value_deletes_as_langchains_sqlite_store_does(store: EntityStore) -> None:
    store.set("Jane", "x")
    store.set("Jane", "")
    assert not store.exists("Jane") and store.get("Jane", "d") == "d"


def test_clear_keeps_the_history_and_purge_erases_it(store: EntityStore) -> None:
    store.set("Jane", "one")
    store.set("Oslo", "two")
    store.clear()
    assert store.entities() == {}
    assert [v.value for v in store.history("Jane")] == ["one", None]
    store.purge()
    assert store.history("Jane") == [] and store.history("Oslo") == []


def test_entities_lists_the_current_summaries_in_writing_order(store: EntityStore) -> None:
    store.set("Jane", "one")
    store.set("Oslo", "two")
    store.set("Jane", "three")
    store.delete("Oslo")
    assert store.entities() == {"Jane": "three"}


def test_set_many_writes_a_version_of_each_entity(store: EntityStore) -> None:
    store.set("Tom", "old")
    store.set_many({"Jane": "one", "Tom": "", "Oslo": "city"})
    store.set_many({})
    assert store.entities() == {"Jane": "one", "Oslo": "city"}
    assert [v.value for v in store.history("Tom")] == ["old", None]


def test_async_twins_do_what_the_sync_methods_do(store: EntityStore) -> None:
    import asyncio

    async def go() -> tuple[Any, ...]:
        await store.aset("Jane", "one")
        await store.aset("Jane", "two")
        return (
            await store.aget("Jane"),
            await store.aexists("Jane"),
            [v.value for v in await store.ahistory("Jane")],
        )

    assert asyncio.run(go()) == ("two", True, ["one", "two"])


def test_the_sql_store_survives_a_restart_and_keeps_sessions_apart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'entities.db'}"
    SQLEntityStore(url, session_id="a").set("Jane", "Jane lives in Oslo.")
    SQLEntityStore(url, session_id="b").set("Jane", "Another Jane.")
    reopened = SQLEntityStore(url, session_id="a")
    assert reopened.get("Jane") == "Jane lives in Oslo."
    assert reopened.entities() == {"Jane": "Jane lives in Oslo."}
    reopened.clear()
    assert SQLEntityStore(url, session_id="b").get("Jane") == "Another Jane."


def test_configs_build_stores_and_bad_ones_say_what_is_valid(tmp_path: Path) -> None:
    store = create_entity_store({"type": "sqlite", "db_file": str(tmp_path / "e.db")})
    assert isinstance(store, SQLiteEntityStore)
    assert create_entity_store(store.to_config()).to_config() == store.to_config()
    assert isinstance(create_entity_store({"type": "memory"}), InMemoryEntityStore)
    with pytest.raises(ConfigError, match="valid types: memory, redis, sql, sqlite"):
        create_entity_store({"type": "neo4j"})
    with pytest.raises(ConfigError, match="Bad options"):
        create_entity_store({"type": "memory", "path": "x"})
    with pytest.raises(ConfigError, match="entity_store must be"):
        as_entity_store(42)
    with pytest.raises(ConfigError, match="session_id"):
        SQLEntityStore(f"sqlite:///{tmp_path / 'x.db'}", session_id="")


def test_a_langchain_store_is_wrapped_and_its_own_semantics_kept() -> None:
    inner = langchain_in_memory()
    wrapped = as_entity_store(inner)
    assert isinstance(wrapped, LangChainEntityStore)
    wrapped.set("Jane", "")
    assert inner.store == {"Jane": ""}  # LangChain's in-memory store keeps "", as ever
    wrapped.set("Jane", "x")
    assert wrapped.entities() == {"Jane": "x"}
    assert [v.value for v in wrapped.history("Jane")] == ["x"]


def test_a_langchain_store_that_cannot_list_says_so(tmp_path: Path) -> None:
    wrapped = as_entity_store(langchain_sqlite(tmp_path))
    with pytest.raises(NotImplementedError, match="cannot list its entities"):
        wrapped.entities()


@pytest.mark.server
@pytest.mark.skipif(find_pg_bin() is None, reason=needs.NO_POSTGRES)
def test_the_sql_store_runs_on_postgresql_and_survives_a_restart(postgres_url: str) -> None:
    name = f"entities_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    url = f"{postgres_url.rsplit('/', 1)[0]}/{name}"
    store = SQLEntityStore(url, session_id="u1")
    store.set("Jane", "one")
    store.set("Jane", "two")
    store.set("Oslo", "city")
    store.delete("Oslo")
    again = SQLEntityStore(url, session_id="u1")
    assert again.entities() == {"Jane": "two"}
    assert [v.value for v in again.history("Oslo")] == ["city", None]
    assert SQLEntityStore(url, session_id="u2").entities() == {}
