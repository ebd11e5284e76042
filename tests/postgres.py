"""A throwaway PostgreSQL server on loopback, for tests of the SQL backends."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def find_pg_bin() -> Path | None:
    """The newest PostgreSQL server bin folder, or None."""
    for folder in PG_BIN_DIRS:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres_user(command: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root.
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a fresh cluster on 127.0.0.1, yield its SQLAlchemy URL, stop and delete it."""
    bin_dir = find_pg_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL server binaries not found (apt-get install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="memories-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    port = _free_port()
    run = lambda args: subprocess.run(  # noqa: E731
        _as_postgres_user(args), check=True, capture_output=True, text=True, timeout=120
    )
    run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"])
    run(
        [
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            f"-h 127.0.0.1 -p {port} -k {root}",
            "-l",
            str(root / "log"),
            "-w",
            "start",
        ]
    )
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        run([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)
