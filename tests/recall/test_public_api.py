"""The public API of memories.stores.recall is its sorted __all__."""

from __future__ import annotations

import memories.stores.recall as recall


def _isort_key(name: str) -> tuple[int, str]:
    # ruff's RUF022 order: CONSTANTS, then Classes, then functions.
    kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return kind, name


def test_all_is_sorted_and_importable() -> None:
    assert recall.__all__ == sorted(recall.__all__, key=_isort_key)
    for name in recall.__all__:
        assert getattr(recall, name) is not None
