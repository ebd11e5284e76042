"""A write and its time to live: a failure between the two never leaves an item without it.

The collection's ledger and its expiry times share one database, so both go in
one transaction (SQLite and PostgreSQL); a vector memory's documents are in
Chroma, so the expiry row goes first. Each test makes the second step fail
and checks the item is absent, or present with its time to live.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from memories import ExampleMemory, VectorMemory
from memories.errors import InvalidInputError
from memories.stores.expiry import ExpiryLedger
from tests.retention.conftest import Clock, Make

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"


class Crash(Exception):
    """The process dies here."""


def crash(*args: Any, **kwargs: Any) -> None:
    raise Crash


def test_a_collection_write_failing_with_its_expiry_row_writes_neither(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = make(ttl=30)
    kept = memory.put("Ada likes green tea")
    real = ExpiryLedger.stamping

    def failing(self: ExpiryLedger, *args: Any, **kwargs: Any) -> Any:
        write = real(self, *args, **kwargs)

        def then_crash(connection: sa.Connection) -> None:
            write(connection)  # the item and its expiry row are written, not committed
            raise Crash

        return then_crash

    monkeypatch.setattr(ExpiryLedger, "stamping", failing)
    with pytest.raises(Crash):
        memory.put("Ada is in Porto", memory_id="porto")
    with pytest.raises(Crash):
        memory.put("Ada likes black tea", memory_id=kept)  # an update of a stored one
    monkeypatch.undo()

    assert memory.get("porto") is None and memory.history("porto") == []
    assert memory.expiry.expires_at(memory.namespace, "porto") is None
    record = memory.get(kept)
    assert record is not None and record.content == "Ada likes green tea" and record.version == 1


def test_a_collection_write_failing_after_its_commit_keeps_its_ttl(
    make: Make, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = make(ttl=30)
    monkeypatch.setattr(type(memory), "_indexing", crash)
    with pytest.raises(Crash):
        memory.put("Ada is in Porto", memory_id="porto")
    monkeypatch.undo()

    assert memory.ledger.load(memory.namespace, "memory:porto") is not None
    assert memory.expiry.expires_at(memory.namespace, "porto") == clock() + 30 * 60
    clock.minutes(31)
    assert memory.get("porto") is None
    assert memory.sweep() == {"users/ada": 1} and memory.history("porto") == []


def test_a_collection_bulk_put_gives_each_memory_the_default_ttl(make: Make, clock: Clock) -> None:
    memory = make(ttl=30)
    ids = memory.put_many(["Ada likes tea", "Ada plays chess"])
    assert [memory.expiry.expires_at(memory.namespace, i) for i in ids] == [clock() + 1800] * 2
    clock.minutes(31)
    assert memory.list() == []
    assert memory.sweep() == {"users/ada": 2}


def test_a_collection_delete_keeps_the_ttl_of_the_memory_its_history_still_holds(
    make: Make, clock: Clock
) -> None:
    memory = make(ttl=30)
    memory_id = memory.put("Ada is in Porto")
    memory.delete(memory_id)
    assert memory.expiry.expires_at(memory.namespace, memory_id) == clock() + 30 * 60


def vector(tmp_path: Path, clock: Clock, **options: Any) -> VectorMemory:
    return VectorMemory(
        path=str(tmp_path / "chroma"),
        embeddings=EMBEDDINGS,
        namespace=("users", "ada"),
        clock=clock,
        write="sync",
        **options,
    )


def test_a_vector_turn_failing_after_its_expiry_row_leaves_a_row_the_sweep_drops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    memory = vector(tmp_path, clock, ttl=30)
    monkeypatch.setattr(memory.backend, "save", crash)
    with pytest.raises(Crash):
        memory.save_context({"input": "my locker code is 1234"}, {"output": "noted"})
    monkeypatch.undo()

    assert memory.export_documents() == []  # absent: no document lives without its ttl
    assert memory.expiry.count() == 1
    clock.minutes(31)
    assert memory.sweep() == {"users/ada": 1}  # deletes nothing, drops the row
    assert memory.expiry.count() == 0


def test_a_vector_write_whose_expiry_row_fails_writes_no_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    memory = vector(tmp_path, clock, ttl=30)
    monkeypatch.setattr(memory.expiry, "set_many", crash)
    with pytest.raises(Crash):
        memory.save_context({"input": "my locker code is 1234"}, {"output": "noted"})
    with pytest.raises(Crash):
        memory.add(["Ada likes green tea"])
    monkeypatch.undo()
    assert memory.export_documents() == []

    [doc_id] = memory.add(["Ada likes green tea"])
    assert memory.expiry.expires_at(memory.namespace, doc_id) == clock() + 30 * 60


def test_an_example_failing_after_its_expiry_row_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    memory = ExampleMemory(
        path=str(tmp_path / "chroma"), embeddings=EMBEDDINGS, clock=clock, ttl=30, write="sync"
    )
    monkeypatch.setattr(memory.backend, "add", crash)
    with pytest.raises(Crash):
        memory.add_example({"input": "2+2", "output": "4"})
    monkeypatch.undo()
    assert memory.export_documents() == [] and memory.expiry.count() == 1


def test_an_async_vector_turn_failing_after_its_expiry_row_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = vector(tmp_path, Clock(), ttl=30)

    async def acrash(*args: Any, **kwargs: Any) -> None:
        raise Crash

    monkeypatch.setattr(memory.backend, "asave", acrash)
    with pytest.raises(Crash):
        asyncio.run(memory.asave_context({"input": "my code is 1234"}, {"output": "noted"}))
    monkeypatch.undo()
    assert memory.export_documents() == [] and memory.expiry.count() == 1


@pytest.mark.parametrize("ttl", [0, -5, True, "soon"])
def test_a_bad_ttl_of_a_bulk_add_is_refused_and_nothing_is_stored(tmp_path: Path, ttl: Any) -> None:
    memory = vector(tmp_path, Clock())
    with pytest.raises(InvalidInputError, match="ttl must be minutes > 0"):
        memory.add(["my locker code is 1234"], ttl=ttl)
    assert memory.export_documents() == [] and memory.expiry.count() == 0


@pytest.mark.parametrize("write", ["sync", "background"])
def test_a_bulk_add_with_a_text_no_store_can_write_is_refused_and_nothing_is_stored(
    tmp_path: Path, write: str
) -> None:
    memory = VectorMemory(path=str(tmp_path / "chroma"), embeddings=EMBEDDINGS, ttl=30, write=write)
    texts = ["Ada likes tea", "a bad decode \ud800 upstream", "Ada likes chess"]
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        memory.add(texts)
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        asyncio.run(memory.aadd(texts, ids=["a", "b", "c"]))
    memory.flush()
    assert memory.export_documents() == [] and memory.expiry.count() == 0
