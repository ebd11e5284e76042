"""Test helpers shared across test modules."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

from memories.kernel.messages import dump_message
from memories.stores.history.sql import SQLiteHistory


def fill_history_fast(path: Path, session_id: str, turns: int) -> None:
    """Write ``turns`` human/AI pairs straight into a SQLite history file.

    The rows are exactly what ``SQLiteHistory.append`` writes; going around it
    makes a 100,000-message log in well under a second, for read-path tests.
    """
    SQLiteHistory(path, session_id=session_id).entries(last=0)  # the tables, made as on first use
    now = time.time()
    human, ai = dump_message(HumanMessage("a question")), dump_message(AIMessage("an answer"))
    rows = []
    for _ in range(turns):
        rows.append((session_id, "human", human, now))
        rows.append((session_id, "ai", ai, now))
    with sqlite3.connect(path) as connection:
        connection.executemany(
            "INSERT INTO memories_messages (session_id, type, message, created_at) "
            "VALUES (?, ?, ?, ?)",
            rows,
        )


def joined(*threads: threading.Thread, timeout: float = 120) -> None:
    """Wait for ``threads`` to end, all within ``timeout`` seconds; a hung one fails the test."""
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    hung = [thread.name for thread in threads if thread.is_alive()]
    assert not hung, f"threads still running after {timeout} s: {hung}"
