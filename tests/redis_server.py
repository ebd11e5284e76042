"""A throwaway Redis server on loopback, for tests of the Redis stores.

The server is Debian's ``redis-server`` package (``.ci/run`` installs it),
started on a free port in a temporary folder, with no persistence and
protected mode on, and stopped (then its folder deleted) after the test.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.postgres import _free_port

#: How long the server may take to answer its first PING.
START_TIMEOUT = 30.0


def find_redis_server() -> str | None:
    """The ``redis-server`` binary, or None when it is not installed."""
    return shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )


@dataclass
class RedisServer:
    """A ``redis-server`` process on 127.0.0.1:``port``, its files in ``root``."""

    binary: str
    root: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Its URL, database 0."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it and wait (at most :data:`START_TIMEOUT` seconds) until it answers."""
        import redis

        log = (self.root / "redis.log").open("ab")
        self.process = subprocess.Popen(
            [
                self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.root), "--save", "", "--appendonly", "no",
                "--protected-mode", "yes", "--daemonize", "no",
            ],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        client = redis.Redis.from_url(self.url, socket_timeout=1, socket_connect_timeout=1)
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.exceptions.ConnectionError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        output = (self.root / "redis.log").read_text(errors="replace")
                        self.stop()
                        raise RuntimeError(f"redis-server did not start:\n{output}") from None
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 10 s) and wait for it to exit."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    """Start a fresh Redis server on 127.0.0.1, yield it, stop it and delete its folder."""
    binary = find_redis_server()
    if binary is None:
        raise RuntimeError("redis-server not found (apt-get install redis-server)")
    root = Path(tempfile.mkdtemp(prefix="memories-redis-"))
    server = RedisServer(binary, root, _free_port())
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
