"""A memory's state is keyed by what the memory is, never by the variable it fills.

``memory_key`` names a prompt variable; renaming it must keep the summary and
the token buffer's cursor, and a database an earlier release wrote (its keys
were ``"{type}:{memory_key}:{digest}"``) keeps working.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from memories import SQLiteHistory, SummaryMemory, TokenBufferMemory, create_memory
from memories.core.state_keys import earlier_key, state_key_of
from memories.faces.demo import DEMO_MEMORIES, run_demo
from tests.probes import python

TURNS = [
    ("Hi, I'm Ada, I live in Oslo.", "Hello Ada!"),
    ("I drink green tea every morning.", "Noted."),
    ("I am learning the cello.", "Lovely."),
    ("My sister Mia visits in June.", "Nice."),
]

#: Each summary memory of a config, as a process that opens it sees it.
SHOW_SUMMARIES = """
import json, sys
from memories import create_memory
from memories.core.combined import leaves_of
shown = {}
for leaf in leaves_of(create_memory(sys.argv[1])):
    if leaf.config_type in ("summary", "summary_buffer"):
        shown[leaf.memory_key] = leaf.load_memory_variables({})[leaf.memory_key]
print(json.dumps(shown))
"""


def states(db: Path) -> dict[tuple[str, str], dict]:
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT session_id, key, value FROM memories_state").fetchall()
    return {(session, key): json.loads(value) for session, key, value in rows}


def converse(memory: object) -> None:
    for said, answer in TURNS:
        memory.save_context({"input": said}, {"output": answer})  # type: ignore[attr-defined]


def test_the_demos_config_reopened_in_a_new_process_shows_each_summary(tmp_path: Path) -> None:
    rows = {name: DEMO_MEMORIES[name] for name in ("summary", "summary_buffer (120)")}
    run_demo(tmp_path / "demo.db", memories=rows)
    saved = states(tmp_path / "demo.db")
    done = python("-c", SHOW_SUMMARIES, str(tmp_path / "demo.yaml"))
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(shown) == ["summary", "summary_buffer"]  # the config's memory_keys
    for session, text in shown.items():
        (state,) = [v for (s, _), v in saved.items() if s == session]
        assert state["summary"] and state["summary"] in str(text)
    assert states(tmp_path / "demo.db") == saved  # found where it was: nothing folded anew


def test_renaming_memory_key_keeps_the_summary(tmp_path: Path) -> None:
    history = {"type": "sqlite", "path": str(tmp_path / "chat.db"), "session_id": "u1"}
    first = create_memory({"type": "summary", "history": history, "memory_key": "history"})
    converse(first)
    summary = first.load_memory_variables({})["history"]
    renamed = create_memory({"type": "summary", "history": history, "memory_key": "past"})
    assert renamed.load_memory_variables({}) == {"past": summary}
    assert renamed.state_key == first.state_key


def test_renaming_memory_key_keeps_the_token_buffers_cursor(tmp_path: Path) -> None:
    history = SQLiteHistory(tmp_path / "chat.db", session_id="u1")
    first = TokenBufferMemory(chat_memory=history, max_token_limit=30, memory_key="history")
    converse(first)
    saved = states(tmp_path / "chat.db")
    assert len(saved) == 1  # the window's cursor
    renamed = TokenBufferMemory(
        chat_memory=SQLiteHistory(tmp_path / "chat.db", session_id="u1"),
        max_token_limit=30,
        memory_key="window",
    )
    assert renamed.load_memory_variables({})["window"] == first.buffer
    renamed.save_context({"input": "And one more."}, {"output": "Sure."})
    first.save_context({"input": "Last one."}, {"output": "Fine."})
    assert renamed.buffer == first.buffer
    assert states(tmp_path / "chat.db").keys() == saved.keys()  # one cursor, moved by both


def test_a_database_written_under_the_old_key_is_found_under_any_memory_key(
    tmp_path: Path,
) -> None:
    db = tmp_path / "demo.db"
    writer = SummaryMemory(chat_memory=SQLiteHistory(db, session_id="summary"))
    converse(writer)
    summary = writer.load_memory_variables({})["history"]
    # As 0.2.0 left it: the state under "summary:history:<digest>", nothing under the new key.
    old = f"summary:history:{writer.state_key.rpartition(':')[2]}"
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE memories_state SET key = ?", (old,))
    reopened = create_memory(
        {
            "type": "summary",
            "memory_key": "summary",
            "history": {"type": "sqlite", "path": str(db), "session_id": "summary"},
        }
    )
    assert reopened.load_memory_variables({}) == {"summary": summary}
    assert reopened.state_key == old
    reopened.save_context({"input": "One more thing."}, {"output": "Yes?"})
    assert [key for _, key in states(db)] == [old]  # kept where it was, never copied


def test_the_key_names_the_type_and_the_options_that_shape_the_state() -> None:
    assert state_key_of("window", {"k": 3}) != state_key_of("window", {"k": 4})
    assert state_key_of("window", {"k": 3}) != state_key_of("token_buffer", {"k": 3})
    key = state_key_of("summary", {})
    digest = key.rpartition(":")[2]
    keys = [f"summary:b:{digest}", f"summary:a:{digest}", f"summary_buffer:a:{digest}"]
    assert earlier_key(keys, key, "b") == f"summary:b:{digest}"  # its own memory_key first
    assert earlier_key(keys, key, "c") == f"summary:a:{digest}"
    assert earlier_key([f"summary:a:{digest}:overflow", "summary:a:0"], key, "a") is None
