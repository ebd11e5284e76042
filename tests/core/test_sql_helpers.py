"""The shared SQL layer (memories.stores.sql): its databases, counting rows, adding to counters."""

from __future__ import annotations

import copy
import pickle

import pytest
import sqlalchemy as sa

from memories.stores import sql
from memories.stores.spending import usage_table
from memories.stores.sql import Database, add_counts, count_rows

COUNTERS = ["calls", "failures", "input_tokens", "output_tokens"]


def _row(memory: str, day: str, calls: int, tokens: int) -> dict[str, object]:
    """A usage row of namespace ``ns``: ``calls``, and ``tokens`` of input."""
    key = {"memory": memory, "namespace": "ns", "day": day}
    return key | {"calls": calls, "failures": 0, "input_tokens": tokens, "output_tokens": 0}


@pytest.mark.parametrize("upsert", [True, False], ids=["upsert", "update then insert"])
def test_add_counts_adds_to_existing_rows_and_makes_missing_ones(
    upsert: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not upsert:  # a dialect without INSERT ... ON CONFLICT
        monkeypatch.setattr(sql, "UPSERTING", {})
    engine = sa.create_engine("sqlite://")
    usage_table.create(engine)
    rows = [_row("a", "d1", 1, 10), _row("b", "d1", 2, 0)]
    with engine.begin() as connection:
        add_counts(connection, usage_table, rows, COUNTERS)
        add_counts(connection, usage_table, rows[:1], COUNTERS)
        add_counts(connection, usage_table, [_row("a", "d2", -1, 5)], ["calls"])
        found = connection.execute(sa.select(usage_table)).all()
    added = {(r.memory, r.day): (r.calls, r.input_tokens) for r in found}
    assert added == {("a", "d1"): (2, 20), ("b", "d1"): (2, 0), ("a", "d2"): (-1, 5)}


def test_count_rows_counts_the_rows_meeting_every_condition() -> None:
    engine = sa.create_engine("sqlite://")
    usage_table.create(engine)
    t = usage_table
    with engine.begin() as connection:
        rows = [_row(memory, day, 0, 0) for memory in "ab" for day in ("d1", "d2")]
        connection.execute(sa.insert(t), rows)
        assert count_rows(connection, t) == 4
        assert count_rows(connection, t, t.c.memory == "a") == 2
        assert count_rows(connection, t, t.c.memory == "a", t.c.day == "d2") == 1


def test_an_in_memory_database_is_shared_by_a_copy_and_not_by_a_pickle() -> None:
    database = Database("sqlite://", usage_table.metadata)
    with database.transaction(write=True) as connection:
        connection.execute(sa.insert(usage_table).values(_row("a", "d1", 1, 0)))
    copied, unpickled = copy.deepcopy(database), pickle.loads(pickle.dumps(database))
    assert copied.shares(database) and not unpickled.shares(database)
    for other, rows in ((copied, 1), (unpickled, 0)):
        with other.transaction() as connection:
            assert count_rows(connection, usage_table) == rows
