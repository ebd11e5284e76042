"""The `memories` command and the README's main job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memories.faces.cli import main
from memories.faces.demo import DEMO_NAMESPACE, INSTRUCTION_REVISIONS, SCRIPT, run_demo
from memories.long_term.profile import ProfileStore
from memories.stores.history import SQLiteHistory
from tests.probes import python


def test_demo_runs_every_memory_and_keeps_histories_in_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    results = run_demo(db)
    by_name = {r.name.split(" ")[0]: r for r in results}
    chats = {"buffer", "window", "token_buffer", "summary", "summary_buffer"}
    assert set(by_name) == {*chats, "vector", "profile", "collection", "examples", "instructions"}
    # Offline, the collection keeps what the user stated, the tea preference updated to coffee.
    collection = by_name["collection"].injected
    assert "- I've switched to coffee lately" in collection and "tea" not in collection
    assert "switched to coffee lately" in by_name["vector"].injected  # recalled by meaning
    assert by_name["vector"].llm_calls == 0
    assert by_name["buffer"].injected.startswith("Human: " + SCRIPT[0][0])
    assert by_name["window"].injected.count("Human:") == 3
    assert by_name["token_buffer"].tokens <= 120
    assert by_name["buffer"].tokens > by_name["window"].tokens
    assert by_name["summary_buffer"].injected.startswith("System: ")  # the summary, then turns
    assert all(by_name[name].llm_calls == 0 for name in chats)  # offline: extractive summaries
    for session in chats:
        assert len(SQLiteHistory(db, session_id=session).entries()) == 2 * len(SCRIPT)


def test_demo_shows_past_exchanges_as_examples_and_revised_instructions(tmp_path: Path) -> None:
    by_name = {r.name.split(" ")[0]: r for r in run_demo(tmp_path / "d.db")}
    examples, instructions = by_name["examples"], by_name["instructions"]
    # The two past exchanges most like "And what do I drink these days?", as few-shot pairs.
    assert examples.injected.count("Human: ") == 2 and examples.llm_calls == 0
    assert "coffee" in examples.injected
    # Two reflections (after turns 4 and 8), each a rule of behaviour, not a fact.
    assert instructions.injected == INSTRUCTION_REVISIONS[-1]
    assert instructions.llm_calls == 2


def test_demo_profile_keeps_the_changed_preference(tmp_path: Path) -> None:
    (profile,) = [r for r in run_demo(tmp_path / "d.db") if r.name == "profile"]
    document = json.loads(profile.injected)
    assert document["drink"] == "black coffee, no sugar"  # the preference changed in session 3
    assert document["plans"][0] == "conference in Kyoto next month"
    assert profile.llm_calls == len(SCRIPT)  # one scripted update per turn
    assert ProfileStore(f"sqlite:///{tmp_path / 'd.db'}").get(DEMO_NAMESPACE, "profile")


def test_demo_command_prints_the_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["demo", "--db", str(tmp_path / "d.db")]) == 0
    out = capsys.readouterr().out
    assert "token_buffer (120)" in out and "LLM calls" in out


def test_bad_llm_string_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--llm", "no-colon-here"]) == 2
    assert "provider:model" in capsys.readouterr().err


def test_console_script_entry_point_runs() -> None:
    assert "demo" in python("-m", "memories.faces.cli", "--help").stdout
