"""Edits by id through the memories: every chat memory's derived state follows them.

Issue 14: random sequences of appends, edits, deletes and trims, on every
history backend, with every chat memory reading one shared history, always
leave valid message sequences, token counts that match a recount, and no
trace of a removed message in what any memory shows (summaries included).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)

from memories import (
    BufferMemory,
    InvalidInputError,
    SummaryBufferMemory,
    SummaryMemory,
    TokenBufferMemory,
    WindowMemory,
)
from memories.core.base import ChatMemory
from memories.short_term.token_buffer import ConversationTokenBufferMemory, TokenWindow
from memories.stores.history import REMOVE_ALL_MESSAGES, ChatHistory, InMemoryHistory, SQLiteHistory
from tests.conftest import HISTORY_KINDS, make_history_factory

COUNTER = "chars"


def memories_on(history: ChatHistory) -> dict[str, ChatMemory]:
    """One of each chat memory, all reading and writing ``history``."""
    shared: dict[str, Any] = {"chat_memory": history, "return_messages": True}
    return {
        "buffer": BufferMemory(**shared),
        "window": WindowMemory(k=2, **shared),
        "token_buffer": TokenBufferMemory(max_token_limit=120, token_counter=COUNTER, **shared),
        "conversation_token_buffer": ConversationTokenBufferMemory(
            max_token_limit=90, token_counter=COUNTER, **shared
        ),
        "summary_buffer": SummaryBufferMemory(max_token_limit=150, token_counter=COUNTER, **shared),
        "summary": SummaryMemory(max_token_limit=150, token_counter=COUNTER, **shared),
    }


# -- the operations -----------------------------------------------------------------


class Script:
    """Applies random operations through the memories, with unique words to trace messages."""

    def __init__(self, memories: dict[str, ChatMemory]) -> None:
        self.memories = memories
        self.writer = memories["buffer"]
        self.counter = 0

    def word(self) -> str:
        self.counter += 1
        return f"w{self.counter}x"

    def turn(self, calls: int, with_ids: bool) -> None:
        n = self.counter
        ids = (lambda kind: f"{kind}-{n}") if with_ids else (lambda kind: None)
        if not with_ids and not calls:
            self.writer.save_context({"input": self.word()}, {"output": self.word()})
            return
        tool_calls = [
            {"name": "lookup", "args": {"q": self.word()}, "id": f"call-{n}-{i}"}
            for i in range(calls)
        ]
        messages: list[BaseMessage] = [HumanMessage(self.word(), id=ids("h"))]
        if calls:
            messages.append(AIMessage(self.word(), id=ids("c"), tool_calls=tool_calls))
            messages += [
                ToolMessage(self.word(), tool_call_id=c["id"], id=ids(f"t{i}"))
                for i, c in enumerate(tool_calls)
            ]
        messages.append(AIMessage(self.word(), id=ids("a")))
        self.writer.save_messages(messages)

    def shown(self) -> list[Any]:
        return self.writer.chat_memory.entries()

    def ref(self, pick: int) -> str | int | None:
        shown = self.shown()
        if not shown:
            return None
        entry = shown[pick % len(shown)]
        return entry.message.id if entry.message.id is not None else entry.seq

    def delete(self, pick: int, memory: str) -> None:
        ref = self.ref(pick)
        if ref is not None:
            self.memories[memory].delete_messages([ref])

    def edit(self, pick: int, memory: str) -> None:
        shown = self.shown()
        if not shown:
            return
        old = shown[pick % len(shown)].message
        new = old.model_copy(update={"content": self.word()})
        ref = old.id if old.id is not None else shown[pick % len(shown)].seq
        self.memories[memory].edit_message(ref, new)

    def remove_by_message(self, pick: int) -> None:
        shown = self.shown()
        ids = [e.message.id for e in shown if e.message.id is not None]
        if ids:
            self.writer.save_messages([RemoveMessage(id=ids[pick % len(ids)])])

    def keep_last(self, n: int, memory: str) -> None:
        self.memories[memory].keep_last(n)

    def remove_all(self) -> None:
        self.writer.save_messages([RemoveMessage(id=REMOVE_ALL_MESSAGES)])


MEMORY_NAMES = st.sampled_from(
    ["buffer", "window", "token_buffer", "conversation_token_buffer", "summary_buffer", "summary"]
)
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("turn"), st.integers(0, 2), st.booleans()),
        st.tuples(st.just("delete"), st.integers(0, 50), MEMORY_NAMES),
        st.tuples(st.just("edit"), st.integers(0, 50), MEMORY_NAMES),
        st.tuples(st.just("remove_by_message"), st.integers(0, 50)),
        st.tuples(st.just("keep_last"), st.integers(0, 6), MEMORY_NAMES),
        st.tuples(st.just("remove_all")),
    ),
    min_size=1,
    max_size=18,
)


# -- the checks ---------------------------------------------------------------------


def assert_valid_sequence(messages: list[BaseMessage], where: str) -> None:
    """No tool result without its call before it; no call without all its results."""
    calls: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage):
            calls |= {c["id"] for c in message.tool_calls if c["id"]}
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in calls, f"{where}: orphan result {message!r}"
            answered.add(message.tool_call_id)
    log_calls = calls
    assert log_calls <= answered, f"{where}: calls without results {log_calls - answered}"


def text_of(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(str(m.text) for m in value)
    return str(value)


def check(history: ChatHistory, memories: dict[str, ChatMemory], removed: set[str]) -> None:
    log = [e.message for e in history.entries()]
    assert_valid_sequence(log, "the log")
    log_words = set(text_of(log).split())
    for name, memory in memories.items():
        shown = memory.load_memory_variables({})["history"]
        words = set(text_of(shown).split())
        # Nothing removed or replaced shows again, in a window or in a summary.
        assert not (words & removed), f"{name} shows removed text {words & removed}"
        if name != "summary":
            messages = [m for m in shown if m.type != "system"]
            assert_valid_sequence(messages, name)
            assert {w for w in text_of(messages).split()} <= log_words, name
    for name in ("token_buffer", "conversation_token_buffer"):
        memory = memories[name]
        assert isinstance(memory, TokenBufferMemory)
        raw = history.load_state(memory.state_key)
        assert raw is not None
        window = TokenWindow.from_state(raw)
        by_seq = {e.seq: e.message for e in history.entries()}
        recount = [memory._counter([by_seq[s]]) for s in window.seqs]
        assert list(window.counts) == recount and window.total == sum(recount), name
        fresh = type(memory)(
            chat_memory=history,
            memory_key="fresh",
            max_token_limit=memory.max_token_limit,
            token_counter=COUNTER,
            return_messages=True,
        )
        assert (
            fresh.load_memory_variables({})["fresh"] == memory.load_memory_variables({})["history"]
        ), f"{name}: incremental window differs from a fresh one"
    for name in ("summary_buffer", "summary"):
        memory = memories[name]
        assert isinstance(memory, SummaryBufferMemory | SummaryMemory)
        status = memory.status()
        unfolded = history.entries(after=status.folded)
        recount = sum(memory._counter([e.message]) for e in unfolded)
        assert status.unfolded_tokens == recount, f"{name}: counts differ from a recount"


@pytest.fixture
def make_history(request: pytest.FixtureRequest) -> Iterator[Callable[[], ChatHistory]]:
    with tempfile.TemporaryDirectory() as folder:
        factory = make_history_factory(request.param, Path(folder))
        sessions = iter(range(10**6))
        yield lambda: factory(f"s{next(sessions)}")


@pytest.mark.parametrize("make_history", HISTORY_KINDS, indirect=True)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=OPERATIONS)
def test_random_edits_keep_every_memory_consistent(
    make_history: Callable[[], ChatHistory], operations: list[tuple[Any, ...]]
) -> None:
    history = make_history()
    memories = memories_on(history)
    script = Script(memories)
    removed: set[str] = set()
    for operation in operations:
        before = set(text_of([e.message for e in history.entries()]).split())
        getattr(script, operation[0])(*operation[1:])
        after = set(text_of([e.message for e in history.entries()]).split())
        # Words of call arguments live in tool_calls, not in text: only texts are traced.
        removed |= before - after
        check(history, memories, removed)


def test_an_edit_of_a_summarised_message_summarises_anew() -> None:
    history = InMemoryHistory()
    memory = SummaryBufferMemory(
        chat_memory=history, max_token_limit=40, token_counter=COUNTER, return_messages=True
    )
    secret = HumanMessage("My password is hunter2.", id="secret")
    memory.save_messages([secret, AIMessage("Noted.")])
    for i in range(6):
        memory.save_context({"input": f"Question {i}, the weather?"}, {"output": f"Answer {i}."})
    assert "hunter2" in memory.moving_summary_buffer  # folded into the summary
    memory.delete_messages(["secret"])
    assert "hunter2" not in memory.moving_summary_buffer
    assert "hunter2" not in text_of(memory.load_memory_variables({})["history"])
    assert secret in [r.message for r in history.records()]  # the log keeps what was said


def test_an_edit_inside_the_token_window_recounts_it(tmp_path: Path) -> None:
    history = SQLiteHistory(tmp_path / "chat.db", session_id="s")
    memory = TokenBufferMemory(
        chat_memory=history,
        max_token_limit=30,
        token_counter=lambda messages: sum(len(str(m.text)) for m in messages),
        return_messages=True,
    )
    memory.save_messages([HumanMessage("short", id="h1"), AIMessage("ok", id="a1")])
    memory.save_messages([HumanMessage("tiny", id="h2"), AIMessage("fine", id="a2")])
    assert [m.content for m in memory.load_memory_variables({})["history"]] == [
        "short", "ok", "tiny", "fine",
    ]  # fmt: skip
    memory.edit_message("a2", AIMessage("a much, much longer answer"))
    shown = memory.load_memory_variables({})["history"]
    assert [m.content for m in shown] == ["tiny", "a much, much longer answer"]
    window = TokenWindow.from_state(history.load_state(memory.state_key) or {})
    assert window.counts == (4, 26) and window.total == 30


@pytest.mark.parametrize("bad", ["not a message", None, [AIMessage("in a list")]])
def test_an_edit_to_what_is_not_a_message_names_edit_message_and_changes_nothing(
    bad: Any,
) -> None:
    """It named save_messages, which the caller never called."""
    memory = WindowMemory(k=3, return_messages=True)
    memory.save_messages([HumanMessage("q", id="h"), AIMessage("a", id="a")])
    with pytest.raises(
        InvalidInputError, match=r"^edit_message takes a LangChain message as the new message; got"
    ):
        memory.edit_message("a", bad)
    assert [m.content for m in memory.load_memory_variables({})["history"]] == ["q", "a"]


async def test_async_edits_through_a_memory() -> None:
    memory = WindowMemory(k=3, return_messages=True)
    await memory.asave_messages([HumanMessage("q", id="h"), AIMessage("a", id="a")])
    await memory.aedit_message("a", AIMessage("a!"))
    assert [m.content for m in (await memory.aload_memory_variables({}))["history"]] == ["q", "a!"]
    await memory.adelete_messages(["h"])
    await memory.akeep_last(0)
    assert (await memory.aload_memory_variables({}))["history"] == []


def test_a_window_emptied_by_an_edit_does_not_blame_the_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory = TokenBufferMemory(max_token_limit=500, token_counter=COUNTER, return_messages=True)
    memory.save_context({"input": "hello"}, {"output": "hi there"})
    memory.keep_last(1)  # only the AI message is left: no window may start on it
    with caplog.at_level("WARNING"):
        assert memory.load_memory_variables({})["history"] == []
    assert "over max_token_limit" not in caplog.text
    memory.save_context({"input": "x " * 2000}, {"output": "long"})
    with caplog.at_level("WARNING"):
        memory.load_memory_variables({})
    assert "over max_token_limit" in caplog.text
