"""The outbox forgets exactly the copies that were written, never a newer one with the same id."""

from __future__ import annotations

from pathlib import Path

import pytest

from memories.vector.outbox import MemoryOutbox, OutboxRow, SQLiteOutbox


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_a_row_queued_again_while_its_older_copy_was_written_stays_queued(
    kind: str, tmp_path: Path
) -> None:
    outbox = SQLiteOutbox(str(tmp_path / "outbox.db")) if kind == "sqlite" else MemoryOutbox()
    first = OutboxRow("doc", "the text", {"feedback": 0.0}, needs_turn=False, replace=True)
    other = OutboxRow("other", "another", {}, needs_turn=False)
    outbox.put("t", "ns", [first, other])
    read = outbox.pending("t", "ns")  # the writer takes these...
    rated = OutboxRow("doc", "the text", {"feedback": 1.0}, needs_turn=False, replace=True)
    outbox.put("t", "ns", [rated])  # ...while the example is rated
    outbox.remove("t", "ns", read)  # the writer forgets what it wrote
    assert [(r.doc_id, r.metadata) for r in outbox.pending("t", "ns")] == [
        ("doc", {"feedback": 1.0})
    ]
