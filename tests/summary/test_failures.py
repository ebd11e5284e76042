"""A failing LLM loses nothing: the summary stays, the turns stay, the fold comes back later."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from memories import LLMError, SummaryBufferMemory, SummaryMemory
from memories.kernel.tokens import CharCounter
from memories.short_term.summary.memory import SUMMARY_PROMPT, SummaryState
from tests.helpers import joined
from tests.summary.fakes import EMPTY, HANG, RAISE, ScriptedLLM

LIMIT = 100
COUNT = CharCounter()


def turn(i: int) -> tuple[str, str]:
    return f"question {i:03d} about the garden", f"answer {i:03d}: water the roses weekly"


def save(memory: SummaryBufferMemory | SummaryMemory, i: int) -> None:
    question, answer = turn(i)
    memory.save_context({"input": question}, {"output": answer})


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    model = ScriptedLLM()
    yield model
    model.release.set()  # frees a call abandoned on timeout


def shown_tokens(memory: SummaryBufferMemory) -> int:
    turns = [m for m in memory.buffer_as_messages if isinstance(m, HumanMessage | AIMessage)]
    return COUNT(turns)


@pytest.mark.parametrize("failure", [RAISE, EMPTY, HANG], ids=["raise", "empty", "timeout"])
def test_a_failed_fold_keeps_summary_and_turns(llm: ScriptedLLM, failure: str) -> None:
    memory = SummaryBufferMemory(
        llm=llm, max_token_limit=LIMIT, token_counter="chars", llm_timeout=0.05
    )
    i = 0
    while llm.calls < 1:
        save(memory, i)
        i += 1
    assert memory.moving_summary_buffer == "summary 1"
    before = memory.status()

    llm.script = [failure]
    while llm.calls < 2:
        save(memory, i)
        i += 1
    status = memory.status()
    assert memory.moving_summary_buffer == "summary 1"
    assert status.folded == before.folded
    assert status.failures == 1 and status.last_error
    assert status.unfolded_messages > before.unfolded_messages
    # Nothing folded, nothing dropped: every unfolded turn is still in the log after `folded`.
    unfolded = memory.chat_memory.entries(after=status.folded)
    assert len(unfolded) == status.unfolded_messages


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (RAISE, "ScriptedLLM failed: ConnectionError: the provider is down"),
        (EMPTY, "ScriptedLLM returned empty text"),
        (HANG, "ScriptedLLM gave no answer within 0.05 s"),
    ],
    ids=["raise", "empty", "timeout"],
)
def test_the_error_says_what_failed(llm: ScriptedLLM, failure: str, message: str) -> None:
    memory = SummaryMemory(llm=llm, llm_timeout=0.05)
    llm.script = [failure]
    save(memory, 0)
    assert message in str(memory.status().last_error)


def test_while_folding_fails_loading_stays_within_the_limit(
    llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    llm.default = RAISE
    memory = SummaryBufferMemory(llm=llm, max_token_limit=LIMIT, token_counter="chars")
    with caplog.at_level(logging.WARNING, logger="memories.short_term.summary.memory"):
        for i in range(12):
            save(memory, i)
        shown = memory.buffer_as_messages
    assert memory.status().unfolded_tokens > LIMIT
    assert shown_tokens(memory) <= LIMIT
    assert isinstance(shown[0], HumanMessage)
    assert turn(11)[1] in str(shown[-1].content)
    assert any("showing the newest" in r.getMessage() for r in caplog.records)
    assert any("folding" in r.getMessage() and "failed" in r.getMessage() for r in caplog.records)


def test_after_an_outage_every_turn_reaches_the_summary(llm: ScriptedLLM) -> None:
    llm.script = [RAISE] * 6
    memory = SummaryBufferMemory(llm=llm, max_token_limit=LIMIT, token_counter="chars")
    i = 0
    while llm.script:
        save(memory, i)
        i += 1
    for _ in range(20):  # the backoff ends within 16 turns
        save(memory, i)
        i += 1
    status = memory.status()
    assert status.failures == 0 and status.last_error is None
    assert status.unfolded_tokens <= LIMIT
    # Each question is either in a prompt that built the summary or still shown.
    prompts = "\n".join(llm.prompts[6:])
    shown = memory.buffer_as_str
    for j in range(i):
        assert turn(j)[0] in prompts or turn(j)[0] in shown, j


def test_retries_back_off_then_resume(llm: ScriptedLLM) -> None:
    llm.default = RAISE
    memory = SummaryBufferMemory(llm=llm, max_token_limit=LIMIT, token_counter="chars")
    i = 0
    while memory.status().unfolded_tokens <= LIMIT:
        save(memory, i)
        i += 1
    attempts = [llm.calls]
    for _ in range(16):
        save(memory, i)
        i += 1
        attempts.append(llm.calls)
    # Tries on the turns 1, 2, 4, 8 and 16 of the outage, then every 16th.
    assert attempts == [1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5]
    assert memory.status().failures == 5


def test_prune_retries_at_once_and_raises(llm: ScriptedLLM) -> None:
    llm.script = [RAISE, RAISE]
    memory = SummaryBufferMemory(llm=llm, max_token_limit=LIMIT, token_counter="chars")
    i = 0
    while llm.calls == 0:
        save(memory, i)
        i += 1
    with pytest.raises(LLMError, match="provider is down"):
        memory.prune()  # in backoff, but an explicit prune tries anyway
    assert llm.calls == 2
    memory.prune()
    assert memory.status().failures == 0 and memory.moving_summary_buffer == "summary 3"


def test_async_fold_failure_is_handled_like_sync(llm: ScriptedLLM) -> None:
    llm.script = [RAISE]
    memory = SummaryMemory(llm=llm)

    async def go() -> None:
        await memory.asave_context({"input": "hi"}, {"output": "hello"})
        assert memory.status().failures == 1
        assert (await memory.aload_memory_variables({}))["history"] == "Human: hi\nAI: hello"
        await memory.asave_context({"input": "again"}, {"output": "sure"})

    asyncio.run(go())
    assert memory.buffer == "summary 2" and memory.status().failures == 0
    with pytest.raises(LLMError):
        llm.script = [RAISE]
        memory.chat_memory.append([HumanMessage("x")])
        asyncio.run(memory.aprune())


def test_async_timeout(llm: ScriptedLLM) -> None:
    llm.script = [HANG]
    memory = SummaryMemory(llm=llm, llm_timeout=0.05)

    async def go() -> None:
        await memory.asave_context({"input": "hi"}, {"output": "hello"})
        # The abandoned call holds an executor thread that asyncio.run waits for.
        llm.release.set()

    asyncio.run(go())
    assert "no answer within" in str(memory.status().last_error)
    assert memory.load_memory_variables({})["history"] == "Human: hi\nAI: hello"


def test_folding_never_separates_a_tool_call_from_its_result(llm: ScriptedLLM) -> None:
    memory = SummaryBufferMemory(llm=llm, max_token_limit=60, token_counter="chars")
    for i in range(8):
        memory.chat_memory.append(
            [
                HumanMessage(f"what is the weather in city {i}?"),
                AIMessage("", tool_calls=[{"name": "weather", "args": {"city": i}, "id": f"c{i}"}]),
                ToolMessage(f"sunny in city {i}", tool_call_id=f"c{i}"),
            ]
        )
        memory.save_context({"input": f"thanks {i}"}, {"output": f"you are welcome {i}"})
        turns = [m for m in memory.buffer_as_messages if m.type != "system"]
        assert not turns or isinstance(turns[0], HumanMessage)
        calls = {c["id"] for m in turns if isinstance(m, AIMessage) for c in m.tool_calls}
        results = {m.tool_call_id for m in turns if isinstance(m, ToolMessage)}
        assert calls == results
    assert llm.calls > 0


def test_a_summary_state_plan_cuts_only_between_exchanges() -> None:
    state = SummaryState(
        seqs=(1, 2, 3, 4, 5, 6), counts=(10,) * 6, starts=(True, False, False, True, False, True)
    )
    assert state.plan(high=60, low=30, chunk=1000) == 0
    assert state.plan(high=50, low=30, chunk=1000) == 3
    assert state.plan(high=50, low=10, chunk=1000) == 5
    assert state.plan(high=50, low=0, chunk=1000) == 5  # the newest exchange stays
    assert state.plan(high=0, low=0, chunk=1000) == 6  # unless it is over the limit itself
    assert state.plan(high=50, low=0, chunk=35) == 3  # at most one chunk per call
    assert state.plan(high=50, low=0, chunk=5) == 3  # but at least one exchange
    assert state.window(60) == 0 and state.window(30) == 3 and state.window(5) == 6


def test_a_summary_state_round_trips_through_json() -> None:
    state = SummaryState(
        summary="s", folded=3, last=5, seqs=(4, 5), counts=(7, 8), starts=(True, False),
        counter="chars", failures=2, retry_in=1, last_error="boom",
    )  # fmt: skip
    assert SummaryState.from_state(state.to_state()) == state


def test_a_message_larger_than_the_limit_is_clipped_in_the_fold_prompt(llm: ScriptedLLM) -> None:
    memory = SummaryBufferMemory(llm=llm, max_token_limit=LIMIT, token_counter="chars")
    huge = "word " * 5000  # about 6,000 tokens
    memory.save_context({"input": huge}, {"output": "that is long"})
    save(memory, 1)
    assert llm.calls == 1
    assert len(llm.prompts[0]) < len(SUMMARY_PROMPT.template) + 8 * LIMIT
    assert "[...]" in llm.prompts[0]
    # The log itself is untouched.
    assert memory.chat_memory.entries()[0].message.content == huge


def test_threads_saving_at_once_lose_no_turn(llm: ScriptedLLM) -> None:
    memory = SummaryBufferMemory(llm=llm, max_token_limit=LIMIT, token_counter="chars")

    def talk(thread: int) -> None:
        for i in range(15):
            memory.save_context({"input": f"t{thread} q{i}"}, {"output": f"t{thread} a{i}"})

    threads = [threading.Thread(target=talk, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    joined(*threads)
    status = memory.status()
    assert len(memory.chat_memory.entries()) == 4 * 15 * 2
    assert status.failures == 0 and status.unfolded_tokens <= LIMIT
    prompts = "\n".join(llm.prompts)
    shown = memory.buffer_as_str
    for t in range(4):
        for i in range(15):
            assert f"t{t} q{i}\n" in prompts or f"t{t} q{i}\n" in shown + "\n", (t, i)


@pytest.mark.parametrize("kind", ["summary_buffer", "conversation_entity", "conversation_kg"])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_turn_whose_state_write_fails_is_not_kept_half_saved(
    kind: str, asynchronous: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn and the work it owes are one transaction on both paths (async kept the turn)."""
    from memories import SQLiteHistory, create_memory
    from tests.entities.fakes import RuleModel

    def save_state(self: SQLiteHistory, *args: object) -> None:
        raise RuntimeError("disk full")

    async def asave_state(self: SQLiteHistory, *args: object) -> None:
        raise RuntimeError("disk full")

    history = SQLiteHistory(tmp_path / "h.db", session_id="s")
    llm = ScriptedLLM() if kind == "summary_buffer" else RuleModel()
    memory = create_memory({"type": kind, "llm": llm, "chat_memory": history})
    monkeypatch.setattr(SQLiteHistory, "save_state", save_state)
    monkeypatch.setattr(SQLiteHistory, "asave_state", asave_state)
    inputs, outputs = {"input": "Jane works in Paris"}, {"output": "Nice."}
    with pytest.raises(RuntimeError, match="disk full"):
        if asynchronous:
            asyncio.run(memory.asave_context(inputs, outputs))
        else:
            memory.save_context(inputs, outputs)
    assert history.messages == []
