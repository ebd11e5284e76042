"""Fixtures of the retention tests: an injected clock, a collection on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from memories import CollectionMemory
from memories.stores.expiry import ExpiryLedger

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"


class Clock:
    """A clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def minutes(self, n: float) -> None:
        self.now += n * 60


_databases = iter(range(10**6))


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    server = request.getfixturevalue("postgres_url")
    name = f"collection_ttl_{next(_databases)}"
    engine = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.execute(sa.text(f"CREATE DATABASE {name}"))
    finally:
        engine.dispose()
    return server.rsplit("/", 1)[0] + f"/{name}"


Make = Callable[..., CollectionMemory]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make(tmp_path: Path, ledger_url: str, clock: Clock) -> Make:
    def made(**options: Any) -> CollectionMemory:
        options.setdefault("namespace", ("users", "ada"))
        return CollectionMemory(
            path=str(tmp_path / "chroma"),
            url=ledger_url,
            embeddings=EMBEDDINGS,
            clock=clock,
            **options,
        )

    return made


def rewritten_while_swept(monkeypatch: pytest.MonkeyPatch, rewrite: Callable[[], None]) -> None:
    """Make ``rewrite`` run once, right after the sweep has read the expired rows."""
    real, done = ExpiryLedger.expired, []

    def read_then_written(self: ExpiryLedger, **options: Any) -> Any:
        found = real(self, **options)
        if found and not done:
            done.append(True)  # another writer puts it again after the sweep read the rows
            rewrite()
        return found

    monkeypatch.setattr(ExpiryLedger, "expired", read_then_written)
