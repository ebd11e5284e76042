from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A fresh SQLite database for one test."""
    return f"sqlite:///{tmp_path / 'profiles.db'}"
