"""The `memories` command and the README's main job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memories.cli import main
from memories.demo import SCRIPT, run_demo
from memories.history import SQLiteHistory


def test_demo_runs_every_memory_and_keeps_histories_in_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    results = run_demo(db)
    by_name = {r.name.split(" ")[0]: r for r in results}
    assert set(by_name) == {"buffer", "window", "token_buffer"}
    assert by_name["buffer"].injected.startswith("Human: " + SCRIPT[0][0])
    assert by_name["window"].injected.count("Human:") == 3
    assert by_name["token_buffer"].tokens <= 120
    assert by_name["buffer"].tokens > by_name["window"].tokens
    for session in by_name:
        assert len(SQLiteHistory(db, session_id=session).entries()) == 2 * len(SCRIPT)


def test_demo_command_prints_the_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["demo", "--db", str(tmp_path / "d.db")]) == 0
    out = capsys.readouterr().out
    assert "token_buffer (120)" in out and "LLM calls" in out


def test_bad_llm_string_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--llm", "no-colon-here"]) == 2
    assert "provider:model" in capsys.readouterr().err


def test_console_script_entry_point_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "memories.cli", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0 and "demo" in result.stdout
