"""History in a SQL database: a SQLite file by default, or any SQLAlchemy URL.

Every session of a database shares two tables: the append-only log
(``memories_messages``; an edit is a row of it too, see
:mod:`memories.stores.history.edits`) and each memory's derived state
(``memories_state``). The log's autoincrement ``id`` orders it across processes
and threads without coordination; reads use the ``(session_id, id)`` index.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from contextlib import AbstractContextManager
from operator import attrgetter
from pathlib import Path
from typing import Any, ClassVar

import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from memories.errors import BackendError, InvalidInputError
from memories.kernel.checks import non_empty_text, whole_number
from memories.kernel.messages import dump_message, load_message
from memories.kernel.paths import default_file
from memories.kernel.retention import Retention
from memories.stores.history.base import (
    DEFAULT_SESSION_ID,
    Changes,
    ChatHistory,
    Entry,
    SessionCount,
    later,
)
from memories.stores.history.edits import current_ids, shown
from memories.stores.history.records import Edit, Item, NewEdit
from memories.stores.sql import (
    EXTRA_DDL,
    UPSERTING,
    Database,
    Prepared,
    chunks,
    count_rows,
    log_table,
    redacted,
)

__all__ = ["DEFAULT_SQLITE_PATH", "SQLHistory", "SQLiteHistory"]

#: The default SQLite file's name, in :func:`memories.kernel.paths.data_dir`.
DEFAULT_SQLITE_PATH = "memories.db"

#: Parsed rows kept per database, per process (a window re-reads the same rows every turn).
_DECODED_ROWS = 8192


def default_sqlite_url() -> str:
    """The URL of the default SQLite file (in the data directory: :mod:`~memories.kernel.paths`)."""
    return f"sqlite:///{default_file(DEFAULT_SQLITE_PATH)}"


metadata = sa.MetaData()

messages_table = log_table(
    "memories_messages",
    metadata,
    {"session_id": sa.String(255)},
    sa.Column("type", sa.String(32), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Index("ix_memories_messages_session_type", "session_id", "type", "id"),
    index="ix_memories_messages_session_id",
)

#: A message's own id inside its stored JSON (``message_to_dict``'s form), per
#: dialect. An index on it finds the messages an agent's turn names by id without
#: reading the session (a LIKE scan cost 77 ms a turn at 100,000 messages).
_MESSAGE_ID = {
    "sqlite": "json_extract(message, '$.data.id')",
    "postgresql": "((message::json -> 'data') ->> 'id')",
}
_ID_INDEX = "ix_memories_messages_session_message_id"
#: Rows from which a PostgreSQL table is too big to index on opening (the build
#: would lock writers out meanwhile): a warning gives the statement to run instead.
_LARGEST_INDEXED_ON_OPEN = 100_000


def _id_index_ddl(largest: int) -> dict[str, list[str]]:
    """The statements that make the message-id index, per dialect (see ``EXTRA_DDL``).

    Partial: a chain's turns carry no ids, and skipping them halves what the index
    adds to a 2-message commit (7 µs instead of 16 on SQLite). PostgreSQL locks out
    writers before CREATE INDEX sees the index exists, for the whole build: the
    statement looks first, and builds only on a table under ``largest`` rows.
    """
    create = {
        dialect: f"CREATE INDEX IF NOT EXISTS {_ID_INDEX} "
        f"ON memories_messages (session_id, {expression}) WHERE {expression} IS NOT NULL"
        for dialect, expression in _MESSAGE_ID.items()
    }
    by_hand = create["postgresql"].replace("CREATE INDEX", "CREATE INDEX CONCURRENTLY", 1)
    return {
        "sqlite": [create["sqlite"]],
        "postgresql": [
            f"DO $$ BEGIN IF to_regclass('{_ID_INDEX}') IS NULL THEN "
            f"IF (SELECT count(*) FROM (SELECT 1 FROM memories_messages LIMIT {largest}) AS head)"
            f" < {largest} THEN {create['postgresql']}; ELSE RAISE EXCEPTION USING MESSAGE = "
            f"$m$memories_messages holds {largest} rows or more: make the message-id index "
            f"without locking writers out, once, by hand: {by_hand}$m$; "
            "END IF; END IF; END $$"
        ],
    }


metadata.info[EXTRA_DDL] = _id_index_ddl(_LARGEST_INDEXED_ON_OPEN)

state_table = sa.Table(
    "memories_state",
    metadata,
    sa.Column("session_id", sa.String(255), primary_key=True),
    sa.Column("key", sa.String(255), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)


EDIT_KINDS = ("replace", "remove", "remove_through")

_ROW = (messages_table.c.id, messages_table.c.type, messages_table.c.message)
_MINE = messages_table.c.session_id == sa.bindparam("session")
# Literal, not a bound IN list: a prepared statement takes no expanding parameters.
_EDIT_ROW = sa.text(f"memories_messages.type IN ({', '.join(repr(kind) for kind in EDIT_KINDS)})")
_row_id = messages_table.c.id

_NEW_ROWS = sa.select(*_ROW).where(_MINE, _row_id > sa.bindparam("after"))
#: The hot statements of a turn, compiled once per dialect (see memories.stores.sql.Prepared).
_ROWS_AFTER = Prepared(_NEW_ROWS.order_by(_row_id))
_FIRST = Prepared(sa.select(*_ROW).where(_MINE).order_by(_row_id).limit(1))
_TAIL = Prepared(_NEW_ROWS.order_by(_row_id.desc()).limit(sa.bindparam("limit")))
# Two SELECTs, so each uses its own index: (session_id, id) for the new rows,
# (session_id, type, id) for the edits (an OR of the two scans the session).
_NEW_EDITS = sa.select(*_ROW).where(_MINE, _EDIT_ROW, _row_id > sa.bindparam("edits_after"))
_CHANGES = Prepared(sa.union_all(_NEW_ROWS, _NEW_EDITS))
_EDITS_AFTER = Prepared(_NEW_EDITS.order_by(_row_id))
_STATE_KEY = (
    state_table.c.session_id == sa.bindparam("session"),
    state_table.c.key == sa.bindparam("key"),
)
_STATE = Prepared(sa.select(state_table.c.value).where(*_STATE_KEY))
_STATE_AND_CHANGES = Prepared(
    sa.union_all(
        _NEW_ROWS,
        _NEW_EDITS,
        # The state as one more row: no message has a negative id.
        sa.select(
            sa.literal_column("-1").label("id"),
            sa.literal_column("'state'").label("type"),
            state_table.c.value.label("message"),
        ).where(*_STATE_KEY),
    )
)
_LAST_EXCHANGES = Prepared(
    sa.select(*_ROW)
    .where(
        _MINE,
        sa.func.coalesce(
            sa.select(_row_id)
            .where(_MINE, messages_table.c.type == sa.bindparam("human"))
            .order_by(_row_id.desc())
            .offset(sa.bindparam("skip"))
            .limit(1)
            .scalar_subquery(),
            0,
        )
        <= _row_id,
    )
    .order_by(_row_id)
)
_COLUMNS = ("session_id", "type", "message", "created_at")
#: Rows per prepared INSERT (SQLite allows 32,766 parameters; 4 per row).
_ROWS_PER_INSERT = 256


@functools.lru_cache(maxsize=32)
def _insert(rows: int) -> Prepared:
    """One INSERT of ``rows`` rows that returns their ids (parameters ``type_0``, ...)."""
    values: list[dict[str, Any]] = [
        {c: sa.bindparam(f"{c}_{i}") for c in _COLUMNS} for i in range(rows)
    ]
    return Prepared(sa.insert(messages_table).values(values).returning(_row_id))


#: Dialects whose INSERT ... RETURNING the prepared insert uses.
_RETURNING = ("sqlite", "postgresql")
#: Appends to a session take turns until their transaction ends: two PostgreSQL writers
#: could take ids 7 and 8 and commit 8 first, and a reader's cursor pass 7 for good.
_LOCK_SESSION = sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:session, 0))")


def _upsert(module: Any) -> Prepared:
    statement = module.insert(state_table).values(
        session_id=sa.bindparam("session"),
        key=sa.bindparam("key"),
        value=sa.bindparam("value"),
        updated_at=sa.bindparam("updated_at"),
    )
    return Prepared(
        statement.on_conflict_do_update(
            index_elements=[state_table.c.session_id, state_table.c.key],
            set_={"value": statement.excluded.value, "updated_at": statement.excluded.updated_at},
        )
    )


#: One statement that inserts a state row or replaces its value, per dialect that has one.
_UPSERTS = {name: _upsert(module) for name, module in UPSERTING.items()}
# No seq is below 1: "after nothing" is after 0.
_START = 0


class SQLHistory(ChatHistory):
    """A session's log in a SQL database, shared by every process that opens it.

    Args:
        url: a SQLAlchemy URL, e.g. ``"sqlite:///chat.db"`` or
            ``"postgresql+psycopg://user:pw@host/db"``; default: ``memories.db``
            in the data directory (:mod:`memories.kernel.paths`).
        session_id: the conversation this history reads and writes.
        clock: the time rows are stamped with (Unix seconds; a test injects its own).
    """

    lists_sessions: ClassVar[bool] = True
    keeps_times: ClassVar[bool] = True

    def __init__(
        self,
        url: str | None = None,
        *,
        session_id: str = DEFAULT_SESSION_ID,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = default_sqlite_url() if url is None else url
        self.session_id, self.clock = non_empty_text(session_id, "session_id"), clock
        self._db = Database(self.url, metadata)
        # key -> (text, value): the state this process last wrote or read, by its stored text.
        self._states: dict[str, tuple[str, dict[str, Any]]] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redacted(self.url)!r}, session_id={self.session_id!r})"

    def record(self, items: Sequence[Item], /) -> list[int]:
        if not items:
            return []
        now = self.clock()
        rows = [
            {
                "session_id": self.session_id,
                "type": item.kind if isinstance(item, NewEdit) else item.type,
                "message": _dump(item),
                "created_at": now,
            }
            for item in items
        ]
        seqs = self._inserted(rows)
        if len(_written) > _DECODED_ROWS:  # never read back here: forget them
            _written.clear()
        for seq, item, row in zip(seqs, items, rows, strict=True):
            if type(item) in _PLAIN and not isinstance(item, NewEdit):  # as its row reads back
                _written[(self._db.key, seq, str(row["message"]))] = Entry(seq, item.model_copy())
        return seqs

    def _inserted(self, rows: list[dict[str, Any]]) -> list[int]:
        with self._db.transaction(write=True) as connection:
            if connection.dialect.name == "postgresql":  # SQLite's writers take turns already
                connection.execute(_LOCK_SESSION, {"session": self.session_id})
            if connection.dialect.name in _RETURNING:
                # One statement for the rows (a round trip on a server). RETURNING
                # may list them in any order, but their ids are taken in VALUES
                # order, one after the other: sorted, they are the rows' ids.
                seqs = []
                for chunk in chunks(rows, _ROWS_PER_INSERT):
                    values = {f"{c}_{i}": row[c] for i, row in enumerate(chunk) for c in _COLUMNS}
                    found = _insert(len(chunk)).execute(connection, **values).fetchall()
                    seqs.extend(sorted(int(seq) for (seq,) in found))
                return seqs
            if connection.dialect.insert_executemany_returning_sort_by_parameter_order:
                statement = sa.insert(messages_table).returning(
                    messages_table.c.id, sort_by_parameter_order=True
                )
                return [int(row.id) for row in connection.execute(statement, rows)]
            # No ordered RETURNING on this dialect: one INSERT per row, same transaction.
            seqs = []
            for row in rows:
                key = connection.execute(
                    sa.insert(messages_table).values(**row)
                ).inserted_primary_key
                assert key is not None  # an INSERT into a table with a primary key has one
                seqs.append(int(key[0]))
            return seqs

    def _rows(self, statement: Prepared, **values: Any) -> list[Entry | Edit]:
        """The records a prepared statement of this session reads, in the order it gives."""
        with self._db.transaction() as connection:
            rows = statement.execute(connection, session=self.session_id, **values).fetchall()
        return [_decoded(self._db.key, *row) for row in rows]

    def records(self, *, after: int | None = None) -> list[Entry | Edit]:
        return self._rows(_ROWS_AFTER, after=_START if after is None else after)

    def entries(self, *, after: int | None = None, last: int | None = None) -> list[Entry]:
        if last is not None:
            whole_number(last, "last", error=InvalidInputError)
        start = _START if after is None else after
        if last is None:
            return shown(self._rows(_ROWS_AFTER, after=start))
        chunk = last
        while True:
            # Edits hide messages: read a longer tail until it shows enough.
            tail = self._rows(_TAIL, after=start, limit=chunk)[::-1]
            visible = shown(tail)
            if len(visible) >= last or len(tail) < chunk:
                return visible[max(0, len(visible) - last) :]
            chunk *= 4

    def edits(self, *, after: int | None = None) -> list[Edit]:
        records = self._rows(_EDITS_AFTER, edits_after=_START if after is None else after)
        return [r for r in records if isinstance(r, Edit)]

    def changes(self, *, after: int | None, edits_after: int | None) -> Changes:
        """One read: the rows after ``after`` and the edit rows after ``edits_after``."""
        since = _START if edits_after is None else edits_after
        found = self._rows(_CHANGES, after=_START if after is None else after, edits_after=since)
        return _changes(found, after, since)

    def state_and_changes(
        self, key: str, /, *, after: int | None, edits_after: int | None
    ) -> tuple[dict[str, Any] | None, Changes]:
        """One read: the state, the rows after ``after`` and the edit rows after ``edits_after``."""
        since = _START if edits_after is None else edits_after
        with self._db.transaction() as connection:
            rows = _STATE_AND_CHANGES.execute(
                connection,
                session=self.session_id,
                key=key,
                after=_START if after is None else after,
                edits_after=since,
            ).fetchall()
        state = next((self._state_from(key, text) for seq, _, text in rows if seq < 0), None)
        found = [_decoded(self._db.key, *row) for row in rows if row[0] >= 0]
        return state, _changes(found, after, since)

    def seqs_of(self, ids: Iterable[str], /) -> dict[str, int]:
        """Reads the messages with one of ``ids`` (through the id index) and every edit row."""
        ids = list(ids)
        if not ids:
            return {}
        with self._db.transaction() as connection:
            query = _with_ids(connection.dialect.name, self.session_id, ids)
            rows = connection.execute(query).all()
        return current_ids(_in_order([_decoded(self._db.key, *row) for row in rows]), ids)

    def start_of_last_exchanges(self, k: int, /) -> int | None:
        humans = [e.seq for e in self.last_exchanges(k) if e.message.type == "human"]
        return humans[0] if len(humans) >= k else None

    def last_exchanges(self, k: int, /) -> list[Entry]:
        """One query: the rows from the ``k``-th last human message on."""
        whole_number(k, "k", least=1, error=InvalidInputError)
        records = self._rows(_LAST_EXCHANGES, human="human", skip=k - 1)
        if any(isinstance(r, Edit) for r in records):
            # An edit since then may have removed or changed an exchange: count what is shown.
            start = super().start_of_last_exchanges(k)
            return self.entries(after=None if start is None else start - 1)
        return [r for r in records if isinstance(r, Entry)]

    def first_entry(self) -> Entry | None:
        if self.edits():
            return super().first_entry()
        first = shown(self._rows(_FIRST))  # no edit: the first row is a message
        return first[0] if first else None

    def sessions(
        self, *, contains: str = "", limit: int = 50, offset: int = 0
    ) -> tuple[list[SessionCount], int]:
        t = messages_table
        mine = t.c.session_id.contains(contains, autoescape=True)
        is_edit = t.c.type.in_(EDIT_KINDS)
        grouped = (
            sa.select(
                t.c.session_id,
                sa.func.count().label("records"),
                sa.func.sum(sa.case((is_edit, 1), else_=0)).label("edits"),
                sa.func.min(t.c.created_at).label("first_at"),
                sa.func.max(t.c.created_at).label("last_at"),
                sa.func.max(t.c.id).label("last_id"),
            )
            .where(mine)
            .group_by(t.c.session_id)
        )
        page = grouped.order_by(sa.desc("last_id")).limit(limit).offset(offset)
        total = sa.select(sa.func.count(sa.distinct(t.c.session_id))).where(mine)
        with self._db.transaction() as connection:
            rows = connection.execute(page).all()
            count = int(connection.execute(total).scalar_one())
        found = [
            SessionCount(session, int(n) - int(edits or 0), int(edits or 0), float(at), float(last))
            for session, n, edits, at, last, _ in rows
        ]
        return found, count

    def count(self) -> int:
        """How many messages the session shows now (edits applied)."""
        return len(self.entries()) if self.edits() else self._count(messages_table)

    def _count(self, table: sa.Table) -> int:
        """How many rows of ``table`` the session has."""
        with self._db.transaction() as connection:
            return count_rows(connection, table, table.c.session_id == self.session_id)

    def clear(self) -> None:
        with self._db.transaction(write=True) as connection:
            for table in (messages_table, state_table):
                connection.execute(sa.delete(table).where(table.c.session_id == self.session_id))

    def held(self) -> dict[str, int]:
        """The session's rows: its log (messages and edit records) and its memories' state."""
        return {
            "chat log rows": self._count(messages_table),
            "derived state rows": self._count(state_table),
        }

    def expired_through(self, retention: Retention, /, *, now: float) -> int | None:
        t = messages_table
        mine = t.c.session_id == self.session_id
        old = nth = None
        with self._db.transaction() as connection:
            cutoff = retention.cutoff(now)
            if cutoff is not None:
                first = sa.select(t.c.created_at).where(mine).order_by(t.c.id).limit(1)
                oldest = connection.execute(first).scalar()
                if oldest is not None and oldest < cutoff:
                    # Something expired. Newest first on the (session_id, id) index: the
                    # scan stops at the first expired row, so it reads the kept rows only.
                    newest = sa.select(t.c.id).where(mine, t.c.created_at < cutoff)
                    old = connection.execute(newest.order_by(t.c.id.desc()).limit(1)).scalar()
            if retention.keep_messages is not None:
                nth = connection.execute(
                    sa.select(t.c.id)
                    .where(mine, t.c.type.not_in(EDIT_KINDS))
                    .order_by(t.c.id.desc())
                    .offset(retention.keep_messages)
                    .limit(1)
                ).scalar()
        return later(None if old is None else int(old), None if nth is None else int(nth))

    def purge(self, through: int, /, *, batch: int = 500, dry_run: bool = False) -> int:
        return _purge(self._db, self.session_id, through, batch=batch, dry_run=dry_run)

    def sweep_store(
        self, retention: Retention, /, *, batch: int = 500, dry_run: bool = False
    ) -> dict[str, int]:
        """Purge what ``retention`` expires now in every session of this database."""
        removed = {}
        for session, through in _horizons(self._db, retention, now=self.clock()).items():
            count = _purge(self._db, session, through, batch=batch, dry_run=dry_run)
            if count:
                removed[session] = count
        return removed

    def load_state(self, key: str, /) -> dict[str, Any] | None:
        with self._db.transaction() as connection:
            row = _STATE.execute(connection, session=self.session_id, key=key).fetchone()
        return self._state_from(key, row[0]) if row is not None else None

    def log_key(self) -> Hashable:
        return ("sql", self._db.key, self.session_id)

    def state_keys(self, prefix: str = "", /) -> list[str]:
        t = state_table
        query = sa.select(t.c.key).where(t.c.session_id == self.session_id)
        if prefix:
            query = query.where(t.c.key.startswith(prefix, autoescape=True))
        with self._db.transaction() as connection:
            return sorted(str(key) for (key,) in connection.execute(query))

    def _state_from(self, key: str, text: str) -> dict[str, Any]:
        """The state stored as ``text``, parsed once: the same dict while the text is the same.

        States are immutable (:meth:`ChatHistory.save_state`), so a memory knows its
        own state by identity and decodes nothing.
        """
        known = self._states.get(key)
        if known is not None and known[0] == text:
            return known[1]
        value: dict[str, Any] = json.loads(text)
        self._states[key] = (text, value)
        return value

    def save_state(self, key: str, value: dict[str, Any], /) -> None:
        encoded, now, session = json.dumps(value, ensure_ascii=False), time.time(), self.session_id
        with self._db.transaction(write=True) as connection:
            upsert = _UPSERTS.get(connection.dialect.name)
            if upsert is not None:
                upsert.execute(connection, session=session, key=key, value=encoded, updated_at=now)
            else:
                # No native upsert on this dialect: sa.delete then sa.insert, one transaction.
                t = state_table
                connection.execute(sa.delete(t).where(t.c.session_id == session, t.c.key == key))
                row = {"session_id": session, "key": key, "value": encoded, "updated_at": now}
                connection.execute(sa.insert(t).values(**row))
        # A rollback leaves other text stored, which is then parsed afresh.
        self._states[key] = (encoded, value)

    @property
    def database(self) -> Database:
        """The database the log is kept in."""
        return self._db

    def batch(self, *, write: bool) -> AbstractContextManager[None]:
        """One transaction for this thread's reads (and, with ``write``, writes) of the block."""
        return self._db.batch(write=write)

    def to_config(self) -> dict[str, Any]:
        return {"type": "sql", "url": self.url, "session_id": self.session_id}


def _dump(item: Item) -> str:
    if isinstance(item, NewEdit):
        return json.dumps(item.body(), ensure_ascii=False)
    return dump_message(item)


#: Rows this process wrote, by ``(Database.key, seq, text)``, until first read (see _decoded).
_written: dict[tuple[str, int, str], Entry] = {}
_PLAIN = (HumanMessage, AIMessage, SystemMessage, ToolMessage)


@functools.lru_cache(maxsize=_DECODED_ROWS)
def _decoded(database: str, seq: int, kind: str, text: str) -> Entry | Edit:
    """A row of the ``database`` (its key) as a record, parsed once per process (rows never change).

    Memories treat messages as immutable, so the parsed objects are shared, but only
    by the readers of one database: another's rows (a file per user) reuse its ids, and
    a caller changing a message in place must not change another user's. A row this
    process wrote is a copy of its message (parsing it again cost a turn 35 µs).
    """
    written = _written.pop((database, seq, text), None)
    if written is not None:
        return written
    if kind not in EDIT_KINDS:
        return Entry(int(seq), load_message(text))
    try:
        return Edit.from_body(json.loads(text), int(seq))
    except (ValueError, KeyError, TypeError) as exc:
        raise BackendError(f"A stored edit record is not valid: {text!r:.120}") from exc


def _horizons(db: Database, retention: Retention, *, now: float) -> dict[str, int]:
    """Each session's last expired ``seq`` under ``retention`` (sessions with none left out)."""
    t = messages_table
    found: dict[str, int] = {}
    with db.transaction() as connection:
        cutoff = retention.cutoff(now)
        if cutoff is not None:
            old = sa.select(t.c.session_id, sa.func.max(t.c.id)).where(t.c.created_at < cutoff)
            found.update((s, i) for s, i in connection.execute(old.group_by(t.c.session_id)))
        keep = retention.keep_messages
        if keep is not None:
            rank = (
                sa.func.row_number()
                .over(partition_by=t.c.session_id, order_by=t.c.id.desc())
                .label("rank")
            )
            ranked = (
                sa.select(t.c.session_id, t.c.id, rank)
                .where(t.c.type.not_in(EDIT_KINDS))
                .subquery()
            )
            nth = sa.select(ranked.c.session_id, ranked.c.id).where(ranked.c.rank == keep + 1)
            for session, seq in connection.execute(nth):
                found[session] = max(found.get(session, seq), seq)
    return {session: int(seq) for session, seq in found.items()}


def _purge(db: Database, session: str, through: int, *, batch: int, dry_run: bool) -> int:
    """Delete a session's records up to ``through`` and the edits targeting them, in batches.

    Each batch is its own transaction, its rows chosen by condition, so a second
    run after a crash finishes the rest.
    """
    whole_number(batch, "batch", least=1, error=InvalidInputError)
    t = messages_table
    mine = t.c.session_id == session
    with db.transaction() as connection:
        # Edit records are few; their target is in their JSON, read here on any dialect.
        later_edits = connection.execute(
            sa.select(t.c.id, t.c.message).where(mine, t.c.type.in_(EDIT_KINDS), t.c.id > through)
        ).all()
        head = count_rows(connection, t, mine, t.c.id <= through)
    orphans = [
        int(row.id) for row in later_edits if int(json.loads(row.message)["target"]) <= through
    ]
    if dry_run:
        return head + len(orphans)
    removed = 0
    while True:
        with db.transaction(write=True) as connection:
            chosen = sa.select(t.c.id).where(mine, t.c.id <= through).order_by(t.c.id).limit(batch)
            gone = connection.execute(sa.delete(t).where(t.c.id.in_(chosen.scalar_subquery())))
        removed += gone.rowcount
        if gone.rowcount < batch:
            break
    for chunk in chunks(orphans, batch):
        with db.transaction(write=True) as connection:
            gone = connection.execute(sa.delete(t).where(t.c.id.in_(chunk)))
        removed += gone.rowcount
    return removed


def _with_ids(dialect: str, session_id: str, ids: list[str]) -> sa.CompoundSelect:
    """The rows of a session holding a message with one of ``ids``, and its edit rows."""
    mine = messages_table.c.session_id == session_id
    expression = _MESSAGE_ID.get(dialect)
    holds: sa.ColumnElement[bool]
    if expression is not None:
        holds = sa.literal_column(expression).in_(ids)
    else:  # no index on the id here: a match anywhere in the text, sorted out by the caller
        holds = sa.or_(*(messages_table.c.message.contains(i, autoescape=True) for i in ids))
    # Two SELECTs, each on its own index (an OR of the two scans the session).
    messages, edits = sa.select(*_ROW).where(mine, holds), sa.select(*_ROW).where(mine, _EDIT_ROW)
    return sa.union_all(messages, edits)


def _in_order(found: Sequence[Entry | Edit]) -> list[Entry | Edit]:
    """The records two SELECTs found, each once (a row may be in both), in log order."""
    return sorted({r.seq: r for r in found}.values(), key=attrgetter("seq"))


def _changes(found: Sequence[Entry | Edit], after: int | None, since: int) -> Changes:
    """The :class:`Changes` in the records two SELECTs found."""
    records = _in_order(found)
    new = [r for r in records if after is None or r.seq > after]
    return Changes(shown(new), [r for r in records if isinstance(r, Edit) and r.seq > since])


class SQLiteHistory(SQLHistory):
    """:class:`SQLHistory` on a SQLite file: the embedded default for anything persistent.

    Args:
        path: the database file (made with its folder on the first write); default:
            ``memories.db`` in the data directory. Otherwise as :class:`SQLHistory`.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        session_id: str = DEFAULT_SESSION_ID,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(default_file(DEFAULT_SQLITE_PATH) if path is None else path)
        super().__init__(f"sqlite:///{self.path.resolve()}", session_id=session_id, clock=clock)

    def to_config(self) -> dict[str, Any]:
        return {"type": "sqlite", "path": str(self.path), "session_id": self.session_id}
