"""The outbox: documents kept in SQL until the vector store has them.

A document Chroma could not take (a server down, a full disk) stays, and is written
by the next call that reaches Chroma or by ``flush()``. The rows are in a SQLite file
shared by every process that opens it, or any SQL database given by URL.
"""

from __future__ import annotations

import atexit
import glob
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import sqlalchemy as sa

from memories.errors import BackendError, BackendUnavailableError
from memories.kernel.paths import default_file
from memories.stores.sql import (
    Database,
    check_sqlite_file,
    count_rows,
    log_table,
    redacted,
    sqlite_file,
)
from memories.stores.vector import recall_tables
from memories.stores.vector.recall_index import (
    SESSION_KEY,
    TURN_KEY,
    IndexedDocument,
    RecallIndex,
)

__all__ = [
    "OUTBOX_FILE",
    "DeadLetter",
    "Outbox",
    "OutboxRow",
    "SQLOutbox",
    "number_queued",
    "numbered",
    "outbox_for",
    "unnumbered",
]

logger = logging.getLogger(__name__)

#: The outbox file's name inside a persistent store's folder (or the working directory).
OUTBOX_FILE = "memories-outbox.db"


@dataclass(frozen=True)
class OutboxRow:
    """A document waiting to be written to the vector store."""

    doc_id: str
    """The id it will have in the store (chosen before it is queued, so a retry is idempotent)."""
    text: str
    metadata: dict[str, Any]
    """Its metadata, without the namespace (the store stamps that)."""
    needs_turn: bool
    """Whether the store should give it the next turn index of its session when writing it."""
    replace: bool = False
    """Whether it may replace a stored document with the same id (caller-chosen ids)."""
    queued_as: str | None = field(default=None, compare=False, repr=False)
    """The text the outbox stored it as, when read back from one (identifies this copy)."""


# One database, one set of tables: the queue and the recall index of what it holds.
_metadata = recall_tables.metadata


def _queue_table(name: str, *columns: sa.Column[Any]) -> sa.Table:
    """A log of documents per store target and namespace (the outbox and its dead letters)."""
    keys = {"target": sa.String(1024), "namespace": sa.Text}
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


#: What the outbox keeps of a row, as JSON, in this order (an older version's has no replace).
_KEPT = ("text", "metadata", "needs_turn", "replace")


def _dump(row: OutboxRow) -> str:
    return json.dumps({name: getattr(row, name) for name in _KEPT}, ensure_ascii=False)


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


def _in_order(table: sa.Table, target: str, namespace: str, *columns: Any) -> sa.Select[Any]:
    """``columns`` of a namespace's rows in ``table`` (the queue or the letters), oldest first."""
    query = sa.select(*columns).where(table.c.target == target, table.c.namespace == namespace)
    return query.order_by(table.c.id)


#: A dead letter's columns: key, doc_id, row, error, created_at.
_LETTER = (_dead.c.id, _dead.c.doc_id, _dead.c.row, _dead.c.error, _dead.c.created_at)


def _append(
    connection: sa.Connection,
    table: sa.Table,
    target: str,
    namespace: str,
    rows: list[dict[str, Any]],
) -> None:
    """Append a namespace's rows (``doc_id``, ``row``...) to the queue or the letters, in order."""
    stamp = {"target": target, "namespace": namespace, "created_at": time.time()}
    connection.execute(sa.insert(table), [stamp | row for row in rows])


def _queued_ids(
    connection: sa.Connection, target: str, namespace: str, ids: Sequence[str]
) -> set[str]:
    """Which of ``ids`` have a copy waiting in the outbox."""
    query = _in_order(_outbox, target, namespace, _outbox.c.doc_id)
    return set(connection.execute(query.where(_outbox.c.doc_id.in_(ids))).scalars())


class SQLOutbox:
    """Outbox rows, and the recall index of the documents they hold, in one SQL database.

    Every write that queues, sets aside or brings back a document changes the recall
    index in the same transaction, so the index and the queue never disagree.

    Args:
        url: a SQLAlchemy URL (a SQLite file by default; PostgreSQL for hosts
            that share one Chroma server).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        file = sqlite_file(url)
        self.where = redacted(url) if file is None else str(file)
        """Where the rows wait, for messages: the file, or the URL without its password."""
        self.database = Database(url, _metadata)
        """The database the rows and the recall index are in (expiry times may share it)."""
        self.recall = RecallIndex(self.database, queued=number_queued)
        """The recall index of the store's documents, in the same database."""
        self._adopted: set[tuple[str, str]] = set()
        self._adopting = threading.Lock()

    def adopt(self, former: str, target: str) -> None:
        """File the rows kept under a store's former target under its target now.

        A persistent store was named by its folder's path before it kept an id in
        the folder (:attr:`ChromaStore.target`): its queued rows, dead letters and
        recall index move in one transaction, the first time a process uses it.
        """
        with self._adopting:
            if (former, target) in self._adopted:
                return
            with self._transaction("file the store's rows under its id", write=True) as connection:
                moved = sum(
                    connection.execute(
                        sa.update(table).where(table.c.target == former).values(target=target)
                    ).rowcount
                    for table in (_outbox, _dead)
                )
                moved += self.recall.adopt(connection, former, target)
            if moved:
                logger.info("Filed %d rows of %s under %s (once).", moved, former, target)
            self._adopted.add((former, target))

    def put(self, target: str, namespace: str, rows: Sequence[OutboxRow]) -> list[OutboxRow]:
        """Queue rows and index them, durably, in one transaction; return them as queued.

        A row that wants a turn number gets its session's next, under the write lock.
        """
        if not rows:
            return []
        with self._transaction("queue a turn", write=True) as connection:
            rows = numbered(connection, self.recall, target, namespace, rows)
            queued = [{"doc_id": r.doc_id, "row": _dump(r)} for r in rows]
            _append(connection, _outbox, target, namespace, queued)
            self.recall.add(connection, target, namespace, [_indexed(r) for r in rows])
        return list(rows)

    def pending(
        self, target: str, namespace: str, *, limit: int | None = None, ids: Sequence[str] = ()
    ) -> list[OutboxRow]:
        """The oldest queued rows of a namespace (with one of ``ids``, if given), in queue order."""
        query = _in_order(_outbox, target, namespace, _outbox.c.doc_id, _outbox.c.row)
        if ids:
            query = query.where(_outbox.c.doc_id.in_(list(ids)))
        with self._transaction("read queued turns") as connection:
            return [_load(doc_id, data) for doc_id, data in connection.execute(query.limit(limit))]

    def counts(self, target: str, namespace: str) -> tuple[int, int]:
        """How many rows of a namespace are queued, and how many set aside (none parsed)."""
        with self._transaction("count queued turns") as connection:
            queued, dead = (
                count_rows(connection, t, t.c.target == target, t.c.namespace == namespace)
                for t in (_outbox, _dead)
            )
            return queued, dead

    def queued(self, target: str, namespace: str, ids: Sequence[str]) -> list[OutboxRow]:
        """The queued copies of documents with these ids (the newest last)."""
        return self.pending(target, namespace, ids=ids) if ids else []

    def remove(self, target: str, namespace: str, rows: Sequence[OutboxRow]) -> None:
        """Forget these rows, now in the store: exactly these copies (a newer one stays)."""
        if not rows:
            return
        with self._transaction("forget written turns", write=True) as connection:
            _delete_copies(connection, target, namespace, rows)

    def clear(self, target: str, namespace: str) -> None:
        """Forget every queued row of a namespace, every row set aside, and its index."""
        with self._transaction("clear queued turns", write=True) as connection:
            for table in (_outbox, _dead):
                connection.execute(
                    sa.delete(table).where(table.c.target == target, table.c.namespace == namespace)
                )
            self.recall.clear(connection, target, namespace)

    def held(self, target: str, namespace: str, *, session: str | None = None) -> dict[str, int]:
        """A namespace's (or one session's) rows: queued, set aside, and in the recall index."""
        with self._transaction("read queued turns") as connection:
            counts = {
                kind: len(self._rows_of(table, target, namespace, session, connection))
                for kind, table in (("outbox rows", _outbox), ("dead letters", _dead))
            }
        return counts | {"recall index rows": self.recall.held(target, namespace, session=session)}

    def erase_session(self, target: str, namespace: str, session: str) -> list[str]:
        """Forget a session's queued rows, rows set aside and index entries; return their ids."""
        with self._transaction("erase a session", write=True) as connection:
            gone: list[str] = []
            for table in (_outbox, _dead):
                rows = self._rows_of(table, target, namespace, session, connection)
                connection.execute(sa.delete(table).where(table.c.id.in_([k for k, _ in rows])))
                gone += [doc_id for _, doc_id in rows]
            self.recall.remove(connection, target, namespace, gone, session=session)
        return gone

    def _rows_of(
        self,
        table: sa.Table,
        target: str,
        namespace: str,
        session: str | None,
        connection: sa.Connection,
    ) -> list[tuple[int, str]]:
        """``(key, doc_id)`` of a namespace's rows in ``table``, of one session's if given."""
        query = _in_order(table, target, namespace, table.c.id, table.c.doc_id, table.c.row)
        return [
            (key, doc_id)
            for key, doc_id, row in connection.execute(query)
            if session is None or _load(doc_id, row).metadata.get(SESSION_KEY) == session
        ]

    def unindex(
        self, target: str, namespace: str, *, ids: Sequence[str] = (), session: str | None = None
    ) -> None:
        """Take deleted documents out of the index and the dead letters (by id, or a session)."""
        with self._transaction("forget deleted documents", write=True) as connection:
            gone = set(ids)
            letters = [
                key
                for key, doc_id in self._rows_of(_dead, target, namespace, session, connection)
                if session is not None or doc_id in gone
            ]
            connection.execute(sa.delete(_dead).where(_dead.c.id.in_(letters)))
            self.recall.remove(connection, target, namespace, ids, session=session)

    def bury(self, target: str, namespace: str, failed: Sequence[tuple[OutboxRow, str]]) -> None:
        """Move rows out of the queue into the dead letters, with their errors, atomically.

        Exactly these copies, as :meth:`remove`: the same id queued again meanwhile
        (an edit) stays queued and indexed; the others leave the index.
        """
        letters = [{"doc_id": r.doc_id, "row": _dump(r), "error": e} for r, e in failed]
        with self._transaction("set aside a document", write=True) as connection:
            _append(connection, _dead, target, namespace, letters)
            buried = [row for row, _ in failed]
            _delete_copies(connection, target, namespace, buried)
            ids = [row.doc_id for row in buried]
            still = _queued_ids(connection, target, namespace, ids)
            self.recall.remove(connection, target, namespace, [i for i in ids if i not in still])

    def dead_letters(self, target: str, namespace: str) -> list[DeadLetter]:
        """The rows of a namespace set aside, oldest first."""
        query = _in_order(_dead, target, namespace, *_LETTER)
        with self._transaction("read set-aside documents") as connection:
            return [
                DeadLetter(_load(i, row), e, t) for _, i, row, e, t in connection.execute(query)
            ]

    def revive(self, target: str, namespace: str, ids: Sequence[str] | None) -> int:
        """Queue dead letters again (all, or those with ``ids``); return how many left the letters.

        One whose id was queued again since is dropped: the newer copy stands for it.
        """
        query = _in_order(_dead, target, namespace, *_LETTER)
        with self._transaction("queue set-aside documents", write=True) as connection:
            # By the letters' own keys: one set aside meanwhile under the same id stays.
            letters = [
                (key, doc_id, row)
                for key, doc_id, row, _, _ in connection.execute(query)
                if ids is None or doc_id in ids
            ]
            if not letters:
                return 0
            queued = _queued_ids(connection, target, namespace, [d for _, d, _ in letters])
            revived = [{"doc_id": d, "row": row} for _, d, row in letters if d not in queued]
            if revived:
                _append(connection, _outbox, target, namespace, revived)
                documents = [_indexed(_load(r["doc_id"], r["row"])) for r in revived]
                self.recall.add(connection, target, namespace, documents)
            connection.execute(sa.delete(_dead).where(_dead.c.id.in_([k for k, _, _ in letters])))
        return len(letters)

    @contextmanager
    def _transaction(self, action: str, *, write: bool = False) -> Iterator[sa.Connection]:
        """One transaction (a write takes SQLite's write lock first), errors as ours."""
        database = self.database
        try:
            database.engine  # noqa: B018  (opened, the file made, on first use)
            check_sqlite_file(self.url, f"the vector memory's outbox to {action}")
            batch = database.batch(write=True) if write else nullcontext()
            with batch, database.transaction() as connection:
                yield connection
        except BackendUnavailableError:
            raise  # it names the file or the server already
        except BackendError as exc:
            raise BackendUnavailableError(
                f"Cannot {action} in the vector memory's outbox {self.where!r}: {exc}"
            ) from exc


def number_queued(
    connection: sa.Connection, target: str, namespace: str, recall: RecallIndex
) -> list[IndexedDocument]:
    """The documents of a namespace waiting in the outbox, for the recall index being made.

    Rows queued before it (the store was down) get their turn numbers now, after
    the turns the index holds, and are rewritten with them, in the caller's transaction.
    """
    query = _in_order(_outbox, target, namespace, _outbox.c.id, _outbox.c.doc_id, _outbox.c.row)
    found = [(key, _load(doc_id, data)) for key, doc_id, data in connection.execute(query)]
    rows = numbered(connection, recall, target, namespace, [row for _, row in found])
    renumbered = [
        {"k": key, "r": _dump(row)}
        for (key, old), row in zip(found, rows, strict=True)
        if row is not old
    ]
    if renumbered:
        connection.execute(
            sa.update(_outbox)
            .where(_outbox.c.id == sa.bindparam("k"))
            .values(row=sa.bindparam("r")),
            renumbered,
        )
    return [_indexed(row) for row in rows]


def numbered(
    connection: sa.Connection,
    recall: RecallIndex,
    target: str,
    namespace: str,
    rows: Sequence[OutboxRow],
) -> list[OutboxRow]:
    """``rows``, each that wants a turn number given the next one of its session.

    Left as they are while the namespace has no recall index (its turns are unknown).
    """
    sessions = [str(r.metadata.get(SESSION_KEY)) for r in rows if r.needs_turn]
    next_turn = recall.number(connection, target, namespace, sessions) if sessions else None
    if next_turn is None:
        return list(rows)
    done = []
    for row in rows:
        if row.needs_turn:
            session = str(row.metadata.get(SESSION_KEY))
            metadata = {**row.metadata, TURN_KEY: next_turn[session]}
            next_turn[session] += 1
            row = replace(row, metadata=metadata, needs_turn=False)
        done.append(row)
    return done


def unnumbered(row: OutboxRow) -> OutboxRow:
    """A turn without a caller's turn number: the write gives it the next of its session."""
    return replace(row, metadata={k: v for k, v in row.metadata.items() if k != TURN_KEY})


def _indexed(row: OutboxRow) -> IndexedDocument:
    return IndexedDocument(row.doc_id, row.text, row.metadata)


Outbox = SQLOutbox

_outboxes: dict[str, SQLOutbox] = {}
_outboxes_lock = threading.Lock()
#: The scratch folders' names: the prefix, the pid of the process they are of, a dash.
SCRATCH_PREFIX = "memories-outbox-"
_scratch: list[str] = []


def outbox_for(mode: str, path: str, outbox: str | None) -> Outbox:
    """The process's outbox for a store: ``outbox`` (a file or URL) if given, else beside it.

    One per database and process. The in-memory store's is a file in a folder of
    the process, removed at exit: its rows live as long as the store's.
    """
    if outbox is None and mode == "memory":
        url = _scratch_url()
    elif outbox is not None and "://" in outbox:
        url = outbox
    else:
        if outbox is None and mode == "persistent":
            outbox = os.path.join(path, OUTBOX_FILE)
        file = os.path.abspath(outbox or default_file(OUTBOX_FILE))
        os.makedirs(os.path.dirname(file), exist_ok=True)
        url = f"sqlite:///{file}"
    with _outboxes_lock:
        found = _outboxes.get(url)
        if found is None:
            found = _outboxes[url] = SQLOutbox(url)
        return found


def _scratch_url() -> str:
    """The in-memory stores' outbox: a SQLite file in a folder of this process, gone at exit.

    A killed process leaves its folder (its turns' text): the next one removes it.
    """
    with _outboxes_lock:
        if not _scratch:
            remove_orphaned_scratch()
            folder = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            _scratch.append(f"sqlite:///{os.path.join(folder, OUTBOX_FILE)}")
        return _scratch[0]


def remove_orphaned_scratch() -> None:
    """Remove the scratch folders of processes no longer running (POSIX: a live pid is kept)."""
    if os.name != "posix":  # os.kill(pid, 0) would end the process on Windows
        return
    for folder in glob.glob(os.path.join(tempfile.gettempdir(), f"{SCRATCH_PREFIX}*-*")):
        pid = os.path.basename(folder).removeprefix(SCRATCH_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
