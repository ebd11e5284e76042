"""Agent turns: which messages are a turn, how each kind of memory saves and shows them."""

from __future__ import annotations

import asyncio
import re

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from memories import (
    BufferMemory,
    CombinedMemory,
    InvalidInputError,
    ReadOnlySharedMemory,
    SimpleMemory,
    WindowMemory,
)
from memories.faces.exchange import (
    MemoryView,
    asave_exchange,
    aview_memory,
    last_exchange,
    save_exchange,
    view_memory,
)
from memories.kernel.steps import Steps


def tool_turn(question: str = "Weather in Paris?") -> list[BaseMessage]:
    return [
        HumanMessage(question),
        AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}]),
        ToolMessage("18C", tool_call_id="c1", name="weather"),
        AIMessage("It is 18C."),
    ]


def test_last_exchange_starts_at_the_last_human_message() -> None:
    earlier = [HumanMessage("hi"), AIMessage("hello")]
    assert last_exchange([*earlier, *tool_turn()]) == tool_turn()
    assert last_exchange([AIMessage("only ai")]) == [AIMessage("only ai")]
    assert last_exchange([]) == []


def test_chat_memory_stores_the_whole_tool_calling_turn() -> None:
    memory = BufferMemory()
    assert save_exchange(memory, tool_turn())
    assert memory.buffer_as_messages == tool_turn()


def test_without_tool_messages_only_input_and_answer_are_stored() -> None:
    memory = BufferMemory()
    save_exchange(memory, tool_turn(), tool_messages=False)
    assert memory.buffer_as_messages == [HumanMessage("Weather in Paris?"), AIMessage("It is 18C.")]


def test_a_turn_without_an_answer_is_not_saved() -> None:
    memory = BufferMemory()
    assert not save_exchange(memory, [HumanMessage("unanswered")])
    assert not save_exchange(memory, [AIMessage("no user message")])
    assert memory.buffer_as_messages == []


def test_a_direct_tool_result_is_saved_as_the_answer_of_a_non_chat_memory() -> None:
    class Recording(SimpleMemory):
        def save_context(self, inputs: dict, outputs: dict) -> None:  # type: ignore[type-arg]
            self.memories["saved"] = (inputs, outputs)

    memory = Recording()
    save_exchange(memory, tool_turn()[:3])
    assert memory.memories["saved"] == ({"input": "Weather in Paris?"}, {"output": "18C"})


def test_window_over_saved_turns_keeps_tool_calls_with_results() -> None:
    memory = WindowMemory(k=1)
    save_exchange(memory, [HumanMessage("hi"), AIMessage("hello")])
    save_exchange(memory, tool_turn())
    assert memory.buffer_as_messages == tool_turn()


def test_save_messages_rejects_non_messages_before_writing() -> None:
    memory = BufferMemory()
    with pytest.raises(InvalidInputError, match="list of LangChain messages"):
        memory.save_messages([HumanMessage("ok"), "not a message"])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError):
        memory.save_messages("a string")  # type: ignore[arg-type]
    # None and a number raised a raw TypeError; a lone message was read as its fields.
    for bad in (None, 3, HumanMessage("lone")):
        with pytest.raises(InvalidInputError, match=rf"messages; got {re.escape(repr(bad))}"):
            memory.save_messages(bad)  # type: ignore[arg-type]
    # An iterator was read up by the check, then nothing was saved and nothing said.
    with pytest.raises(InvalidInputError, match="list of LangChain messages; got <list_iterator"):
        memory.save_messages(iter([HumanMessage("gone")]))  # type: ignore[arg-type]
    assert memory.buffer_as_messages == []


def test_combined_memory_saves_to_each_member_and_shows_each() -> None:
    window = WindowMemory(k=1, memory_key="recent")
    persona = SimpleMemory(memories={"persona": "You are a pirate."})
    combined = CombinedMemory(memories=[window, persona])
    save_exchange(combined, tool_turn())
    view = view_memory(combined, "next", as_messages=True)
    assert view.messages == tuple(tool_turn())
    assert view.sections == (("persona", "You are a pirate."),)


def test_as_text_a_chat_window_becomes_a_section() -> None:
    memory = BufferMemory()
    save_exchange(memory, [HumanMessage("hi"), AIMessage("hello")])
    view = view_memory(memory, "next", as_messages=False)
    assert view.messages == ()
    assert view.sections == (("history", "Human: hi\nAI: hello"),)
    assert view.system_text("## Memory") == "## Memory\nhistory:\nHuman: hi\nAI: hello"


def test_system_messages_of_a_view_go_to_the_sections() -> None:
    class Summarised(BufferMemory):
        def _selection(self) -> Steps[list[BaseMessage]]:
            shown = yield from super()._selection()
            return [SystemMessage("The user is Ada."), *shown]

    memory = Summarised()
    save_exchange(memory, [HumanMessage("hi"), AIMessage("hello")])
    view = view_memory(memory, "next", as_messages=True)
    assert view.messages == (HumanMessage("hi"), AIMessage("hello"))
    assert view.sections == (("history", "The user is Ada."),)


def test_read_only_memory_shows_but_does_not_save() -> None:
    shared = BufferMemory()
    save_exchange(shared, [HumanMessage("hi"), AIMessage("hello")])
    read_only = ReadOnlySharedMemory(memory=shared)
    save_exchange(read_only, tool_turn())
    assert len(shared.buffer_as_messages) == 2
    assert view_memory(read_only, "q", as_messages=True).messages == tuple(
        shared.buffer_as_messages
    )


def test_empty_view_has_no_system_text() -> None:
    assert MemoryView().system_text("header") == ""
    assert view_memory(BufferMemory(), "q", as_messages=False) == MemoryView()


def test_async_saves_and_shows_what_sync_does() -> None:
    sync_memory = CombinedMemory(
        memories=[WindowMemory(k=2), SimpleMemory(memories={"persona": "terse"})]
    )
    async_memory = CombinedMemory(
        memories=[WindowMemory(k=2), SimpleMemory(memories={"persona": "terse"})]
    )
    for turn in (tool_turn("a"), tool_turn("b"), tool_turn("c")):
        save_exchange(sync_memory, turn)
        asyncio.run(asave_exchange(async_memory, turn))
    for as_messages in (True, False):
        expected = view_memory(sync_memory, "q", as_messages=as_messages)
        assert asyncio.run(aview_memory(async_memory, "q", as_messages=as_messages)) == expected


def test_only_a_chat_view_as_messages_counts_as_a_conversation() -> None:
    assert view_memory(WindowMemory(k=2), "q", as_messages=True).conversation
    assert not view_memory(WindowMemory(k=2), "q", as_messages=False).conversation
    assert not view_memory(SimpleMemory(memories={"a": "b"}), "q", as_messages=True).conversation
    combined = CombinedMemory(memories=[WindowMemory(k=2), SimpleMemory(memories={"a": "b"})])
    assert view_memory(combined, "q", as_messages=True).conversation
