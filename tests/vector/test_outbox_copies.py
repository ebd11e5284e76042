"""The outbox forgets exactly the copies that were written, never a newer one with the same id."""

from __future__ import annotations

from pathlib import Path

from memories.stores.vector.outbox import OutboxRow, SQLOutbox


def _outbox(folder: Path) -> SQLOutbox:
    return SQLOutbox(f"sqlite:///{folder / 'outbox.db'}")


def test_a_row_queued_again_while_its_older_copy_was_written_stays_queued(tmp_path: Path) -> None:
    outbox = _outbox(tmp_path)
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


def test_setting_aside_a_refused_copy_keeps_the_one_queued_since(tmp_path: Path) -> None:
    """The store refused the first copy; an edit queued meanwhile must still be written."""
    outbox = _outbox(tmp_path)
    first = OutboxRow("doc", "the text", {"feedback": 0.0}, needs_turn=False, replace=True)
    outbox.put("t", "ns", [first])
    (refused,) = outbox.pending("t", "ns")
    edited = OutboxRow("doc", "the text, edited", {"feedback": 0.0}, needs_turn=False, replace=True)
    outbox.put("t", "ns", [edited])
    outbox.bury("t", "ns", [(refused, "ValueError: refused")])
    assert [r.text for r in outbox.pending("t", "ns")] == ["the text, edited"]
    assert [(d.row.text, d.error) for d in outbox.dead_letters("t", "ns")] == [
        ("the text", "ValueError: refused")
    ]
    # Reviving the old copy never lets it overtake the edit: the edit is written last.
    assert outbox.revive("t", "ns", None) == 1
    assert outbox.dead_letters("t", "ns") == []
    assert [r.text for r in outbox.pending("t", "ns")][-1] == "the text, edited"


def test_reviving_takes_exactly_the_letters_it_read(tmp_path: Path) -> None:
    outbox = _outbox(tmp_path)
    rows = [OutboxRow(f"d{i}", f"text {i}", {}, needs_turn=False) for i in range(3)]
    outbox.put("t", "ns", rows)
    outbox.bury("t", "ns", [(r, "E: no") for r in outbox.pending("t", "ns")])
    assert outbox.revive("t", "ns", ["d1"]) == 1
    assert [r.doc_id for r in outbox.pending("t", "ns")] == ["d1"]
    assert [d.row.doc_id for d in outbox.dead_letters("t", "ns")] == ["d0", "d2"]
