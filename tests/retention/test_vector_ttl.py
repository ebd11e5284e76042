"""Vector and example memories with a time to live, on Chroma (and pgvector when installed)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memories import ExampleMemory, VectorMemory
from tests.retention.conftest import (
    Clock,
    check_deletions_discard_expiry_rows,
    rewritten_while_swept,
)

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"


def vector(tmp_path: Path, clock: Clock, **options: Any) -> VectorMemory:
    options.setdefault("namespace", ("users", "ada"))
    return VectorMemory(
        path=str(tmp_path / "chroma"), embeddings=EMBEDDINGS, clock=clock, **options
    )


def test_expired_turns_are_hidden_at_once_and_swept_from_chroma(tmp_path: Path) -> None:
    clock = Clock()
    memory = vector(tmp_path, clock, ttl=60)
    memory.save_context({"input": "my locker code is 1234"}, {"output": "noted"})
    [kept] = memory.add(["Ada likes green tea"], ttl=None)
    memory.flush()
    clock.minutes(61)

    assert "1234" not in memory.load_memory_variables({"input": "locker code"})["history"]
    assert [r.id for r in memory.search("locker code tea", k=4)] == [kept]
    assert len(memory.export_documents()) == 2  # hidden, still stored until the sweep

    assert memory.sweep(dry_run=True) == {"users/ada": 1}
    assert memory.sweep() == {"users/ada": 1}
    assert [r.id for r in memory.export_documents()] == [kept]  # the Chroma document is gone
    assert memory.expiry.count() == 0
    assert memory.sweep() == {}


def test_a_search_reads_past_expired_documents_to_fill_k(tmp_path: Path) -> None:
    clock = Clock()
    memory = vector(tmp_path, clock)
    memory.add(["chess on Mondays"], ttl=5)
    live = set(memory.add(["chess with Bo", "chess online"]))
    memory.flush()
    clock.minutes(6)
    assert {r.id for r in memory.search("chess", k=2)} == live


def test_another_namespace_is_swept_too_and_keeps_its_live_documents(tmp_path: Path) -> None:
    clock = Clock()
    ada, bo = vector(tmp_path, clock), vector(tmp_path, clock, namespace=("users", "bo"))
    ada.add(["Ada is in Rome"], ttl=5)
    [forever] = bo.add(["Bo is a pilot"])
    bo.add(["Bo is in Oslo"], ttl=5)
    clock.minutes(6)
    assert ada.sweep() == {"users/ada": 1, "users/bo": 1}
    assert [r.id for r in bo.export_documents()] == [forever]


def test_async_reads_hide_expired_documents(tmp_path: Path) -> None:
    clock = Clock()
    memory = vector(tmp_path, clock, ttl=5)

    async def scenario() -> tuple[str, str, dict[str, int]]:
        await memory.asave_context({"input": "the door code is 77"}, {"output": "ok"})
        await memory.aflush()
        before = (await memory.aload_memory_variables({"input": "door code"}))["history"]
        clock.minutes(6)
        after = (await memory.aload_memory_variables({"input": "door code"}))["history"]
        return before, after, await memory.asweep()

    before, after, swept = asyncio.run(scenario())
    assert "77" in before and "77" not in after and swept == {"users/ada": 1}


def test_expired_examples_are_not_selected_nor_got(tmp_path: Path) -> None:
    clock = Clock()
    examples = ExampleMemory(
        path=str(tmp_path / "chroma"), embeddings=EMBEDDINGS, clock=clock, ttl=10
    )
    old = examples.add_example({"input": "2+2", "output": "4"})
    clock.minutes(5)
    new = examples.add_example({"input": "3+3", "output": "6"})
    examples.flush()
    clock.minutes(6)  # the first is 11 minutes old, the second 6
    assert [e.id for e in examples.select("2+2", k=2)] == [new]
    assert [e.id for e in examples.get([old, new])] == [new]
    assert examples.sweep() == {"default": 1}


def test_a_document_written_again_while_the_sweep_runs_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    memory = vector(tmp_path, clock)
    [rewritten, gone] = memory.add(["Ada is in Rome", "Ada is at the dentist"], ttl=10)
    clock.minutes(11)
    other = vector(tmp_path, clock)
    rewritten_while_swept(
        monkeypatch, lambda: other.add(["Ada is in Oslo"], ids=[rewritten], ttl=10)
    )
    assert memory.sweep() == {"users/ada": 2}  # read as expired: the rewrite came after
    monkeypatch.undo()

    assert [r.text for r in memory.backend.get([rewritten, gone])] == ["Ada is in Oslo"]
    assert [r.id for r in memory.search("Oslo", k=1)] == [rewritten]
    clock.minutes(11)  # its new time to live is kept: it expires in its turn
    assert memory.sweep() == {"users/ada": 1} and memory.backend.get([rewritten]) == []


def test_an_example_written_again_while_the_sweep_runs_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()

    def examples() -> ExampleMemory:
        return ExampleMemory(path=str(tmp_path / "chroma"), embeddings=EMBEDDINGS, clock=clock)

    memory = examples()
    [rewritten] = memory.add(["2+2 is 4"], ttl=10)
    clock.minutes(11)
    rewritten_while_swept(
        monkeypatch, lambda: examples().add(["2+2 is four"], ids=[rewritten], ttl=10)
    )
    memory.sweep()
    monkeypatch.undo()
    assert [r.text for r in memory.backend.get([rewritten])] == ["2+2 is four"]
    assert memory.expiry.expires_at(memory.namespace, rewritten) == clock.now + 600


def test_deletions_discard_the_expiry_rows_of_what_they_deleted(tmp_path: Path) -> None:
    clock = Clock()
    check_deletions_discard_expiry_rows(lambda **options: vector(tmp_path, clock, **options))


def test_an_example_deleted_or_erased_leaves_no_expiry_row(tmp_path: Path) -> None:
    clock = Clock()
    examples = ExampleMemory(path=str(tmp_path / "chroma"), embeddings=EMBEDDINGS, clock=clock)
    [deleted, erased] = examples.add(["2+2 is 4", "3+3 is 6"], ttl=10)
    examples.delete([deleted])
    assert examples.expiry.expires_at(examples.namespace, deleted) is None
    assert examples.expiry.expires_at(examples.namespace, erased) is not None
    examples.erase_namespace()
    assert examples.expiry.count() == 0
