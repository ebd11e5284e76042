"""`memories sweep --config F [--dry-run]`: the retention of each configured memory, applied."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memories import SQLiteHistory
from memories.faces.cli import main
from memories.kernel.retention import DAY


def test_sweep_deletes_what_each_retention_expires_and_a_dry_run_only_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chat.db"
    config = tmp_path / "memory.yaml"
    config.write_text(
        "type: token_buffer\n"
        f"history: {{type: sqlite, path: {path}, session_id: u1}}\n"
        "retention: {keep_days: 7}\n"
    )
    # Rows written ten days ago (the history's clock says so), and rows written now.
    for session in ("u1", "u2"):
        old = SQLiteHistory(path, session_id=session, clock=lambda: time.time() - 10 * DAY)
        old.append([HumanMessage("old"), AIMessage("o")])
        SQLiteHistory(path, session_id=session).append([HumanMessage("new")])

    assert main(["sweep", "--config", str(config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would delete 4" in out and "u1: 2" in out and "u2: 2" in out
    assert len(SQLiteHistory(path, session_id="u2").records()) == 3

    assert main(["sweep", "--config", str(config)]) == 0
    assert "deleted 4" in capsys.readouterr().out
    for session in ("u1", "u2"):
        left = SQLiteHistory(path, session_id=session).records()
        assert [r.message.content for r in left] == ["new"]  # type: ignore[union-attr]

    assert main(["sweep", "--config", str(config)]) == 0
    assert "deleted 0" in capsys.readouterr().out


def test_sweep_says_so_when_no_memory_has_a_retention(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    SQLiteHistory(tmp_path / "c.db").append([HumanMessage("hi")])  # a store, kept whole
    config = tmp_path / "memory.yaml"
    config.write_text(f"type: buffer\nhistory: {{type: sqlite, path: {tmp_path / 'c.db'}}}\n")
    assert main(["sweep", "--config", str(config)]) == 0
    assert "no memory of this config has a retention or a time to live" in capsys.readouterr().err


def test_sweep_deletes_expired_collection_memories_of_every_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memories import CollectionMemory

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    options: dict[str, object] = {
        "path": str(tmp_path / "chroma"),
        "url": url,
        "embeddings": "tests.vector.conftest:WordEmbeddings",
    }
    # Written an hour ago (by its clock), with ten minutes to live.
    past = CollectionMemory(namespace=("users", "ada"), clock=lambda: time.time() - 3600, **options)
    gone = past.put("Ada is in Rome", ttl=10)
    kept = past.put("Ada likes tea", ttl=None)
    config = tmp_path / "memory.yaml"
    config.write_text(
        "type: collection\n"
        f"path: {tmp_path / 'chroma'}\n"
        f"url: {url}\n"
        "embeddings: tests.vector.conftest:WordEmbeddings\n"
        "namespace: [users, bo]\n"
        "ttl: 60\n"
    )
    assert main(["sweep", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "collection on sqlite:///" in out and "deleted 1" in out and "users/ada: 1" in out
    assert past.history(gone) == [] and past.get(kept) is not None
