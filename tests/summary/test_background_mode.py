"""summarize="background": saving and loading make no LLM call; folds run after a quiet period."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memories import SQLiteHistory, SummaryBufferMemory, SummaryMemory
from memories.kernel.background import Debouncer
from tests.summary.fakes import RAISE, ScriptedLLM

LIMIT = 100
QUIET = 60.0  # no test waits for it: folds run through flush()


@pytest.fixture
def scheduler() -> Iterator[Debouncer]:
    debouncer = Debouncer(delay=QUIET, name="test-bg")
    yield debouncer
    debouncer.close(timeout=10)


def save(memory: SummaryBufferMemory | SummaryMemory, i: int) -> None:
    memory.save_context({"input": f"question {i} about trains"}, {"output": f"answer {i}: go"})


def background_buffer(
    llm: ScriptedLLM, scheduler: Debouncer, **options: object
) -> SummaryBufferMemory:
    return SummaryBufferMemory(
        llm=llm,
        max_token_limit=LIMIT,
        summarize="background",
        debounce=QUIET,
        scheduler=scheduler,
        **options,  # type: ignore[arg-type]
    )


def test_the_hot_path_makes_no_llm_call(scheduler: Debouncer) -> None:
    llm = ScriptedLLM()
    memory = background_buffer(llm, scheduler)
    for i in range(12):
        save(memory, i)
        memory.load_memory_variables({})
    assert llm.calls == 0
    assert memory.status().unfolded_tokens > LIMIT
    assert memory.status().background is not None
    assert memory.status().background.pending == 1  # type: ignore[union-attr]


def test_a_burst_of_turns_is_folded_by_one_call_on_the_worker(scheduler: Debouncer) -> None:
    llm = ScriptedLLM()
    memory = background_buffer(llm, scheduler)
    for i in range(12):
        save(memory, i)
    assert memory.flush(timeout=10)
    assert llm.calls == 1 and llm.threads[0].startswith("test-bg-0")
    assert memory.moving_summary_buffer == "summary 1"
    status = memory.status()
    assert status.unfolded_tokens <= LIMIT * 0.4
    assert status.background is not None and status.background.completed == 1


def test_each_new_turn_replaces_the_pending_fold(scheduler: Debouncer) -> None:
    llm = ScriptedLLM()
    memory = background_buffer(llm, scheduler)
    for i in range(12):
        save(memory, i)
        assert scheduler.status().pending == 1
    assert scheduler.status().dropped == 0
    memory.flush(timeout=10)
    # One fold, and it saw the last turn's state (so it folded down to the low-water mark).
    assert llm.calls == 1 and scheduler.status().completed == 1
    assert memory.status().unfolded_tokens <= LIMIT * 0.4


def test_the_fold_runs_by_itself_once_the_session_is_quiet() -> None:
    llm = ScriptedLLM()
    with Debouncer(delay=QUIET) as scheduler:
        memory = background_buffer(llm, scheduler)
        memory.debounce = 0.01
        for i in range(12):
            save(memory, i)
        quiet = threading.Event()
        for _ in range(1000):  # polls, with no timing assertion
            if scheduler.status().pending == 0 and scheduler.status().running == 0:
                break
            quiet.wait(0.01)
        assert scheduler.status().completed >= 1
    assert llm.calls >= 1 and memory.moving_summary_buffer.startswith("summary")


def test_loading_while_a_fold_is_pending_stays_within_the_limit(
    scheduler: Debouncer, caplog: pytest.LogCaptureFixture
) -> None:
    memory = background_buffer(ScriptedLLM(), scheduler, token_counter="chars")
    for i in range(12):
        save(memory, i)
    with caplog.at_level(logging.INFO, logger="memories.short_term.summary.memory"):
        shown = memory.buffer_as_messages
    assert sum(memory._counter([m]) for m in shown) <= LIMIT
    assert "question 11 about" in str(shown[-2].content)
    assert any("a fold has not run yet" in r.getMessage() for r in caplog.records)


def test_a_failing_background_fold_is_logged_and_reported(
    scheduler: Debouncer, caplog: pytest.LogCaptureFixture
) -> None:
    llm = ScriptedLLM(script=[RAISE])
    memory = background_buffer(llm, scheduler)
    for i in range(12):
        save(memory, i)
    with caplog.at_level(logging.WARNING):
        memory.flush(timeout=10)
    status = memory.status()
    assert status.failures == 1 and "provider is down" in str(status.last_error)
    assert status.background is not None and status.background.failed == 1
    assert "provider is down" in str(status.background.last_error)
    # The library's own error (LLMError) is one line; its traceback only at debug level.
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "provider is down" in errors[0].getMessage()
    assert not errors[0].exc_info
    # The next turn schedules the fold again, and it works.
    save(memory, 12)
    memory.flush(timeout=10)
    assert memory.status().failures == 0 and memory.moving_summary_buffer == "summary 2"


def test_summary_memory_shows_turns_until_they_are_folded(scheduler: Debouncer) -> None:
    llm = ScriptedLLM()
    memory = SummaryMemory(llm=llm, summarize="background", debounce=QUIET, scheduler=scheduler)
    save(memory, 0)
    save(memory, 1)
    assert memory.load_memory_variables({})["history"] == (
        "Human: question 0 about trains\nAI: answer 0: go\n"
        "Human: question 1 about trains\nAI: answer 1: go"
    )
    memory.flush(timeout=10)
    assert llm.calls == 1
    assert memory.load_memory_variables({})["history"] == "summary 1"


def test_async_saves_schedule_the_same_fold(scheduler: Debouncer) -> None:
    llm = ScriptedLLM()
    memory = background_buffer(llm, scheduler)

    async def go() -> None:
        for i in range(12):
            await memory.asave_context({"input": f"question {i}"}, {"output": "answer"})
        await memory.aload_memory_variables({})

    asyncio.run(go())
    assert llm.calls == 0
    memory.flush(timeout=10)
    assert llm.calls == 1


def test_clear_drops_the_pending_fold(scheduler: Debouncer) -> None:
    llm = ScriptedLLM()
    memory = background_buffer(llm, scheduler)
    for i in range(12):
        save(memory, i)
    memory.clear()
    memory.flush(timeout=10)
    assert llm.calls == 0 and memory.moving_summary_buffer == ""


def test_clear_during_a_running_fold_discards_its_result(scheduler: Debouncer) -> None:
    started, finish = threading.Event(), threading.Event()

    class SlowLLM(ScriptedLLM):
        def _call(self, prompt: str, *args: object, **kwargs: object) -> str:
            started.set()
            finish.wait(10)
            return "stale summary"

    memory = background_buffer(SlowLLM(), scheduler)
    for i in range(12):
        save(memory, i)
    scheduler.flush(timeout=0)  # make it due now, without waiting
    assert started.wait(10)
    memory.clear()
    finish.set()
    memory.flush(timeout=10)
    assert memory.moving_summary_buffer == "" and memory.chat_memory.entries() == []


def test_close_flushes_and_later_turns_fold_inline(scheduler: Debouncer) -> None:
    llm = ScriptedLLM()
    memory = background_buffer(llm, scheduler)
    for i in range(12):
        save(memory, i)
    assert memory.close(timeout=10)
    assert llm.calls == 1
    i = 12
    while llm.calls == 1:
        save(memory, i)
        i += 1
    assert llm.threads[-1].startswith(threading.current_thread().name)


def test_inline_mode_has_nothing_to_flush() -> None:
    memory = SummaryMemory(llm=ScriptedLLM())
    assert memory.flush() is True and memory.status().background is None


def test_background_folds_persist_for_a_restart(tmp_path: Path, scheduler: Debouncer) -> None:
    path = tmp_path / "chat.db"
    memory = background_buffer(
        ScriptedLLM(), scheduler, chat_memory=SQLiteHistory(path, session_id="s")
    )
    for i in range(12):
        save(memory, i)
    memory.flush(timeout=10)
    again = SummaryBufferMemory(
        llm=ScriptedLLM(), chat_memory=SQLiteHistory(path, session_id="s"), max_token_limit=LIMIT
    )
    assert again.moving_summary_buffer == "summary 1"
    assert again.load_memory_variables({}) == memory.load_memory_variables({})


def test_the_shared_scheduler_is_used_by_default() -> None:
    from memories.kernel.background import shared_debouncer

    llm = ScriptedLLM()
    memory = SummaryMemory(llm=llm, summarize="background", debounce=QUIET)
    save(memory, 0)
    assert shared_debouncer().status().pending >= 1
    assert memory.flush(timeout=10)
    assert llm.calls == 1 and llm.threads[0].startswith("memories-shared")


@pytest.mark.parametrize("path", ["sync", "async"])
def test_a_full_scheduler_folds_inline_without_deadlock(path: str) -> None:
    """With ``when_full="run_inline"`` the fold runs in the saving thread: the lock is free then."""
    scheduler = Debouncer(delay=QUIET, max_pending=1, when_full="run_inline")
    first = background_buffer(ScriptedLLM(), scheduler)
    save(first, 0)  # takes the one pending slot
    llm = ScriptedLLM()
    second = background_buffer(llm, scheduler)
    saved = threading.Event()

    def saving() -> None:
        for i in range(12):
            if path == "sync":
                save(second, i)
            else:
                turn = ({"input": f"question {i} about trains"}, {"output": f"answer {i}: go"})
                asyncio.run(second.asave_context(*turn))
        saved.set()

    threading.Thread(target=saving, daemon=True).start()
    try:
        # Not a timing assertion: a deadlocked save never sets the event.
        assert saved.wait(30), "saving deadlocked: the inline fold waited for the saver's lock"
    finally:
        scheduler.close(timeout=0 if not saved.is_set() else None)
    assert llm.calls >= 1 and second.status().unfolded_tokens <= LIMIT
