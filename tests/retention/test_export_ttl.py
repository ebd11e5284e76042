"""A backup restored keeps each item's expiry: ``memories export``, then ``import``.

A permanent item stays permanent, an expiring one expires at its original time
(not a fresh ``ttl`` counted from the import), an expired one is not brought back.
"""

from __future__ import annotations

import io
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from memories import CollectionMemory, InvalidInputError, VectorMemory
from memories.faces.cli import main
from memories.faces.commands import export_jsonl, import_jsonl, read_jsonl
from tests.retention.conftest import Clock

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"
NAMESPACE = ("users", "ada")


def made(kind: str, folder: Path, clock: Clock, **options: Any) -> Any:
    """A vector memory, or a collection (another key: its expiry rows are marked)."""
    options.update(path=str(folder / "chroma"), embeddings=EMBEDDINGS, clock=clock)
    if kind == "vector":
        return VectorMemory(namespace=NAMESPACE, **options)
    url = f"sqlite:///{folder / 'ledger.db'}"
    return CollectionMemory(namespace=NAMESPACE, url=url, key="facts", **options)


def write(memory: Any, text: str, ttl: float | None, item: str | None = None) -> str:
    if isinstance(memory, CollectionMemory):
        return memory.put(text, ttl=ttl, memory_id=item)
    [written] = memory.add([text], ttl=ttl, ids=None if item is None else [item])
    return written


def expires_at(memory: Any, item: str) -> float | None:
    return memory.expiry.expires_at(NAMESPACE, memory.expiry_mark + item)


@pytest.mark.parametrize("kind", ["vector", "collection"])
def test_a_restored_backup_keeps_each_items_expiry_and_leaves_expired_ones_out(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    old = made(kind, tmp_path / "old", clock)
    forever = write(old, "Ada likes green tea", None)
    soon = write(old, "Ada is in Rome this week", 30)
    gone = write(old, "Ada's locker code is 1234", 1)
    held = write(old, "Ada plays chess", 600)  # the new store holds it, permanent
    clock.minutes(5)
    original = expires_at(old, soon)
    out = io.StringIO()
    export_jsonl(old, out)

    new = made(kind, tmp_path / "new", clock, ttl=60)
    write(new, "Ada plays chess", None, held)
    lines = read_jsonl(out.getvalue().splitlines(), source="backup.jsonl")
    with caplog.at_level(logging.WARNING):
        import_jsonl(lines, lambda _: [], lambda _: [new])
    assert "1 expired" in caplog.text

    assert expires_at(new, forever) is None  # not the config's 60 minutes
    assert expires_at(new, soon) == original  # not 60 minutes from the import
    assert expires_at(new, held) is None  # an import never gives a permanent item a ttl
    assert gone not in {r.id for r in new.export_documents()}
    clock.minutes(26)
    new.sweep()
    assert {r.id for r in new.export_documents()} == {forever, held}
    clock.minutes(10**6)
    new.sweep()
    assert {r.id for r in new.export_documents()} == {forever, held}


def test_the_commands_restore_each_expiry_and_an_older_file_gets_the_configs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def config(name: str, ttl: str) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            f"type: vector\npath: {tmp_path / name}\nembeddings: {EMBEDDINGS}\n"
            f"namespace: [users, ada]\n{ttl}"
        )
        return path

    hour_ago = VectorMemory(
        path=str(tmp_path / "old"), embeddings=EMBEDDINGS, namespace=NAMESPACE,
        clock=lambda: time.time() - 3600,
    )  # fmt: skip
    [forever] = hour_ago.add(["Ada likes green tea"], ttl=None)
    [soon] = hour_ago.add(["Ada is in Rome this week"], ttl=24 * 60)
    hour_ago.add(["Ada's locker code is 1234"], ttl=10)
    original = hour_ago.expiry.expires_at(NAMESPACE, soon)
    backup = tmp_path / "backup.jsonl"
    assert main(["export", "--config", str(config("old", "")), "-o", str(backup)]) == 0

    fresh = config("new", "ttl: 60\n")
    with caplog.at_level(logging.WARNING):
        assert main(["import", "--config", str(fresh), str(backup)]) == 0
    assert "1 expired" in caplog.text
    new = VectorMemory(path=str(tmp_path / "new"), embeddings=EMBEDDINGS, namespace=NAMESPACE)
    assert {r.id for r in new.export_documents()} == {forever, soon}
    assert new.expiry.expires_at(NAMESPACE, forever) is None
    assert new.expiry.expires_at(NAMESPACE, soon) == original

    older = tmp_path / "older.jsonl"  # an export made before lines carried their expiry
    record = json.loads(backup.read_text().splitlines()[0])
    record.pop("expiry", None)
    older.write_text(json.dumps({**record, "id": "from-before"}) + "\n")
    assert main(["import", "--config", str(fresh), str(older)]) == 0
    left = new.expiry.expires_at(NAMESPACE, "from-before")
    assert left is not None and 59 * 60 < left - time.time() <= 60 * 60


@pytest.mark.parametrize("bad", [[60], [60, 1, 2], "soon", [0, 5], [True, 5], {"ttl": 60}])
def test_an_expiry_that_is_not_two_numbers_is_refused_before_anything_is_written(bad: Any) -> None:
    line = {"namespace": list(NAMESPACE), "id": "d1", "text": "t", "metadata": {}, "expiry": bad}
    with pytest.raises(InvalidInputError, match=r"backup.jsonl:1: .*expiry"):
        read_jsonl([json.dumps(line)], source="backup.jsonl")
