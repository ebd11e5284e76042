"""A budget's spending and each model call's usage in a SQL database, shared by processes.

``memories_budget_spending`` holds one row per namespace, for its current period
only (the first reservation of a new period deletes the older rows): a call is
reserved by one conditional ``UPDATE ... SET calls = calls + 1 WHERE ... AND
calls + 1 <= cap``, atomic in the database, and its tokens are added when it
answers. ``memories_model_usage`` adds every call to its day's row by one upsert
(:meth:`SQLSpending.usage_totals` reads it). What the cap covers: ``docs/deployment.md``.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import sqlalchemy as sa

from memories.kernel.accounting import Budget, ModelUsage, Spending
from memories.stores.sql import UPSERTING, Database, add_counts, count_rows, ensure_tables

__all__ = ["SQLSpending"]

_metadata = sa.MetaData()
table = sa.Table(
    "memories_budget_spending",
    _metadata,
    sa.Column("namespace", sa.Text, primary_key=True),
    sa.Column("period_start", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("calls", sa.BigInteger, nullable=False),
    sa.Column("tokens", sa.BigInteger, nullable=False),
)

_KEY = (table.c.namespace == sa.bindparam("ns")) & (table.c.period_start == sa.bindparam("period"))
_SPENT = sa.select(table.c.calls, table.c.tokens).where(_KEY)
_ADD_TOKENS = table.update().where(_KEY).values(tokens=table.c.tokens + sa.bindparam("added"))
_OLDER = table.delete().where(
    (table.c.namespace == sa.bindparam("ns")) & (table.c.period_start < sa.bindparam("period"))
)


usage_table = sa.Table(
    "memories_model_usage",
    _metadata,
    sa.Column("memory", sa.Text, primary_key=True),
    sa.Column("namespace", sa.Text, primary_key=True),
    sa.Column("day", sa.Text, primary_key=True),
    sa.Column("calls", sa.BigInteger, nullable=False),
    sa.Column("failures", sa.BigInteger, nullable=False),
    sa.Column("input_tokens", sa.BigInteger, nullable=False),
    sa.Column("output_tokens", sa.BigInteger, nullable=False),
)

#: The counters of a usage row, added to on each call.
_COUNTERS = ("calls", "failures", "input_tokens", "output_tokens")


def today() -> str:
    """The day a call is counted in: the UTC date, ``YYYY-MM-DD``."""
    return time.strftime("%Y-%m-%d", time.gmtime())


def _insert_missing(module: Any) -> Any:
    return (
        module.insert(table)
        .values(namespace=sa.bindparam("ns"), period_start=sa.bindparam("period"))
        .values(calls=0, tokens=0)
        .on_conflict_do_nothing(index_elements=[table.c.namespace, table.c.period_start])
    )


#: One statement that makes a period's row unless it exists, per dialect that has one.
_INSERTS_MISSING = {name: _insert_missing(module) for name, module in UPSERTING.items()}


class SQLSpending(Spending):
    """Budget spending in ``database`` (any store's :class:`~memories.stores.sql.Database`).

    Its transactions join the database's batch on this thread, if one is open
    for writing (a chat memory's turn): the reservation commits with the turn.
    """

    def __init__(self, database: Database) -> None:
        self.database = database

    def reserve(self, namespace: str, start: int, budget: Budget, /) -> tuple[int, int] | None:
        """Count one call if ``budget`` allows it, atomically (see the module's docstring)."""
        fits = []
        if budget.call_cap is not None:
            fits.append(table.c.calls + 1 <= budget.call_cap)
        if budget.token_cap is not None:
            fits.append(table.c.tokens < budget.token_cap)
        taking = table.update().where(_KEY, *fits).values(calls=table.c.calls + 1)
        key = {"ns": namespace, "period": start}
        with self._transaction() as connection:
            if self._insert_missing(connection, key):
                connection.execute(_OLDER, key)
            if connection.execute(taking, key).rowcount == 1:
                return None
            calls, tokens = connection.execute(_SPENT, key).one()
            return int(calls), int(tokens)

    def add_tokens(self, namespace: str, start: int, tokens: int, /) -> None:
        """Add a reserved call's tokens to its period."""
        with self._transaction() as connection:
            connection.execute(_ADD_TOKENS, {"ns": namespace, "period": start, "added": tokens})

    def spent(self, namespace: str, start: int, /) -> tuple[int, int]:
        """The (calls, tokens) of the period from ``start`` (zero when it has no row)."""
        with self._transaction() as connection:
            row = connection.execute(_SPENT, {"ns": namespace, "period": start}).first()
        return (0, 0) if row is None else (int(row.calls), int(row.tokens))

    def record_call(self, memory: str, namespace: str, usage: ModelUsage, /) -> None:
        """Add one finished call to its day's usage row (one upsert; joins a write batch)."""
        row: dict[str, Any] = {"memory": memory, "namespace": namespace, "day": today()}
        row.update({c: int(getattr(usage, c)) for c in _COUNTERS})
        with self._transaction() as outer:
            # On PostgreSQL a failed statement aborts its whole transaction, which may be a
            # chat memory's turn: a savepoint keeps a failed count from losing the turn.
            nested = outer.begin_nested() if outer.dialect.name == "postgresql" else None
            with nested or contextlib.nullcontext():
                add_counts(outer, usage_table, [row], _COUNTERS)

    def held(self, namespace: str, /) -> dict[str, int]:
        """The rows naming ``namespace``: its budget periods and its days of model usage."""
        kinds = {"budget spending rows": table, "model usage rows": usage_table}
        with self.database.transaction() as connection:
            inspector = sa.inspect(connection)
            return {
                kind: count_rows(connection, t, t.c.namespace == namespace)
                if inspector.has_table(t.name)
                else 0
                for kind, t in kinds.items()
            }

    def erase(self, namespace: str, /) -> None:
        """Delete every row naming ``namespace`` (erasing a person: the namespace is theirs)."""
        with self._transaction() as connection:
            for t in (table, usage_table):
                connection.execute(t.delete().where(t.c.namespace == namespace))

    def usage_totals(self, namespace: str | None = None) -> dict[str, dict[str, ModelUsage]]:
        """Per memory (its ``usage_name``): calls and tokens ``"all"`` time and ``"today"``.

        One query. ``namespace``: only that namespace's. Reads only: a database without
        the table (no call recorded yet) has no rows.
        """
        day = today()
        columns = [sa.func.sum(usage_table.c[c]) for c in _COUNTERS]
        columns += [
            sa.func.sum(sa.case((usage_table.c.day == day, usage_table.c[c]), else_=0))
            for c in _COUNTERS
        ]
        query = sa.select(usage_table.c.memory, *columns).group_by(usage_table.c.memory)
        if namespace is not None:
            query = query.where(usage_table.c.namespace == namespace)
        with self.database.transaction() as connection:
            if not sa.inspect(connection).has_table(usage_table.name):
                return {}
            rows = connection.execute(query).all()
        n = len(_COUNTERS)
        return {
            row[0]: {
                "all": ModelUsage(*(int(v or 0) for v in row[1 : n + 1])),
                "today": ModelUsage(*(int(v or 0) for v in row[n + 1 :])),
            }
            for row in rows
        }

    def _insert_missing(self, connection: sa.Connection, key: dict[str, Any]) -> bool:
        """Make the period's row unless it exists; whether it was made."""
        statement = _INSERTS_MISSING.get(connection.dialect.name)
        if statement is not None:
            return connection.execute(statement, key).rowcount == 1
        if connection.execute(_SPENT, key).first() is not None:
            return False
        values = {"namespace": key["ns"], "period_start": key["period"]}
        connection.execute(table.insert().values(**values, calls=0, tokens=0))
        return True

    def _transaction(self) -> Any:
        ensure_tables(self.database.engine, self.database.url, _metadata)  # once per engine
        return self.database.transaction(write=True)

    def __repr__(self) -> str:
        return f"SQLSpending({self.database!r})"
