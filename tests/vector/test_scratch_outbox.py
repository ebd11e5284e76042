"""An in-memory store's outbox lives in a scratch folder of its process; no crash leaves it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from memories.stores.vector.outbox import remove_orphaned_scratch
from tests.probes import python

SAVE = """
import os, sys
from memories import VectorMemory
memory = VectorMemory(mode="memory", collection="scratch", namespace="ada",
                      embeddings="tests.vector.conftest:WordEmbeddings")
memory.save_context({"input": "my passport number is X123"}, {"output": "Noted."})
memory.flush(timeout=30)
if sys.argv[1] == "killed":
    os._exit(0)  # as a kill: no atexit
"""


def _run(how: str, tmp: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp)}
    python("-c", SAVE, how, env=env)


def _scratch(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("memories-outbox-*"))


def test_the_next_process_removes_what_a_killed_one_left(tmp_path: Path) -> None:
    _run("killed", tmp_path)
    (left,) = _scratch(tmp_path)
    assert any(b"X123" in f.read_bytes() for f in left.iterdir())  # the turn's text
    _run("exits", tmp_path)
    assert _scratch(tmp_path) == []


def test_a_running_process_keeps_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = tmp_path / f"memories-outbox-{os.getpid()}-x"
    mine.mkdir()
    remove_orphaned_scratch()
    assert mine.is_dir()
