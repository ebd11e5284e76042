"""A spent budget defers the entity and knowledge-graph memories' updates: no failure counted.

The budget refuses a call before it reaches the model. The turn's update
waits, queued; ``status()`` says why (``deferred``) and counts no failure, the
usage recorded in the history's database counts no failed call, and nothing
is logged as a failure. The next period runs what waited, and the knowledge
is what an unbudgeted memory holds.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from memories import ConversationEntityMemory, ConversationKGMemory, SQLiteHistory
from memories.kernel.accounting import Budget
from tests.entities.fakes import RuleModel
from tests.retention.conftest import Clock

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TURNS = [
    ("Jane works in Paris with Tom", "Nice."),
    ("Tom plays the piano", "Lovely."),
    ("Jane and Tom moved to Rome", "Big change!"),
]
KINDS = [ConversationEntityMemory, ConversationKGMemory]


def _knowledge(memory: Any) -> Any:
    if isinstance(memory, ConversationKGMemory):
        return sorted(memory.kg.get_triples())
    return {name: memory.entity_store.get(name) for name in ("Jane", "Tom", "Paris", "Rome")}


def _memory(kind: type, folder: Path, session: str, **options: Any) -> Any:
    history = SQLiteHistory(folder / "chat.db", session_id=session)
    options.setdefault("llm", RuleModel())
    return kind(chat_memory=history, **options)


def _converse(memory: Any) -> None:
    for question, answer in TURNS:
        memory.load_memory_variables({"input": question})
        memory.save_context({"input": question}, {"output": answer})


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_a_refused_call_defers_the_update_and_counts_no_failure(
    kind: type, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    steady = _memory(kind, tmp_path, "steady")
    _converse(steady)
    clock = Clock()
    budgeted = _memory(kind, tmp_path, "budgeted", budget=Budget(calls=3, per="day", clock=clock))
    with caplog.at_level(logging.INFO):
        _converse(budgeted)

    status = budgeted.status()
    assert status.pending > 0 and status.deferred is not None and "budget" in status.deferred
    assert (status.failures, status.last_error) == (0, None)
    assert budgeted.model_usage() == status.model
    assert (status.model.calls, status.model.failures) == (3, 0)  # no call past the budget
    store = budgeted.usage_store
    assert store is not None
    recorded = store.usage_totals("budgeted")[budgeted.usage_name()]["all"]
    assert (recorded.calls, recorded.failures) == (3, 0)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("deferred" in r.getMessage() for r in caplog.records)

    clock.minutes(24 * 60)  # the next day: the budget allows the calls again
    while not budgeted.flush():
        clock.minutes(24 * 60)
    assert _knowledge(budgeted) == _knowledge(steady)
    assert budgeted.status().failures == 0


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_async_saves_defer_alike(kind: type, tmp_path: Path) -> None:
    budgeted = _memory(kind, tmp_path, "s", budget=Budget(calls=1, per="day", clock=Clock()))

    async def converse() -> Any:
        for question, answer in TURNS:
            await budgeted.aload_memory_variables({"input": question})
            await budgeted.asave_context({"input": question}, {"output": answer})
        return await budgeted.astatus()

    status = asyncio.run(converse())
    assert status.pending == len(TURNS) and status.deferred is not None
    assert (status.failures, status.last_error, status.model.failures) == (0, None, 0)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_a_failed_call_under_a_budget_is_still_a_failure(kind: type, tmp_path: Path) -> None:
    budget = Budget(calls=100, per="day", clock=Clock())
    down = RuleModel(fail_calls=set(range(1, 100)))
    memory = _memory(kind, tmp_path, "s", budget=budget, llm=down)
    _converse(memory)
    status = memory.status()
    assert status.failures == len(TURNS) and status.last_error is not None
    assert status.deferred is None
