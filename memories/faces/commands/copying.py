"""A config's file stores copied into a temporary folder, for a command that must not write.

``memories usage`` measures a conversation on a copy, so that it is not saved into the
config's own stores.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from memories.core.config import load_config, server_stores, with_paths
from memories.errors import ConfigError
from memories.kernel.paths import DATA_DIR_ENV, data_dir

__all__ = ["on_a_copy"]


@contextmanager
def on_a_copy(config: str | Path | dict[str, Any], *, command: str) -> Iterator[dict[str, Any]]:
    """The config's options on copies of its files, in a temporary folder removed at the end.

    A SQLite file is copied with its backup API (consistent while another process
    writes), a folder as it is, and the data directory (stores at their default place)
    whole; what does not exist yet stays absent.

    Raises:
        ConfigError: the config keeps data on a server, which cannot be copied.
    """
    options = load_config(config)
    servers = server_stores(options)
    if servers:
        raise ConfigError(
            f"`memories {command}` runs on a copy of the config's files, and {servers[0]} is a "
            f"server, which cannot be copied: pass --save to run it on the real stores (the "
            "conversation is then saved there)."
        )
    with tempfile.TemporaryDirectory(prefix=f"memories-{command}-") as folder:
        copies: dict[str, str] = {}

        def copy(path: str) -> str:
            source = Path(path).expanduser()
            if str(source) not in copies:
                copies[str(source)] = _copied(source, Path(folder) / f"{len(copies)}-{source.name}")
            return copies[str(source)]

        copied = with_paths(options, copy)
        before = os.environ.get(DATA_DIR_ENV)
        os.environ[DATA_DIR_ENV] = _copied(data_dir(), Path(folder) / "data")
        try:
            yield copied
        finally:
            if before is None:
                os.environ.pop(DATA_DIR_ENV, None)
            else:
                os.environ[DATA_DIR_ENV] = before


def _copied(source: Path, target: Path) -> str:
    """``target`` made a copy of ``source``: a folder whole, each file as :func:`_copy_file`
    (a SQLite file's backup holds its WAL: the WAL itself is not copied)."""
    if source.is_dir():
        skipped = shutil.ignore_patterns("*-wal", "*-shm", "*-journal")
        shutil.copytree(source, target, ignore=skipped, copy_function=_copy_file)
    elif source.is_file():
        _copy_file(source, target)
    return str(target)


def _copy_file(source: Path | str, target: Path | str) -> None:
    """A SQLite database through its backup API (its WAL included); any other file as bytes."""
    try:
        with closing(sqlite3.connect(source)) as reader, closing(sqlite3.connect(target)) as writer:
            reader.backup(writer)
    except sqlite3.DatabaseError:  # not a database: an outbox not made yet, a plain file
        Path(target).unlink(missing_ok=True)
        shutil.copyfile(source, target)
