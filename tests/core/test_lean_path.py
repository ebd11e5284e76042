"""Pay only for what you use: what a memory does not use is decided once and never runs on a turn.

Spies stand in for the machinery (the retention's horizon, an accounting
operation) and count how often a save and a load reach it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memories import (
    BufferMemory,
    InMemoryHistory,
    SQLiteHistory,
    SummaryBufferMemory,
    TokenBufferMemory,
    WindowMemory,
)
from memories.core import base
from memories.core.base import ChatMemory
from memories.kernel import accounting
from memories.testing import ScriptedChatModel

PLAIN = {
    "buffer": lambda **kw: BufferMemory(**kw),
    "window": lambda **kw: WindowMemory(k=2, **kw),
    "token_buffer": lambda **kw: TokenBufferMemory(max_token_limit=40, **kw),
}


def _turns(memory: ChatMemory, *, run_async: bool) -> None:
    """Three saves, each followed by a load, sync or async."""

    async def both() -> None:
        for i in range(3):
            await memory.asave_context({"input": f"question {i}"}, {"output": f"answer {i}"})
            await memory.aload_memory_variables({})

    if run_async:
        asyncio.run(both())
        return
    for i in range(3):
        memory.save_context({"input": f"question {i}"}, {"output": f"answer {i}"})
        memory.load_memory_variables({})


@pytest.fixture
def horizons(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """Every horizon an in-memory history computes (for itself or under a retention)."""
    asked: list[int | None] = []
    original = InMemoryHistory.expired_through

    def spied(self: InMemoryHistory, *args: Any, **kwargs: Any) -> int | None:
        asked.append(original(self, *args, **kwargs))
        return asked[-1]

    monkeypatch.setattr(InMemoryHistory, "expired_through", spied)
    monkeypatch.setattr(
        InMemoryHistory, "horizon", lambda self: asked.append(None)
    )  # a plain history's own horizon: asked only when a memory reaches for it
    return asked


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("kind", ["token_buffer", "summary_buffer"])
def test_a_memory_without_retention_never_reaches_for_a_horizon(
    horizons: list[int | None], kind: str, run_async: bool
) -> None:
    def build(**kw: Any) -> ChatMemory:
        if kind == "token_buffer":
            return TokenBufferMemory(max_token_limit=40, **kw)
        model = ScriptedChatModel(responses=["a summary"] * 10)
        return SummaryBufferMemory(llm=model, max_token_limit=30, token_counter="chars", **kw)

    _turns(build(), run_async=run_async)
    assert horizons == []
    _turns(build(retention={"keep_messages": 4}), run_async=run_async)
    assert horizons  # the spy sees a memory that has a retention


@pytest.fixture
def operations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every accounting operation a memory starts."""
    started: list[str] = []
    original = base.operation

    def spied(ledger: Any, name: str, /, **kwargs: Any) -> Any:
        started.append(name)
        return original(ledger, name, **kwargs)

    monkeypatch.setattr(base, "operation", spied)
    monkeypatch.setattr(accounting, "tracer", lambda: None)  # as with no provider set
    monkeypatch.setattr(base, "tracer", lambda: None, raising=False)
    return started


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("kind", sorted(PLAIN))
def test_a_memory_with_nothing_to_count_starts_no_operation(
    operations: list[str], kind: str, run_async: bool
) -> None:
    memory = PLAIN[kind]()
    _turns(memory, run_async=run_async)
    assert operations == []
    assert memory.usage().totals == {}


@pytest.mark.parametrize("kind", sorted(PLAIN))
def test_a_memory_on_a_database_counts_its_transactions(
    operations: list[str], kind: str, tmp_path: Path
) -> None:
    memory = PLAIN[kind](chat_memory=SQLiteHistory(path=tmp_path / "chat.db", session_id="s"))
    _turns(memory, run_async=False)
    assert operations.count("save_context") == 3
    assert memory.usage().totals["store"].calls >= 6


def test_a_memory_that_calls_a_model_counts_on_any_history(operations: list[str]) -> None:
    model = ScriptedChatModel(responses=["a summary"] * 10)
    memory = SummaryBufferMemory(llm=model, max_token_limit=10, token_counter="chars")
    _turns(memory, run_async=False)
    assert operations.count("save_context") == 3
    assert memory.model_usage().calls >= 1


def test_moving_a_memory_onto_a_database_starts_counting(
    operations: list[str], tmp_path: Path
) -> None:
    """Decided once per configuration: a new history is a new decision."""
    memory = WindowMemory(k=2)
    _turns(memory, run_async=False)
    assert operations == []
    memory.chat_memory = SQLiteHistory(path=tmp_path / "chat.db", session_id="s")
    _turns(memory, run_async=False)
    assert operations.count("save_context") == 3


class _NewestFirstOnly(list[Any]):
    """A log that may be read from its newest end only: reading it forward raises."""

    def __iter__(self) -> Any:
        raise AssertionError("the whole log was read forward")


def test_a_keep_messages_horizon_reads_the_log_from_its_newest_end() -> None:
    """A turn's horizon costs ``keep_messages`` records, not the whole log."""
    history = InMemoryHistory()
    memory = TokenBufferMemory(
        max_token_limit=40, chat_memory=history, retention={"keep_messages": 4}
    )
    _turns(memory, run_async=False)
    history._records = _NewestFirstOnly(list.__iter__(history._records))
    memory.save_context({"input": "question 3"}, {"output": "answer 3"})
    assert memory.chat_memory.horizon() == 4  # the newest 4 of 8 messages kept: 1-4 expired


def test_without_a_provider_a_turn_never_asks_opentelemetry_for_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API's getter reads the environment on every call; no turn should pay for that."""
    from opentelemetry import trace

    asked: list[str] = []
    getter = trace.get_tracer_provider
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)  # as in a process that set none
    monkeypatch.setattr(accounting, "_tracer", None)
    monkeypatch.setattr(accounting, "_tracer_checked", False)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: asked.append("get") or getter())
    memory = WindowMemory(k=2)
    _turns(memory, run_async=False)
    assert accounting.tracer() is None
    assert asked == []
