"""SQL databases for every store: one engine per URL, tables made once, errors translated.

The one place that opens a database: one engine and connection pool per URL
per process (forgotten in a forked child), SQLite in WAL mode with a busy
timeout, each store's tables made once per engine, database errors turned into
the library's own in :func:`transaction`. An in-memory SQLite URL is one
database per :class:`Database` object instead, never shared by URL.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import logging
import os
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Float,
    Index,
    Integer,
    MetaData,
    Table,
    create_engine,
    event,
    func,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.exc import OperationalError as SAOperationalError
from sqlalchemy.pool import StaticPool

from memories.errors import BackendError, BackendUnavailableError, ConfigError, InvalidInputError
from memories.kernel.accounting import measured
from memories.stores.kept import give_back, keep_connections, kept

__all__ = [
    "UPSERTING",
    "Database",
    "Prepared",
    "add_counts",
    "check_sqlite_file",
    "chunks",
    "count_rows",
    "ensure_tables",
    "get_engine",
    "in_memory_sqlite",
    "log_table",
    "make_sqlite_folder",
    "redacted",
    "sqlite_file",
    "starts_with",
    "transaction",
]

_SQLITE_BUSY_TIMEOUT_MS = 30_000
#: The dialects with an upsert (``INSERT ... ON CONFLICT``), by name: their module.
UPSERTING = {"sqlite": sqlite, "postgresql": postgresql}
_T = TypeVar("_T")

logger = logging.getLogger(__name__)

_engines: dict[str, Engine] = {}
#: The metadata (by id) whose tables each engine has, made by this process.
_ready: weakref.WeakKeyDictionary[Engine, set[int]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def redacted(url: str, /) -> str:
    """``url`` fit for a message, a log line or a repr: its password replaced by ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError, TypeError):
        # Not a URL SQLAlchemy can read: hide whatever stands between "//user:" and "@".
        return re.sub(r"(//[^/:@]*:)[^@/]*@", r"\1***@", str(url))


def get_engine(url: str) -> Engine:
    """One engine per database URL per process, shared by every store on that URL.

    Raises:
        ConfigError: ``url`` is not a usable SQLAlchemy URL.
    """
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _engines[url] = _create_engine(url)
            if sqlite_file(url) is not None:
                keep_connections(engine)
        return engine


#: ``MetaData.info`` key of the statements :func:`ensure_tables` runs after making the
#: tables, per dialect name: idempotent DDL (``CREATE INDEX IF NOT EXISTS``) that
#: SQLAlchemy's ``create_all`` cannot express or does not add to an existing table.
EXTRA_DDL = "memories_extra_ddl"
#: ``MetaData.info`` key of the functions (``f(connection)``) that bring tables an older
#: version made up to date (a column added, its rows filled in): run after the tables
#: are made, in the same transaction and lock, so a failure stops the opening.
UPGRADES = "memories_upgrades"


def ensure_tables(engine: Engine, url: str, metadata: MetaData) -> None:
    """Create ``metadata``'s tables on ``engine`` unless this process already did.

    Then its :data:`EXTRA_DDL` for the dialect: a statement that fails is logged,
    not raised (it adds speed, never correctness).

    Raises:
        BackendUnavailableError: the database cannot be opened or written.
    """
    with _lock:
        if id(metadata) in _ready.get(engine, ()):
            return
        try:
            with _translated(lambda: f"Cannot open the database {redacted(url)!r}"):
                _create_all(engine, metadata)
        except BackendUnavailableError as exc:
            # Two processes opening a new file race to CREATE TABLE; the loser
            # finds the tables made, which is all it wanted.
            if "already exists" not in str(exc.__cause__):
                raise
        for statement in metadata.info.get(EXTRA_DDL, {}).get(engine.dialect.name, ()):
            try:
                with engine.begin() as connection:
                    connection.exec_driver_sql(statement)
            except SQLAlchemyError as exc:
                logger.warning(
                    "Could not run %r on %s (%s); the store works without it, only slower.",
                    statement,
                    redacted(url),
                    exc,
                )
        _ready.setdefault(engine, set()).add(id(metadata))


#: The PostgreSQL advisory lock that serialises making tables (any constant of our own).
_DDL_LOCK = 0x6D656D6F72696573  # "memories"


def _create_all(engine: Engine, metadata: MetaData) -> None:
    """Make ``metadata``'s missing tables and run its upgrades, one process at a time.

    Two PostgreSQL sessions making one table both pass the existence check, and
    the second fails on ``pg_type_typname_nsp_index``: an advisory lock makes it
    wait. On SQLite, ``BEGIN IMMEDIATE`` makes the set one transaction, so no
    process finds some tables made and the rest not yet.
    """
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _DDL_LOCK})
        if engine.dialect.name == "sqlite":
            _BEGIN_IMMEDIATE.execute(connection)
        metadata.create_all(connection)
        for upgrade in metadata.info.get(UPGRADES, ()):
            upgrade(connection)


@contextmanager
def transaction(engine: Engine, url: str) -> Iterator[Connection]:
    """A transaction on ``engine``; database errors come out as the library's own.

    An operational error (unreachable, locked past the busy timeout, disk full)
    is a :class:`BackendUnavailableError`, any other a :class:`BackendError`.
    """
    check_sqlite_file(url, "the database")
    mine = kept(engine)  # this thread's connection, if it keeps one (memories.stores.kept)
    with (
        measured("store", "transaction", {"db.system.name": engine.dialect.name}),
        _translated(lambda: f"The database {redacted(url)!r} failed"),
    ):
        if mine is None:
            with engine.begin() as c:
                yield c
            return
        try:
            with mine.begin():
                yield mine
        except BaseException:
            give_back(engine)  # it may be unusable now: the next transaction checks out afresh
            raise


class Prepared:
    """A statement compiled once per dialect and run through the driver with plain parameters.

    SQLAlchemy's handling of a statement object on every call costs a turn more
    than the database's own work. Written with ``sa.bindparam`` names, it takes
    no type processing (plain ints, floats, strings) and no expanding ``IN``. On
    SQLite, unless someone watches the engine's statements (:func:`_observed`),
    it runs on the driver's own connection in the same transaction (SQLAlchemy's
    execution context costs several times the statement there), errors raised as
    SQLAlchemy's; the result is the driver's cursor (``fetchone`` / ``fetchall``).
    """

    def __init__(self, statement: Any) -> None:
        self.statement = statement
        self._compiled: dict[str, tuple[str, tuple[str, ...] | None, dict[str, Any]]] = {}

    def execute(self, connection: Connection, **values: Any) -> Any:
        """Run it on ``connection`` with these parameter values; the driver's cursor result."""
        dialect = connection.dialect
        compiled = self._compiled.get(dialect.name)
        if compiled is None:
            done = self.statement.compile(dialect=dialect)
            positions = tuple(done.positiontup) if done.positiontup else None
            compiled = self._compiled[dialect.name] = (done.string, positions, done.params)
        sql, positions, defaults = compiled
        params = {**defaults, **values}
        args = tuple(params[name] for name in positions) if positions is not None else params
        if dialect.name == "sqlite" and not _observed(connection):
            return _on_driver(connection, sql, args)
        return connection.exec_driver_sql(sql, args)


def _observed(connection: Connection) -> bool:
    """Whether someone watches the engine's statements: a cursor event, echo, the log."""
    dispatch = connection.engine.dispatch
    return bool(
        dispatch.before_cursor_execute
        or dispatch.after_cursor_execute
        or connection.dialect.dispatch.handle_error
        or connection._echo
    )


def _on_driver(connection: Connection, sql: str, args: Any) -> Any:
    """``sql`` on the driver's connection, in the open transaction; errors as SQLAlchemy's."""
    dbapi = connection.dialect.loaded_dbapi
    try:
        return connection.connection.driver_connection.execute(sql, args)  # type: ignore[union-attr]
    except dbapi.Error as exc:
        raise DBAPIError.instance(sql, args, exc, dbapi.Error, dialect=connection.dialect) from exc


#: Keys a statement names at most: under every engine's limit on bound parameters
#: (SQLite's 32,766, 999 in older builds; PostgreSQL's 65,535).
KEYS_PER_STATEMENT = 500


def chunks(items: Sequence[_T], size: int = KEYS_PER_STATEMENT) -> Iterator[Sequence[_T]]:
    """``items`` in slices of at most ``size`` (by default a statement's share of keys)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def starts_with(column: Any, prefix: str) -> Any:
    """``column`` begins with ``prefix``, case and all (SQLite's LIKE ignores ASCII case)."""
    return func.substr(column, 1, len(prefix)) == prefix


def count_rows(connection: Connection, table: Table, *where: Any) -> int:
    """How many rows of ``table`` meet the conditions ``where`` (one COUNT)."""
    query = select(func.count()).select_from(table).where(*where)
    return int(connection.execute(query).scalar_one())


def add_counts(
    connection: Connection, table: Table, rows: Sequence[dict[str, Any]], counters: Sequence[str]
) -> None:
    """Add each of ``rows``' ``counters`` to the row of ``table`` with its key, made if missing.

    One upsert where the dialect has one (:data:`UPSERTING`), else per row an update
    and, when it found no row, an insert.
    """
    module = UPSERTING.get(connection.dialect.name)
    key = list(table.primary_key.columns)
    if module is not None:
        insert = module.insert(table)
        added = {c: table.c[c] + insert.excluded[c] for c in counters}
        connection.execute(insert.on_conflict_do_update(index_elements=key, set_=added), rows)
        return
    for row in rows:
        mine = [column == row[column.name] for column in key]
        update = table.update().where(*mine).values({c: table.c[c] + row[c] for c in counters})
        if connection.execute(update).rowcount == 0:
            connection.execute(table.insert().values(row))


def log_table(
    name: str, metadata: MetaData, keys: Mapping[str, Any], *columns: Any, index: str
) -> Table:
    """An append-only table: ``id``, the ``keys`` that pick one log, ``columns``, ``created_at``.

    ``keys`` are the key columns' names and types (never null). ``id`` is the
    autoincrement key (never reused, on SQLite too): a log is read in order
    through the index ``index`` on ``keys`` + ``id``.
    """
    return Table(
        name,
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        *(Column(key, kind, nullable=False) for key, kind in keys.items()),
        *columns,
        Column("created_at", Float, nullable=False),
        Index(index, *keys, "id"),
        sqlite_autoincrement=True,
    )


@dataclass(frozen=True)
class _Batch:
    """This thread's open batch on one database."""

    connection: Connection
    write: bool


#: Numbers the private in-memory databases of this process (they all have one URL).
_IN_MEMORY = itertools.count(1)


class _MemoryDatabase:
    """A private in-memory SQLite database: one connection for every thread, one turn at a time.

    It lives and dies with its connection, so the engine keeps exactly one
    (``StaticPool``); the ``turn`` lock makes each transaction whole before the next.
    """

    def __init__(self, url: str) -> None:
        self.url, self.key = url, f"{url}#{next(_IN_MEMORY)}"
        self.engine = _create_engine(url, memory=True)
        self.turn = threading.RLock()

    @contextmanager
    def held(self) -> Iterator[None]:
        """This thread's turn on the database, waiting at most SQLite's busy timeout."""
        if not self.turn.acquire(timeout=_SQLITE_BUSY_TIMEOUT_MS / 1000):
            raise BackendUnavailableError(
                f"The in-memory database {redacted(self.url)!r} stayed busy for "
                f"{_SQLITE_BUSY_TIMEOUT_MS // 1000} s (another thread's transaction); try again."
            )
        try:
            yield
        finally:
            self.turn.release()


class Database:
    """A store's handle on one database: its URL, engine and tables, ready for transactions.

    Copies and pickles carry the URL only (a pool never crosses a copy or a
    fork). An in-memory SQLite URL is this object's own database: a copy shares
    it, a pickle opens a new, empty one.

    Args:
        url: a SQLAlchemy URL.
        metadata: the tables the store needs (created once per engine).
        like: on an in-memory SQLite URL, share this database's (others share by URL).
    """

    def __init__(self, url: str, metadata: MetaData, *, like: Database | None = None) -> None:
        _check_reachable(url)
        self._start(url, metadata, None if like is None else like._memory)

    def _start(self, url: str, metadata: MetaData, memory: _MemoryDatabase | None) -> None:
        """Ready for ``url``, opening nothing (in memory: on ``memory``, else a new database)."""
        self.url, self.metadata = url, metadata
        self._engine: Engine | None = None
        self._opening = threading.Lock()
        self._batches = threading.local()
        self._memory = (memory or _MemoryDatabase(url)) if in_memory_sqlite(url) else None
        #: What names this database in the process: its URL (a SQLite file's: the file,
        #: however the URL spells it); in memory, its own database.
        self.key = str(sqlite_file(url) or url) if self._memory is None else self._memory.key

    @property
    def engine(self) -> Engine:
        """The engine, with the tables in place: opened on first use, so building writes nothing."""
        engine = self._engine
        if engine is None:
            with self._held(), self._opening:  # the turn first, as in a transaction
                if self._engine is None:
                    make_sqlite_folder(self.url)
                    engine = get_engine(self.url) if self._memory is None else self._memory.engine
                    ensure_tables(engine, self.url, self.metadata)
                    self._engine = engine
                engine = self._engine
        return engine

    def shares(self, other: Database) -> bool:
        """Whether ``other`` is the same database: one :attr:`key`."""
        return self.key == other.key

    def _held(self) -> AbstractContextManager[None]:
        """This thread's turn on an in-memory database (nothing to wait for on others)."""
        return nullcontext() if self._memory is None else self._memory.held()

    def transaction(self, *, write: bool = False) -> AbstractContextManager[Connection]:
        """A transaction, errors translated (:func:`transaction`); inside this thread's
        :meth:`batch`, the batch's (a write joins only a write batch)."""
        current: _Batch | None = getattr(self._batches, "current", None)
        if current is not None and (current.write or not write):
            return nullcontext(current.connection)
        if self._memory is not None:
            return self._held_transaction()
        return transaction(self.engine, self.url)

    @contextmanager
    def _held_transaction(self) -> Iterator[Connection]:
        with self._held(), transaction(self.engine, self.url) as connection:
            yield connection

    @contextmanager
    def batch(self, *, write: bool) -> Iterator[None]:
        """Run this thread's transactions on this database as one (a turn: one commit).

        A SQLite write batch takes the write lock up front (``BEGIN IMMEDIATE``,
        within the busy timeout) rather than fail when another writer overtakes
        a read inside it. Nested batches join the outer one.
        """
        if getattr(self._batches, "current", None) is not None:
            yield
            return
        with self._held(), transaction(self.engine, self.url) as connection:
            if write and connection.dialect.name == "sqlite":
                _BEGIN_IMMEDIATE.execute(connection)
            self._batches.current = _Batch(connection, write)
            try:
                yield
            finally:
                self._batches.current = None

    def __repr__(self) -> str:
        return f"Database({redacted(self.url)!r})"

    def __deepcopy__(self, memo: dict[int, Any]) -> Database:
        return Database(self.url, self.metadata, like=self)  # the tables are shared, never copied

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "metadata": self.metadata}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._start(state["url"], state["metadata"], None)


#: A SQLite write batch takes the write lock up front (see :meth:`Database.batch`).
_BEGIN_IMMEDIATE = Prepared(text("BEGIN IMMEDIATE"))


def _check_reachable(url: str) -> None:
    """Fail now, writing nothing, for a database that cannot be used (the first use makes it).

    A bad URL or a missing driver raises :class:`ConfigError`; a server that
    cannot be reached (a connection opened and closed) or a SQLite file whose
    folder cannot be made, :class:`BackendUnavailableError`.
    """
    if in_memory_sqlite(url):
        return
    engine = get_engine(url)
    file = sqlite_file(url)
    if engine.url.get_backend_name() != "sqlite":
        with _translated(lambda: f"Cannot open the database {redacted(url)!r}"):
            engine.connect().close()
    elif file is not None:
        if file.is_file():
            return
        ancestor = file.parent
        while not ancestor.exists():
            ancestor = ancestor.parent
        if not ancestor.is_dir() or not os.access(ancestor, os.W_OK):
            raise BackendUnavailableError(
                f"Cannot create the SQLite file {str(file)!r}: {str(ancestor)!r} is not a "
                "writable folder."
            )


def make_sqlite_folder(url: str) -> None:
    """Create the folder of a SQLite URL's file (nothing for other databases).

    Raises:
        ConfigError: ``url`` is not a SQLAlchemy URL.
        BackendUnavailableError: the folder cannot be created.
    """
    file = sqlite_file(url)
    if file is None:
        return
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackendUnavailableError(
            f"Cannot create the folder of the SQLite file {str(file)!r}: {exc}"
        ) from exc


@functools.lru_cache(maxsize=1024)
def _parsed(url: str) -> URL:
    """``url`` read by SQLAlchemy once, or ConfigError saying what a URL looks like."""
    try:
        return make_url(url)
    except ArgumentError as exc:
        raise ConfigError(_bad_url(url, exc)) from exc


@functools.lru_cache(maxsize=1024)
def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names, made absolute once (None: another database, memory, a URI).

    Raises:
        ConfigError: ``url`` is not a SQLAlchemy URL.
    """
    parsed = _parsed(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if database.startswith("file:"):
        return None
    return Path(database).expanduser().absolute()


def in_memory_sqlite(url: str) -> bool:
    """Whether ``url`` is an in-memory SQLite database of its own (``sqlite://``, ``:memory:``).

    A named shared-cache one (``file:name?mode=memory&cache=shared``) is not:
    its name shares it, as a file's path does.

    Raises:
        ConfigError: ``url`` is not a SQLAlchemy URL.
    """
    parsed = _parsed(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def check_sqlite_file(url: str, what: str) -> None:
    """Raise if the SQLite file ``url`` names was deleted while this process used it (a ``stat``).

    SQLite goes on writing into a deleted file through its open connections: a
    turn saved after the deletion would be lost without a word.

    Raises:
        BackendUnavailableError: the file is gone.
    """
    file = sqlite_file(url)
    if file is not None and not file.exists():
        raise BackendUnavailableError(
            f"Cannot use {what}: the SQLite file {str(file)!r} is gone (deleted while this "
            "process used it), and what was in it with it. Close a memory (memory.close()) before "
            "deleting its files; to go on, make the memory again in a new process."
        )


@contextmanager
def _translated(what: Callable[[], str]) -> Iterator[None]:
    """Database errors as the library's own, named by ``what()`` (made on error only)."""
    try:
        yield
    except SAOperationalError as exc:
        raise BackendUnavailableError(f"{what()}: {exc}") from exc
    except SQLAlchemyError as exc:
        raise BackendError(f"{what()}: {exc}") from exc
    except UnicodeEncodeError as exc:  # the driver's, before the write: a lone surrogate
        reason = f"a text holds a lone surrogate ({exc}); decode it with errors='replace'"
        raise InvalidInputError(f"{what()}: {reason}.") from exc


def _bad_url(url: str, exc: Exception) -> str:
    return (
        f"{redacted(url)!r} is not a usable SQLAlchemy database URL ({exc}). "
        "Use e.g. 'sqlite:///memories.db' or 'postgresql+psycopg://user@host/db'."
    )


#: How long opening a connection to a PostgreSQL server may take, in seconds (a
#: ``connect_timeout`` in the URL wins): a server that accepts and never answers
#: fails instead of hanging the caller.
CONNECT_TIMEOUT_SECONDS = 10
#: How long one statement may run on a PostgreSQL server, waits for a lock
#: included, before the server cancels it (``statement_timeout``; one set in the
#: URL's ``options`` wins): the same bound as SQLite's busy timeout.
STATEMENT_TIMEOUT_SECONDS = 30
#: libpq's TCP settings on PostgreSQL connections (each one set in the URL wins):
#: a connection whose server host or network is gone fails within about 25 s
#: (keepalives unanswered, or data sent and never acknowledged) instead of the
#: operating system's two hours.
SOCKET_BOUNDS: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 25_000,  # milliseconds; libpq 12 and later
}
# Drivers that pass libpq's connection parameters through (pg8000 and asyncpg do not).
_LIBPQ_DRIVERS = ("psycopg", "psycopg2", "psycopg2cffi")


def _create_engine(url: str, *, memory: bool = False) -> Engine:
    try:
        parsed = make_url(url)
        options: dict[str, Any] = {}
        if memory:  # one connection, any thread (see _MemoryDatabase)
            options = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
        if parsed.get_backend_name() == "postgresql":
            options["connect_args"] = _postgres_bounds(parsed)
            # A restarted server (or a proxy's cut) leaves pooled connections dead: a ping
            # at each checkout keeps the first calls after it from failing, one per connection.
            options["pool_pre_ping"] = True
        engine = create_engine(url, **options)
    except (ArgumentError, NoSuchModuleError) as exc:
        raise ConfigError(_bad_url(url, exc)) from exc
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _configure_sqlite)
    return engine


def _postgres_bounds(url: URL) -> dict[str, Any]:
    """Connection arguments that bound every wait on a PostgreSQL server, unless the URL sets them.

    ``connect_timeout``; with a libpq driver, also :data:`STATEMENT_TIMEOUT_SECONDS`
    and :data:`SOCKET_BOUNDS`.
    """
    given = url.query
    bounds: dict[str, Any] = {}
    if "connect_timeout" not in given:
        bounds["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
    driver = url.get_driver_name()
    if driver not in _LIBPQ_DRIVERS:
        return bounds
    for name, value in SOCKET_BOUNDS.items():
        if name not in given and (name != "tcp_user_timeout" or _libpq_version(driver) >= 120000):
            bounds[name] = value
    user_options = given.get("options", "")
    if isinstance(user_options, tuple):  # the parameter given twice
        user_options = " ".join(user_options)
    if "statement_timeout" not in user_options:
        statement = f"-c statement_timeout={STATEMENT_TIMEOUT_SECONDS * 1000}"
        bounds["options"] = f"{user_options} {statement}".strip()
    return bounds


def _libpq_version(driver: str) -> int:
    """The version of the libpq ``driver`` links (e.g. 170002), or 0 when unknown."""
    try:
        if driver == "psycopg":
            from psycopg import pq

            return int(pq.version())
        import psycopg2.extensions  # psycopg2 and psycopg2cffi alike

        return int(psycopg2.extensions.libpq_version())
    except Exception:  # not importable here: keep to what every libpq knows
        return 0


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {_SQLITE_BUSY_TIMEOUT_MS}")
    _switch_to_wal(cursor)
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.close()


def _switch_to_wal(cursor: Any) -> None:
    """``PRAGMA journal_mode = WAL``, retried for up to the busy timeout.

    The switch takes a lock SQLite does not wait for: of two processes opening a
    new file, the second fails at once with "database is locked".
    """
    deadline = time.monotonic() + _SQLITE_BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _forget_engines_after_fork() -> None:
    # A forked child must not reuse the parent's pooled connections.
    for engine in _engines.values():
        engine.dispose(close=False)
    _engines.clear()
    _ready.clear()


def _close_engines_at_exit() -> None:
    # Closing the pooled connections lets SQLite checkpoint its WAL and remove the -wal and
    # -shm files beside the database: a process that only read leaves its folder as it was.
    for engine in list(_engines.values()):
        try:
            give_back(engine)  # this thread's; another one's goes when its thread does
            engine.dispose()
        except Exception as exc:  # the process ends either way: say so, stop nothing
            logger.debug("closing %s at exit failed: %s", redacted(str(engine.url)), exc)


os.register_at_fork(after_in_child=_forget_engines_after_fork)
# Registered at import, so it runs after the exit handlers of what uses the engines (LIFO).
atexit.register(_close_engines_at_exit)
