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


def check_deletions_discard_expiry_rows(make: Callable[..., Any]) -> None:
    """A vector memory's delete (by id, by filter), clear and erase_namespace leave no expiry
    row of what they deleted; what they kept, and another namespace, keep theirs."""
    ada = make(namespace=("users", "ada"), session_id="s1")
    later = make(namespace=("users", "ada"), session_id="s2")
    bob = make(namespace=("users", "bob"), session_id="s1")
    by_id, by_filter, cleared = ada.add(
        ["Ada is in Rome", "Ada likes tea", "Ada is at home"],
        metadatas=[None, {"topic": "tea"}, None],
        ttl=10,
    )
    [erased] = later.add(["Ada is in Oslo"], ttl=10)
    [kept] = bob.add(["Bob is in Paris"], ttl=10)
    ledger = ada.expiry

    def rows() -> dict[str, bool]:
        found = {i: ledger.expires_at(ada.namespace, i) is not None for i in (by_id, by_filter)}
        found |= {i: ledger.expires_at(ada.namespace, i) is not None for i in (cleared, erased)}
        return found | {kept: ledger.expires_at(bob.namespace, kept) is not None}

    ada.delete([by_id])
    assert rows() == {by_id: False, by_filter: True, cleared: True, erased: True, kept: True}
    ada.delete(filter={"topic": "tea"})
    assert rows() == {by_id: False, by_filter: False, cleared: True, erased: True, kept: True}
    ada.clear()  # session s1's: s2's document stays, with its row
    assert rows() == {by_id: False, by_filter: False, cleared: False, erased: True, kept: True}
    assert [r.id for r in later.backend.get([erased])] == [erased]
    later.erase_namespace()
    assert rows() == {by_id: False, by_filter: False, cleared: False, erased: False, kept: True}
    assert [r.id for r in bob.backend.get([kept])] == [kept]


def expired_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Spy on :meth:`ExpiryLedger.expired`: the rows each read fetched, in order."""
    reads: list[int] = []
    real = ExpiryLedger.expired

    def spied(self: ExpiryLedger, **options: Any) -> Any:
        found = real(self, **options)
        reads.append(len(found))
        return found

    monkeypatch.setattr(ExpiryLedger, "expired", spied)
    return reads
