"""Rewriting the files an erasure deleted from, so that no byte of the deleted rows stays.

A ``DELETE`` leaves the rows' bytes in the file (SQLite's free pages and WAL,
an FTS index's segments, PostgreSQL's dead tuples) until the space is reused,
so after an erasure (:func:`memories.erase_user`) each SQLite file, Chroma
folder or PostgreSQL database it deleted from is rewritten. What each one gets,
what it costs, why not ``PRAGMA secure_delete`` and what no compaction reaches:
``docs/deployment.md`` ("Erased from the files too").
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.exc import DBAPIError

from memories.stores.sql import Database, get_engine, redacted, sqlite_file
from memories.stores.vector.hnsw_files import Blanked, blank_unused

__all__ = [
    "Compacted",
    "Compaction",
    "chroma_compaction",
    "compact",
    "compactions",
    "sqlite_compaction",
]

#: How long a compaction waits for a lock (a reader of the WAL, a table in use), in seconds.
WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class Compaction:
    """A file or a database an erasure deleted from: what to rewrite after it."""

    kind: Literal["sqlite", "chroma", "postgresql", "other"]
    """How to rewrite it: a SQLite file, a Chroma folder (its SQLite file and its vector
    index files), a PostgreSQL database, or a database we cannot."""
    where: str
    """The SQLite file's absolute path (Chroma's in its folder), or the database's URL."""
    tables: frozenset[str] = field(default=frozenset())
    """The tables to rewrite (a SQLite file is rewritten whole)."""

    @property
    def name(self) -> str:
        """The file or database for a report (a URL's password hidden)."""
        if self.kind == "sqlite":
            return f"SQLite file {self.where!r}"
        if self.kind == "chroma":
            return f"Chroma folder {str(Path(self.where).parent)!r}"
        return f"database {redacted(self.where)!r}"


@dataclass(frozen=True)
class Compacted:
    """What a compaction did to one file or database, and how long it took."""

    where: str
    """The file or database (:attr:`Compaction.name`)."""
    done: str
    """What was done, or what could not be and why."""
    seconds: float
    """How long it took."""
    complete: bool
    """Whether no byte of a deleted row is left in its files."""

    def to_dict(self) -> dict[str, Any]:
        """The line as JSON-ready data."""
        return {
            "file": self.where,
            "done": self.done,
            "seconds": round(self.seconds, 4),
            "complete": self.complete,
        }

    def text(self) -> str:
        """The line for a person to read."""
        return f"{self.where}: {self.done} ({self.seconds:.2f} s)"


def sqlite_compaction(path: str | Path, /) -> Compaction:
    """A SQLite file to rewrite."""
    return Compaction("sqlite", str(Path(path).absolute()))


def chroma_compaction(file: str | Path, /) -> Compaction:
    """A persistent Chroma's folder to rewrite, named by its SQLite file (``chroma.sqlite3``)."""
    return Compaction("chroma", str(Path(file).absolute()))


def compactions(*databases: Database | None) -> tuple[Compaction, ...]:
    """What to rewrite after deleting from these databases (None and in-memory ones: nothing)."""
    found = []
    for database in databases:
        if database is None:
            continue
        file = sqlite_file(database.url)
        dialect = get_engine(database.url).dialect.name
        if file is not None:
            found.append(sqlite_compaction(file))
        elif dialect == "postgresql":
            tables = frozenset(database.metadata.tables)
            found.append(Compaction("postgresql", database.url, tables))
        elif dialect != "sqlite":  # an in-memory SQLite database has no file
            found.append(Compaction("other", database.url))
    return tuple(found)


def compact(found: Iterable[Compaction]) -> list[Compacted]:
    """Rewrite each file or database once (the tables of one database merged), in order.

    Nothing is raised for a file that cannot be compacted: its line says why
    and is not complete. :data:`WAIT_SECONDS` bounds each wait for a lock.
    """
    tables: dict[tuple[Any, str], frozenset[str]] = {}
    for item in found:
        key = (item.kind, item.where)
        tables[key] = tables.get(key, frozenset()) | item.tables
    return [_compacted(Compaction(*key, merged), WAIT_SECONDS) for key, merged in tables.items()]


def _compacted(item: Compaction, wait: float) -> Compacted:
    start = time.perf_counter()
    if item.kind in ("sqlite", "chroma"):
        done, complete = _compact_sqlite(Path(item.where), wait, chroma=item.kind == "chroma")
    elif item.kind == "postgresql":
        done, complete = _compact_postgresql(item.where, sorted(item.tables), wait)
    else:
        dialect = get_engine(item.where).dialect.name
        done = (
            f"not compacted: no compaction for {dialect}; the deleted rows' bytes stay in its "
            "files until the database reuses their space (see docs/deployment.md)"
        )
        complete = False
    return Compacted(item.name, done, time.perf_counter() - start, complete)


def _size(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return sum(p.stat().st_size for p in (path, wal) if p.exists())


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


def _compact_sqlite(path: Path, wait: float, *, chroma: bool = False) -> tuple[str, bool]:
    """Merge the FTS indexes, VACUUM, checkpoint and truncate the WAL (and, in a Chroma
    folder, blank its index files' unused capacity); say what was done."""
    if not path.exists():
        return "nothing to do: the file is gone", True
    before = _size(path)
    try:
        connection = sqlite3.connect(path, timeout=wait, isolation_level=None)
    except sqlite3.Error as exc:
        return f"not compacted: cannot open it ({exc})", False
    try:
        merged = _merge_text_indexes(connection)
        connection.execute("VACUUM")
        busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        segments = _blank_segments(connection, path.parent) if chroma else None
    except sqlite3.Error as exc:
        return f"not compacted: {exc} (run the erasure again when the file is not in use)", False
    finally:
        connection.close()
    steps = [f"{merged} text index{'es' if merged != 1 else ''} merged"] if merged else []
    steps.append(f"vacuumed ({_megabytes(before)} -> {_megabytes(_size(path))})")
    if busy:
        steps.append(
            "but a reader kept the WAL from being emptied: the erased rows stay in the "
            f"'-wal' file until its next checkpoint (run the erasure again, {wait:.0f} s wait)"
        )
        return ", ".join(steps), False
    steps.append("WAL emptied")
    if segments is None:
        return ", ".join(steps), True
    steps.append(
        f"{_megabytes(segments.zeroed)} of unused capacity zeroed in {segments.segments} "
        "vector index segments"
    )
    if segments.skipped:
        steps.append(f"not in {', '.join(segments.skipped)}")
    return ", ".join(steps), not segments.skipped


def _blank_segments(connection: sqlite3.Connection, folder: Path) -> Blanked:
    """Zero the vector index files' unused capacity while no Chroma write can log."""
    connection.execute("BEGIN IMMEDIATE")  # writers wait (readers need not)
    try:
        return blank_unused(folder)
    finally:
        connection.execute("ROLLBACK")


def _merge_text_indexes(connection: sqlite3.Connection) -> int:
    """Merge each full-text index's segments: a deleted document's terms stay until then."""
    names = [
        name
        for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND lower(sql) LIKE 'create virtual table%using fts%'"
        )
    ]
    for name in names:
        quoted = '"' + name.replace('"', '""') + '"'
        connection.execute(f"INSERT INTO {quoted}({quoted}) VALUES ('optimize')")
    return len(names)


def _compact_postgresql(url: str, tables: Sequence[str], wait: float) -> tuple[str, bool]:
    """VACUUM (FULL, ANALYZE) each of ``tables`` that exists; say what was done."""
    engine = get_engine(url)
    done, left = [], []
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql(f"SET lock_timeout = '{int(wait * 1000)}ms'")
            try:
                for table in tables:
                    owned = _owned(connection, f'"{table}"')
                    if owned is None:  # never made: nothing was ever in it
                        continue
                    if not owned:  # VACUUM would skip it with a mere warning
                        left.append(f"{table} (this role does not own it)")
                        continue
                    try:
                        connection.exec_driver_sql(f'VACUUM (FULL, ANALYZE) "{table}"')
                        done.append(table)
                    except DBAPIError as exc:  # a lock not had in time, a statement timeout
                        left.append(f"{table} ({_said(exc)})")
                statistics = _rewrite_statistics(connection) if done else ""
            finally:
                connection.exec_driver_sql("RESET lock_timeout")
    except DBAPIError as exc:
        return f"not compacted: {_said(exc)}", False
    said = f"VACUUM FULL of {len(done)} table{'s' if len(done) != 1 else ''}{statistics}"
    if left:
        return (
            f"{said}; not of {', '.join(left)}: their dead rows stay in the files until "
            "VACUUM FULL runs (run the erasure again when they are not in use, as their owner)",
            False,
        )
    return said, True


def _owned(connection: Any, relation: str) -> bool | None:
    """Whether this role may VACUUM ``relation`` (owns it, or is a superuser); None: no such."""
    found = connection.exec_driver_sql(
        "SELECT pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = to_regclass(%(r)s)",
        {"r": relation},
    ).scalar()
    return None if found is None else bool(found)


def _rewrite_statistics(connection: Any) -> str:
    """Rewrite ``pg_statistic``, whose dead rows keep the values the last ANALYZE sampled."""
    if not _owned(connection, "pg_catalog.pg_statistic"):
        return " (not pg_statistic: only a superuser may rewrite it; see docs/deployment.md)"
    try:
        connection.exec_driver_sql("VACUUM FULL pg_catalog.pg_statistic")
    except DBAPIError as exc:
        return f" (not pg_statistic: {_said(exc)})"
    return " and pg_statistic"


def _said(exc: DBAPIError) -> str:
    """The first line of the database's message."""
    return str(exc.orig).strip().splitlines()[0]
