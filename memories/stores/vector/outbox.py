"""The outbox: turns written locally before they go to the vector store.

A vector memory writes every document here first, then into Chroma, then
removes it from here. If Chroma fails in between (a server down, a full disk),
the document stays and is written by the next call that reaches Chroma, or by
an explicit ``flush()``; nothing that ``save_context`` accepted is lost.

:class:`SQLiteOutbox` keeps the rows in a SQLite file (WAL mode, through
:func:`memories.stores.sql.get_engine`), shared by every process that opens
it; :class:`MemoryOutbox` keeps them in the process, for the in-memory store.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from memories.errors import BackendUnavailableError
from memories.kernel.paths import default_file
from memories.stores.sql import check_sqlite_file, ensure_tables, get_engine, log_table

__all__ = [
    "OUTBOX_FILE",
    "DeadLetter",
    "MemoryOutbox",
    "Outbox",
    "OutboxRow",
    "SQLiteOutbox",
    "outbox_for",
]

#: The outbox file's name inside a persistent store's folder (or the working directory).
OUTBOX_FILE = "memories-outbox.db"


@dataclass(frozen=True)
class OutboxRow:
    """A document waiting to be written to the vector store."""

    doc_id: str
    """The id it will have in the store (chosen before it is queued, so a retry is idempotent)."""
    text: str
    """Its text."""
    metadata: dict[str, Any]
    """Its metadata, without the namespace (the store stamps that)."""
    needs_turn: bool
    """Whether the store should give it the next turn index of its session when writing it."""
    replace: bool = False
    """Whether it may replace a stored document with the same id (caller-chosen ids)."""
    queued_as: str | None = field(default=None, compare=False, repr=False)
    """The text the outbox stored it as, when read back from one (identifies this copy)."""


_metadata = sa.MetaData()


def _queue_table(name: str, *columns: sa.Column[Any]) -> sa.Table:
    """A log of documents per store target and namespace (the outbox and its dead letters)."""
    keys = [
        sa.Column("target", sa.String(1024), nullable=False),
        sa.Column("namespace", sa.Text, nullable=False),
    ]
    document = [
        sa.Column("doc_id", sa.String(64), nullable=False),
        sa.Column("row", sa.Text, nullable=False),
    ]
    return log_table(name, _metadata, keys, *document, *columns, index=f"ix_{name}_target")


_outbox = _queue_table("memories_vector_outbox")
_dead = _queue_table("memories_vector_dead_letters", sa.Column("error", sa.Text, nullable=False))


@dataclass(frozen=True)
class DeadLetter:
    """A document the store or the embedder refused while others went through: set aside."""

    row: OutboxRow
    """The document, as it waited in the outbox."""
    error: str
    """Why it could not be written (``"ExceptionType: message"``)."""
    created_at: float
    """When it was set aside (seconds since the epoch)."""


def _dump(row: OutboxRow) -> str:
    return json.dumps(
        {
            "text": row.text,
            "metadata": row.metadata,
            "needs_turn": row.needs_turn,
            "replace": row.replace,
        },
        ensure_ascii=False,
    )


def _load(doc_id: str, data: str) -> OutboxRow:
    value = json.loads(data)
    return OutboxRow(
        doc_id,
        value["text"],
        value["metadata"],
        bool(value["needs_turn"]),
        bool(value.get("replace", False)),
        queued_as=data,
    )


_COPY = sa.delete(_outbox).where(
    _outbox.c.target == sa.bindparam("t"),
    _outbox.c.namespace == sa.bindparam("n"),
    _outbox.c.doc_id == sa.bindparam("d"),
    _outbox.c.row == sa.bindparam("r"),
)


def _delete_copies(
    connection: sa.Connection, target: str, namespace: str, rows: Sequence[OutboxRow]
) -> None:
    """Delete exactly these copies from the outbox: a row queued again under the same id stays."""
    copies = [
        {"t": target, "n": namespace, "d": r.doc_id, "r": r.queued_as or _dump(r)} for r in rows
    ]
    connection.execute(_COPY, copies)


def _letters(target: str, namespace: str) -> sa.Select[Any]:
    """A namespace's dead letters, oldest first: key, doc_id, row, error, created_at."""
    return (
        sa.select(_dead.c.id, _dead.c.doc_id, _dead.c.row, _dead.c.error, _dead.c.created_at)
        .where(_dead.c.target == target, _dead.c.namespace == namespace)
        .order_by(_dead.c.id)
    )


def _queued_ids(
    connection: sa.Connection, target: str, namespace: str, ids: Sequence[str]
) -> set[str]:
    """Which of ``ids`` have a copy waiting in the outbox."""
    query = sa.select(_outbox.c.doc_id).where(
        _outbox.c.target == target, _outbox.c.namespace == namespace, _outbox.c.doc_id.in_(ids)
    )
    return {doc_id for (doc_id,) in connection.execute(query)}


class SQLiteOutbox:
    """Outbox rows in a SQLite file, keyed by store target and namespace."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.where = path
        """Where the rows wait, for messages."""
        self._url = f"sqlite:///{path}"
        self._engine = get_engine(self._url)
        ensure_tables(self._engine, self._url, _metadata)

    def put(self, target: str, namespace: str, rows: Sequence[OutboxRow]) -> None:
        """Queue rows, durably, in one transaction."""
        if not rows:
            return
        now = time.time()
        values = [
            {
                "target": target,
                "namespace": namespace,
                "doc_id": r.doc_id,
                "row": _dump(r),
                "created_at": now,
            }
            for r in rows
        ]
        with self._errors("queue a turn"), self._engine.begin() as connection:
            connection.execute(sa.insert(_outbox), values)

    def pending(self, target: str, namespace: str, *, limit: int | None = None) -> list[OutboxRow]:
        """The oldest queued rows of a namespace, in the order they were queued."""
        query = (
            sa.select(_outbox.c.doc_id, _outbox.c.row)
            .where(_outbox.c.target == target, _outbox.c.namespace == namespace)
            .order_by(_outbox.c.id)
        )
        if limit is not None:
            query = query.limit(limit)
        with self._errors("read queued turns"), self._engine.connect() as connection:
            return [_load(doc_id, data) for doc_id, data in connection.execute(query)]

    def remove(self, target: str, namespace: str, rows: Sequence[OutboxRow]) -> None:
        """Forget these rows, now in the store: exactly these copies.

        A row queued again under the same id meanwhile (new metadata, a new
        text) is a different copy and stays queued, to be written next.
        """
        if not rows:
            return
        with self._errors("forget written turns"), self._engine.begin() as connection:
            _delete_copies(connection, target, namespace, rows)

    def clear(self, target: str, namespace: str) -> None:
        """Forget every queued row of a namespace, and every row set aside."""
        with self._errors("clear queued turns"), self._engine.begin() as connection:
            for table in (_outbox, _dead):
                connection.execute(
                    sa.delete(table).where(table.c.target == target, table.c.namespace == namespace)
                )

    def bury(self, target: str, namespace: str, failed: Sequence[tuple[OutboxRow, str]]) -> None:
        """Move rows out of the queue into the dead letters, with their errors, atomically.

        Exactly these copies leave the queue, as in :meth:`remove`: the same id
        queued again meanwhile (an edit made while the store refused the
        first) stays queued.
        """
        now = time.time()
        values = [
            {"target": target, "namespace": namespace, "doc_id": row.doc_id, "row": _dump(row),
             "error": error, "created_at": now}
            for row, error in failed
        ]  # fmt: skip
        with self._errors("set aside a document"), self._engine.begin() as connection:
            connection.execute(sa.insert(_dead), values)
            _delete_copies(connection, target, namespace, [row for row, _ in failed])

    def dead_letters(self, target: str, namespace: str) -> list[DeadLetter]:
        """The rows of a namespace set aside, oldest first."""
        query = _letters(target, namespace)
        with self._errors("read set-aside documents"), self._engine.connect() as connection:
            return [
                DeadLetter(_load(i, row), e, t) for _, i, row, e, t in connection.execute(query)
            ]

    def revive(self, target: str, namespace: str, ids: Sequence[str] | None) -> int:
        """Queue dead letters again (all, or those with ``ids``); return how many left the letters.

        A letter whose id was queued again since is dropped instead: that newer
        copy is written, and the old one must not overwrite it after.
        """
        query = _letters(target, namespace)
        now = time.time()
        with self._errors("queue set-aside documents"), self._engine.begin() as connection:
            # Read, queue and delete in one transaction, by the letters' own keys:
            # a document set aside meanwhile under the same id stays set aside.
            letters = [
                (key, doc_id, row)
                for key, doc_id, row, _, _ in connection.execute(query)
                if ids is None or doc_id in ids
            ]
            if not letters:
                return 0
            queued = _queued_ids(connection, target, namespace, [d for _, d, _ in letters])
            # A copy queued since (an edit) is newer: it stands for the letter.
            values = [
                {"target": target, "namespace": namespace, "doc_id": doc_id, "row": row,
                 "created_at": now}
                for _, doc_id, row in letters
                if doc_id not in queued
            ]  # fmt: skip
            if values:
                connection.execute(sa.insert(_outbox), values)
            connection.execute(sa.delete(_dead).where(_dead.c.id.in_([k for k, _, _ in letters])))
        return len(letters)

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        check_sqlite_file(self._url, f"the vector memory's outbox to {action}")
        try:
            yield
        except SQLAlchemyError as exc:
            raise BackendUnavailableError(
                f"Cannot {action} in the vector memory's outbox {self.path!r}: {exc}"
            ) from exc


class MemoryOutbox:
    """Outbox rows in this process, for a store that is itself in memory."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], dict[str, OutboxRow]] = {}
        self._dead: dict[tuple[str, str], dict[str, DeadLetter]] = {}
        self._lock = threading.Lock()
        self.where = "in this process"
        """Where the rows wait, for messages."""

    def put(self, target: str, namespace: str, rows: Sequence[OutboxRow]) -> None:
        """Queue rows."""
        with self._lock:
            queue = self._rows.setdefault((target, namespace), {})
            for row in rows:
                queue[row.doc_id] = row

    def pending(self, target: str, namespace: str, *, limit: int | None = None) -> list[OutboxRow]:
        """The oldest queued rows of a namespace, in the order they were queued."""
        with self._lock:
            rows = list(self._rows.get((target, namespace), {}).values())
        return rows if limit is None else rows[:limit]

    def remove(self, target: str, namespace: str, rows: Sequence[OutboxRow]) -> None:
        """Forget these rows: exactly these copies (one queued again meanwhile stays)."""
        with self._lock:
            queue = self._rows.get((target, namespace), {})
            for row in rows:
                if queue.get(row.doc_id) == row:
                    del queue[row.doc_id]

    def clear(self, target: str, namespace: str) -> None:
        """Forget every queued row of a namespace, and every row set aside."""
        with self._lock:
            self._rows.pop((target, namespace), None)
            self._dead.pop((target, namespace), None)

    def bury(self, target: str, namespace: str, failed: Sequence[tuple[OutboxRow, str]]) -> None:
        """Move rows out of the queue into the dead letters, with their errors."""
        now = time.time()
        with self._lock:
            queue = self._rows.get((target, namespace), {})
            dead = self._dead.setdefault((target, namespace), {})
            for row, error in failed:
                if queue.get(row.doc_id) == row:  # this copy, not one queued again since
                    del queue[row.doc_id]
                dead[row.doc_id] = DeadLetter(row, error, now)

    def dead_letters(self, target: str, namespace: str) -> list[DeadLetter]:
        """The rows of a namespace set aside, oldest first."""
        with self._lock:
            return list(self._dead.get((target, namespace), {}).values())

    def revive(self, target: str, namespace: str, ids: Sequence[str] | None) -> int:
        """Queue dead letters again (all, or those with ``ids``); return how many left the letters.

        A letter whose id was queued again since is dropped: the newer copy stands for it.
        """
        with self._lock:
            dead = self._dead.get((target, namespace), {})
            chosen = [i for i in dead if ids is None or i in ids]
            queue = self._rows.setdefault((target, namespace), {})
            for doc_id in chosen:
                letter = dead.pop(doc_id)
                # A copy queued since (an edit) is newer: it is what the store must get.
                queue.setdefault(doc_id, letter.row)
        return len(chosen)


Outbox = SQLiteOutbox | MemoryOutbox

_MEMORY_OUTBOX = MemoryOutbox()
_outboxes: dict[str, SQLiteOutbox] = {}
_outboxes_lock = threading.Lock()


def outbox_for(mode: str, path: str, outbox: str | None) -> Outbox:
    """The process's outbox for a store: ``outbox`` if given, else beside the store.

    One object per file, shared by every memory of the process; the in-memory
    store's outbox is in memory too.
    """
    if outbox is None and mode == "memory":
        return _MEMORY_OUTBOX
    if outbox is None and mode == "persistent":
        outbox = os.path.join(path, OUTBOX_FILE)
    key = os.path.abspath(outbox or default_file(OUTBOX_FILE))
    os.makedirs(os.path.dirname(key), exist_ok=True)
    with _outboxes_lock:
        found = _outboxes.get(key)
        if found is None:
            found = _outboxes[key] = SQLiteOutbox(key)
        return found
