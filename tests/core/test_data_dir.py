"""Issue 16: constructing a memory writes nothing; default files live in one data directory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memories import (
    BufferMemory,
    ProfileMemory,
    SQLHistory,
    SQLiteHistory,
    TokenBufferMemory,
    VectorMemory,
)
from memories.kernel.paths import DATA_DIR_ENV, data_dir


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """An empty working directory and a data directory that does not exist yet."""
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv(DATA_DIR_ENV, str(data))
    return work, data


def test_constructing_memories_writes_nothing(fresh: tuple[Path, Path]) -> None:
    work, data = fresh
    ProfileMemory(policy="manual")
    VectorMemory(embeddings="tests.vector.conftest:WordEmbeddings")
    BufferMemory(chat_memory=SQLiteHistory())
    TokenBufferMemory(chat_memory=SQLHistory(session_id="s"))
    ProfileMemory(policy="manual", url=f"sqlite:///{work}/nested/profile.db")
    assert list(work.iterdir()) == [] and not data.exists()


def test_default_files_go_to_the_data_directory_on_first_write(fresh: tuple[Path, Path]) -> None:
    work, data = fresh
    assert data_dir() == data
    BufferMemory(chat_memory=SQLiteHistory()).save_context({"input": "hi"}, {"output": "yo"})
    ProfileMemory(policy="manual").put({"name": "Maya"})
    vector = VectorMemory(embeddings="tests.vector.conftest:WordEmbeddings", write="sync")
    vector.save_context({"input": "I like tea"}, {"output": "noted"})
    assert list(work.iterdir()) == []
    assert {p.name for p in data.iterdir()} >= {"memories.db", "chroma"}
    assert SQLiteHistory(data / "memories.db").messages[0].text == "hi"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux rule (XDG)")
def test_the_platform_folder_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", "/xdg")
    assert data_dir() == Path("/xdg/memories")
    monkeypatch.delenv("XDG_DATA_HOME")
    assert data_dir() == Path.home() / ".local" / "share" / "memories"
