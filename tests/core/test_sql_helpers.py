"""The shared SQL layer (memories.stores.sql): its databases, counting rows, adding to counters."""

from __future__ import annotations

import copy
import pickle

import pytest
import sqlalchemy as sa

from memories.stores import sql
from memories.stores.sql import Database, add_counts, count_rows

metadata = sa.MetaData()
counters = sa.Table(
    "counters",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("calls", sa.Integer, nullable=False),
    sa.Column("tokens", sa.Integer, nullable=False),
)


def _added(engine: sa.Engine) -> dict[tuple[str, str], tuple[int, int]]:
    rows = [
        {"name": "a", "day": "d1", "calls": 1, "tokens": 10},
        {"name": "b", "day": "d1", "calls": 2, "tokens": 0},
    ]
    with engine.begin() as connection:
        add_counts(connection, counters, rows, ["calls", "tokens"])
        add_counts(connection, counters, rows[:1], ["calls", "tokens"])
        add_counts(
            connection, counters, [{"name": "a", "day": "d2", "calls": -1, "tokens": 5}], ["calls"]
        )
        found = connection.execute(sa.select(counters)).all()
    return {(r.name, r.day): (r.calls, r.tokens) for r in found}


@pytest.mark.parametrize("upsert", [True, False], ids=["upsert", "update then insert"])
def test_add_counts_adds_to_existing_rows_and_makes_missing_ones(
    upsert: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not upsert:  # a dialect without INSERT ... ON CONFLICT
        monkeypatch.setattr(sql, "UPSERTING", {})
    engine = sa.create_engine("sqlite://")
    metadata.create_all(engine)
    assert _added(engine) == {("a", "d1"): (2, 20), ("b", "d1"): (2, 0), ("a", "d2"): (-1, 5)}


def test_count_rows_counts_the_rows_meeting_every_condition() -> None:
    engine = sa.create_engine("sqlite://")
    metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(
            sa.insert(counters),
            [{"name": n, "day": d, "calls": 0, "tokens": 0} for n in "ab" for d in ("d1", "d2")],
        )
        assert count_rows(connection, counters) == 4
        assert count_rows(connection, counters, counters.c.name == "a") == 2
        assert count_rows(connection, counters, counters.c.name == "a", counters.c.day == "d2") == 1


def test_an_in_memory_database_is_shared_by_a_copy_and_not_by_a_pickle() -> None:
    database = Database("sqlite://", metadata)
    with database.transaction(write=True) as connection:
        connection.execute(sa.insert(counters).values(name="a", day="d1", calls=1, tokens=0))
    copied, unpickled = copy.deepcopy(database), pickle.loads(pickle.dumps(database))
    assert copied.shares(database) and not unpickled.shares(database)
    for other, rows in ((copied, 1), (unpickled, 0)):
        with other.transaction() as connection:
            assert count_rows(connection, counters) == rows
