"""The background policy (a debounced update after a quiet period) and model timeouts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from memories import ProfileMemory
from memories.kernel.background import Debouncer
from tests.profile.fakes import USER_SCHEMA, ScriptedChatModel, prompt_text, tool_reply

NAME = {"op": "add", "path": "/name", "value": "Ada"}


@pytest.fixture
def scheduler() -> Iterator[Debouncer]:
    # A quiet period no test waits for: updates run when a test flushes.
    debouncer = Debouncer(delay=3600, name="profile-test")
    yield debouncer
    debouncer.close(timeout=10)


def make(url: str, replies: list[Any], scheduler: Debouncer, **options: Any) -> Any:
    model = ScriptedChatModel(replies=replies)
    memory = ProfileMemory(
        llm=model, url=url, schema=USER_SCHEMA, policy="background", scheduler=scheduler, **options
    )
    return memory, model


def test_a_burst_of_turns_costs_one_background_update(url: str, scheduler: Debouncer) -> None:
    memory, model = make(url, [tool_reply(NAME)], scheduler)
    for i in range(3):
        memory.save_context({"input": f"turn {i}"}, {"output": "ok"})
    assert model.prompts == [] and memory.status().pending == 3
    assert memory.status().background is not None
    assert memory.flush(timeout=30)
    assert len(model.prompts) == 1 and prompt_text(model.prompts[0]).count("Human: turn") == 3
    assert memory.get() == {"likes": [], "name": "Ada"} and memory.status().pending == 0
    assert scheduler.status().completed == 1


def test_a_failed_background_update_is_recorded_and_the_turns_kept(
    url: str, scheduler: Debouncer
) -> None:
    memory, _ = make(url, ["prose", "prose", "prose"], scheduler)
    memory.save_context({"input": "I'm Ada"}, {"output": "Hi"})
    assert memory.flush(timeout=30)
    status = memory.status()
    assert status.pending == 1 and status.last_failure is not None
    assert scheduler.status().failed == 0  # a recorded failure is not a crashed job


async def test_async_saves_schedule_too(url: str, scheduler: Debouncer) -> None:
    memory, model = make(url, [tool_reply(NAME)], scheduler)
    await memory.asave_context({"input": "I'm Ada"}, {"output": "Hi"})
    assert model.prompts == []
    assert memory.flush(timeout=30)
    assert await memory.aget() == {"likes": [], "name": "Ada"}


def test_after_close_turns_update_inline(url: str, scheduler: Debouncer) -> None:
    memory, model = make(url, [tool_reply(NAME)], scheduler)
    assert memory.close(timeout=30)
    memory.save_context({"input": "I'm Ada"}, {"output": "Hi"})
    assert len(model.prompts) == 1 and memory.get() == {"likes": [], "name": "Ada"}


def test_clear_drops_the_scheduled_update(url: str, scheduler: Debouncer) -> None:
    memory, model = make(url, [], scheduler)
    memory.save_context({"input": "I'm Ada"}, {"output": "Hi"})
    memory.clear()
    assert memory.flush(timeout=30)
    assert model.prompts == [] and memory.status().pending == 0


def test_flush_is_true_at_once_under_other_policies(url: str) -> None:
    memory = ProfileMemory(url=url, policy="manual")
    assert memory.flush() and memory.close()
    assert memory.status().background is None


def test_a_model_that_does_not_answer_in_time_is_a_recorded_failure(url: str) -> None:
    release = threading.Event()

    def hang(prompt: list[BaseMessage]) -> AIMessage:
        release.wait(60)
        return tool_reply(NAME)

    model = ScriptedChatModel(replies=[hang])
    memory = ProfileMemory(llm=model, url=url, llm_timeout=0.05)
    try:
        memory.save_context({"input": "I'm Ada"}, {"output": "Hi"})
    finally:
        release.set()
    failure = memory.history()[-1]
    assert failure.kind == "failed" and "gave no answer within 0.05 s" in (failure.error or "")
    assert memory.get() == {} and memory.status().pending == 1
