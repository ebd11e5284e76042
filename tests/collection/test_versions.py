"""A collection memory's versions from its change log: each valid until the next change."""

from __future__ import annotations

from datetime import UTC, datetime

from memories.long_term.collection import rules
from memories.stores.documents import ProfileChange


def _change(number: int, at: float, content: str | None) -> ProfileChange:
    document = None if content is None else {"content": content, "metadata": {"n": number}}
    kind = "put" if content is not None else "clear"
    return ProfileChange(number, number, kind, at, document, (), ())


def test_no_change_is_no_version() -> None:
    assert rules.versions([]) == []


def test_each_version_ends_when_the_next_begins_and_the_last_stays_valid() -> None:
    changes = [_change(1, 100.0, "tea"), _change(2, 250.0, "coffee"), _change(3, 400.0, None)]
    found = rules.versions(changes)
    assert [(v.version, v.kind, v.content) for v in found] == [
        (1, "put", "tea"),
        (2, "put", "coffee"),
        (3, "clear", None),
    ]
    assert [v.valid_from for v in found] == [
        datetime.fromtimestamp(t, UTC) for t in (100, 250, 400)
    ]
    assert [v.invalid_at for v in found] == [found[1].valid_from, found[2].valid_from, None]
    assert found[0].metadata == {"n": 1}
