"""Fixtures for the vector memory: fake embeddings, fresh stores, Chroma and pgvector servers."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from memories.long_term.vector import VectorMemory
from tests import needs
from tests.postgres import PostgresServer, find_pg_bin, postgres_cluster


class WordEmbeddings(Embeddings):
    """Deterministic bag-of-words embeddings: texts sharing words are close. No model needed."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls = 0
        self.queries: list[str] = []
        """Every text embedded as a query, in order."""

    def _vector(self, text: str) -> list[float]:
        vector = np.zeros(self.dim)
        for word in text.lower().split():
            seed = int.from_bytes(word.strip(".,!?:").encode()[:8].ljust(8, b"\0"), "little")
            vector += np.random.default_rng(seed).normal(size=self.dim)
        norm = np.linalg.norm(vector)
        unit: list[float] = (vector / norm if norm else np.ones(self.dim) / self.dim**0.5).tolist()
        return unit

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        self.queries.append(text)
        return self._vector(text)


MakeVector = Callable[..., VectorMemory]


@pytest.fixture
def make_vector() -> MakeVector:
    """Build in-memory vector memories on a collection of their own, with fake embeddings."""
    collection = f"t{uuid.uuid4().hex[:12]}"
    embeddings = f"{__name__}:WordEmbeddings"  # by name, so configs round-trip

    def make(**options: Any) -> VectorMemory:
        options.setdefault("mode", "memory")
        options.setdefault("collection", collection)
        options.setdefault("embeddings", embeddings)
        return VectorMemory(**options)

    return make


@dataclass
class ChromaServer:
    """A `chroma run` process on loopback, restartable on the same data folder."""

    path: Path
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        chroma = Path(sys.executable).with_name("chroma")
        command = [str(chroma) if chroma.exists() else "chroma", "run", "--path", str(self.path)]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chroma run exited: {self.log.read_text()[-2000:]}")
            try:
                url = f"http://127.0.0.1:{self.port}/api/v2/heartbeat"
                httpx.get(url, timeout=1).raise_for_status()
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"chroma run did not answer in 60 s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    """A real Chroma server on a free loopback port for the module's tests; stopped after."""
    folder = tmp_path_factory.mktemp("chroma-server")
    server = ChromaServer(folder / "data", free_port(), folder / "server.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


#: Why the pgvector tests skip on a machine without a server that has it.
NO_PGVECTOR = needs.NO_PGVECTOR


@pytest.fixture(scope="module")
def pgvector_server() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL with pgvector for the module's tests (skipped when there is none)."""
    if find_pg_bin(with_vector=True) is None:
        pytest.skip(NO_PGVECTOR)
    with postgres_cluster(with_vector=True) as server:
        yield server


@pytest.fixture
def make_pg_vector(pgvector_server: PostgresServer) -> MakeVector:
    """Build vector memories on the module's pgvector server, in namespaces of this test's own."""
    prefix = f"t{uuid.uuid4().hex[:12]}"

    def make(**options: Any) -> VectorMemory:
        options.setdefault("vectors", pgvector_server.url)
        options.setdefault("embeddings", f"{__name__}:WordEmbeddings")
        options["namespace"] = (prefix, *options.get("namespace", ("default",)))
        return VectorMemory(**options)

    return make
