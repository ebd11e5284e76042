"""Shared fixtures: every history backend, and fake models that work offline."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory

from memories.kernel.paths import DATA_DIR_ENV
from memories.stores.history import ChatHistory, InMemoryHistory, LangChainHistory, SQLiteHistory
from tests import needs
from tests.postgres import find_pg_bin, postgres_server

HistoryFactory = Callable[[str], ChatHistory]

# As MiniLMEmbeddings does before it imports onnxruntime: the tests' own imports of it
# (importorskip) would otherwise leave its telemetry file `.ses` in $TMPDIR.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


@pytest.fixture(autouse=True, scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Default files go to a temporary folder, never the user's (nor the cwd)."""
    folder = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(DATA_DIR_ENV, str(folder))
        yield folder


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL server for one test module (skipped where none is installed)."""
    if find_pg_bin() is None:
        pytest.skip(needs.NO_POSTGRES)
    with postgres_server() as url:
        yield url


HISTORY_KINDS = ("memory", "sqlite", "langchain")


def make_history_factory(kind: str, tmp_path: Path) -> HistoryFactory:
    """A function session_id -> history of the given backend kind."""
    if kind == "memory":
        return lambda session_id: InMemoryHistory(session_id=session_id)
    if kind == "sqlite":
        return lambda session_id: SQLiteHistory(tmp_path / "memories.db", session_id=session_id)
    if kind == "langchain":
        return lambda session_id: LangChainHistory(InMemoryChatMessageHistory())
    raise ValueError(kind)


@pytest.fixture(params=HISTORY_KINDS)
def history_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HistoryFactory]:
    """Each history backend in turn."""
    yield make_history_factory(request.param, tmp_path)


@pytest.fixture
def history(history_factory: HistoryFactory) -> ChatHistory:
    """A fresh history of each backend."""
    return history_factory("session-1")
