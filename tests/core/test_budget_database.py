"""A budget held in the memory's SQL database: one cap for every process, kept over restarts.

Real worker processes share one SQLite file (and, once, a real PostgreSQL
server); each builds its own memory and clock, as a web app's workers do.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage

from memories import ProfileMemory, SQLiteHistory, SummaryBufferMemory
from memories.errors import BudgetExceededError
from memories.kernel.accounting import Budget
from memories.testing import ScriptedChatModel
from tests import needs
from tests.postgres import find_pg_bin

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}
NOON = 1_800_000_000.0  # a Friday, 08:00 UTC: an hour's period starts on the hour
PATCH = '[{"op": "add", "path": "/name", "value": "Ada"}]'

#: One worker process: its own profile memory on the shared database, its own clock.
_WORKER = """
import json, sys
from langchain_core.messages import AIMessage
from memories import ProfileMemory
from memories.errors import BudgetExceededError
from memories.kernel.accounting import Budget
from memories.testing import ScriptedChatModel

url, namespace, calls, now, turns = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:6])
reply = AIMessage(sys.argv[6], usage_metadata={"input_tokens": 40, "output_tokens": 5,
                                               "total_tokens": 45})
memory = ProfileMemory(
    schema={"type": "object", "properties": {"name": {"type": "string"}}},
    llm=ScriptedChatModel(responses=[reply], echo=False),
    update_method="json",
    url=url,
    namespace=("users", namespace),
    budget=Budget(calls=int(calls), per="hour", clock=lambda: now),
)
for i in range(int(turns)):
    memory.save_context({"input": f"turn {i}: I'm Ada"}, {"output": "Hi Ada"})
print(json.dumps({"calls": memory.model_usage().calls}))
"""


def _workers(url: str, namespace: str, *, calls: int, now: float, turns: list[int]) -> list[int]:
    """Run one worker process per entry of ``turns``, all at once; the model calls of each."""
    root = Path(__file__).resolve().parents[2]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, url, namespace, str(calls), str(now), str(n), PATCH],
            cwd=root,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in turns
    ]
    made = []
    for process in processes:
        out, _ = process.communicate(timeout=300)
        assert process.returncode == 0
        made.append(json.loads(out.strip().splitlines()[-1])["calls"])
    return made


def _profile(url: str, namespace: str, *, calls: int, now: float) -> ProfileMemory:
    usage = {"input_tokens": 40, "output_tokens": 5, "total_tokens": 45}
    reply = AIMessage(PATCH, usage_metadata=usage)
    return ProfileMemory(
        schema=SCHEMA,
        llm=ScriptedChatModel(responses=[reply], echo=False),
        update_method="json",
        url=url,
        namespace=("users", namespace),
        budget=Budget(calls=calls, per="hour", clock=lambda: now),
    )


def _two_workers_spend_one_cap(url: str) -> None:
    namespace = f"u{uuid.uuid4().hex[:8]}"
    made = _workers(url, namespace, calls=3, now=NOON, turns=[4, 4])
    assert sum(made) == 3  # 3 calls in all, not 3 per process
    waiting = _profile(url, namespace, calls=3, now=NOON)
    status = waiting.status()
    assert status.deferred is not None and "3 of 3 calls" in status.deferred
    # 8 turns; an update folds every turn queued by then (the other worker's too), so how
    # many the 3 calls formed depends on the interleaving: the rest wait, none failed
    assert status.pending > 0 and status.failures == 0
    assert waiting.model_usage().calls == 0
    later = _profile(url, namespace, calls=3, now=NOON + 3600)  # the next hour
    later.save_context({"input": "And I like tea"}, {"output": "Noted"})
    assert later.model_usage().calls == 1  # every queued turn formed in one update
    after = later.status()
    assert after.pending == 0 and after.deferred is None and after.failures == 0
    assert later.get() == {"name": "Ada"}


def test_two_processes_on_one_sqlite_file_make_the_budgets_calls_in_all(tmp_path: Path) -> None:
    _two_workers_spend_one_cap(f"sqlite:///{tmp_path / 'shared.db'}")


def test_a_restarted_process_keeps_the_periods_spending(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    namespace = f"u{uuid.uuid4().hex[:8]}"
    assert _workers(url, namespace, calls=2, now=NOON, turns=[3]) == [2]
    assert _workers(url, namespace, calls=2, now=NOON, turns=[3]) == [0]  # restarted: still spent
    assert _workers(url, "someone-else", calls=2, now=NOON, turns=[1]) == [1]  # per namespace
    assert _workers(url, namespace, calls=2, now=NOON + 3600, turns=[1]) == [1]


def test_an_explicit_refresh_is_spent_under_the_memorys_namespace(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'profile.db'}"
    memory = _profile(url, "ada", calls=1, now=NOON)
    memory.policy = "manual"
    memory.save_context({"input": "I'm Ada"}, {"output": "Hi"})
    assert memory.refresh().status == "updated"
    memory.save_context({"input": "Call me Ada Lovelace"}, {"output": "Sure"})
    with pytest.raises(BudgetExceededError, match=r"'users\.ada'.*1 of 1 calls"):
        memory.refresh()
    assert memory.usage().namespaces["users.ada"]["model"].calls == 1
    assert memory.status().pending == 1  # the turn waits for the next hour


def test_the_async_twins_spend_in_the_database_too(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'profile.db'}"

    async def two_workers() -> int:
        first, second = (_profile(url, "ada", calls=1, now=NOON) for _ in range(2))
        await first.asave_context({"input": "I'm Ada"}, {"output": "Hi"})
        await second.asave_context({"input": "Call me Ada Lovelace"}, {"output": "Sure"})
        status = await second.astatus()
        assert status.deferred is not None and status.pending == 1
        return first.model_usage().calls + second.model_usage().calls

    assert asyncio.run(two_workers()) == 1


def test_the_spending_keeps_one_row_per_namespace(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'profile.db'}"
    for hour in range(3):
        _profile(url, "ada", calls=5, now=NOON + 3600 * hour).save_context(
            {"input": "I'm Ada"}, {"output": "Hi"}
        )
    with sa.create_engine(url).connect() as connection:
        rows = connection.exec_driver_sql(
            "SELECT namespace, period_start, calls, tokens FROM memories_budget_spending"
        ).all()
    assert [tuple(row) for row in rows] == [("users.ada", int(NOON) + 7200, 1, 45)]


def test_a_chat_memory_spends_in_its_histories_database_within_the_turn(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    usage = {"input_tokens": 60, "output_tokens": 5, "total_tokens": 65}
    reply = AIMessage("A summary.", usage_metadata=usage)

    def worker() -> SummaryBufferMemory:
        return SummaryBufferMemory(
            llm=ScriptedChatModel(responses=[reply], echo=False),
            max_token_limit=10,
            token_counter="chars",
            chat_memory=SQLiteHistory(path, session_id="s1"),
            budget=Budget(calls=1, per="day", clock=lambda: NOON),
        )

    first, second = worker(), worker()  # two workers serving one session
    first.save_context({"input": "first turn, long enough to fold"}, {"output": "ok one"})
    second.save_context({"input": "second turn, long enough to fold"}, {"output": "ok two"})
    assert first.model_usage().calls + second.model_usage().calls == 1
    status = second.status()
    assert status.deferred is not None and "1 of 1 calls" in status.deferred
    contents = [m.content for m in SQLiteHistory(path, session_id="s1").messages]
    assert "second turn, long enough to fold" in contents  # the turn is kept
    with sa.create_engine(f"sqlite:///{path}").connect() as connection:
        row = connection.exec_driver_sql(
            "SELECT namespace, calls, tokens FROM memories_budget_spending"
        ).one()
    assert tuple(row) == ("s1", 1, 65)  # kept beside the session's log


@pytest.mark.server
@pytest.mark.skipif(find_pg_bin() is None, reason=needs.NO_POSTGRES)
def test_two_processes_on_postgresql_make_the_budgets_calls_in_all(postgres_url: str) -> None:
    _two_workers_spend_one_cap(postgres_url)
