"""EntityMemory on a real PostgreSQL server: the same graph as on SQLite, across two objects."""

from __future__ import annotations

import threading
import uuid

import pytest
from sqlalchemy import create_engine, text

from memories import EntityMemory
from tests import needs
from tests.entity_graph.fakes import GraphScript
from tests.entity_graph.test_entity_memory import (
    CONVERSATION,
    SCRIPT,
    assert_expected_graph,
    converse,
    current,
)
from tests.helpers import joined
from tests.postgres import find_pg_bin

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(find_pg_bin() is None, reason=needs.NO_POSTGRES),
]


@pytest.fixture
def url(postgres_url: str) -> str:
    """A fresh database on the server for each test."""
    name = f"entity_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return f"{postgres_url.rsplit('/', 1)[0]}/{name}"


def test_the_scripted_conversation_round_trips_through_postgres(url: str) -> None:
    memory = EntityMemory(url=url, namespace=("ana",), llm=GraphScript(script=SCRIPT))
    converse(memory, CONVERSATION)
    again = EntityMemory(url=url, namespace=("ana",))
    assert_expected_graph(again)


def test_concurrent_updaters_on_postgres_lose_nothing(url: str) -> None:
    def update(worker: str) -> None:
        memory = EntityMemory(url=url, namespace=("shared",))
        for i in "abcdef":
            memory.save_context({"input": f"My pet{worker}{i} is Pet{worker}{i}."}, {"output": ""})

    threads = [threading.Thread(target=update, args=(w,)) for w in "xyz"]
    for thread in threads:
        thread.start()
    joined(*threads)
    memory = EntityMemory(url=url, namespace=("shared",))
    assert current(memory) == sorted(f"User pet{w}{i} Pet{w}{i}" for w in "xyz" for i in "abcdef")
    assert memory.status().pending == 0


def test_an_export_imports_into_another_namespace_on_postgres_once(url: str) -> None:
    """The 40-turn graph (renames, merges, ended relations) copied whole; twice writes nothing."""
    memory = EntityMemory(url=url, namespace=("ana",), llm=GraphScript(script=SCRIPT))
    converse(memory, CONVERSATION)
    records = memory.export_records()
    copy = EntityMemory(url=url, namespace=("copy",))
    assert copy.import_records(records) > 0
    assert copy.import_records(records) == 0
    assert_expected_graph(copy)
    assert copy.export_records() == records
