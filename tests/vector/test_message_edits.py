"""Issue 14: a turn's document follows edits of the messages it was made of."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage

from memories import CombinedMemory, InvalidInputError, WindowMemory
from memories.faces.exchange import apply_message_edits, save_exchange
from memories.stores.history import REMOVE_ALL_MESSAGES
from tests.vector.conftest import MakeVector


def texts(memory: object) -> list[str]:
    return sorted(d.text for d in memory.export_documents())  # type: ignore[attr-defined]


@pytest.mark.parametrize("write", ["sync", "background"])
def test_a_turns_document_follows_its_messages(make_vector: MakeVector, write: str) -> None:
    memory = make_vector(write=write)
    memory.save_context(
        {"input": HumanMessage("I live in Lyon", id="h1")},
        {"output": AIMessage("Noted: Lyon.", id="a1")},
    )
    memory.save_context({"input": "I like tea"}, {"output": "Tea it is."})
    memory.edit_message("h1", HumanMessage("I live in Paris"))
    assert texts(memory) == [
        "input: I like tea\noutput: Tea it is.",
        "input: I live in Paris\noutput: Noted: Lyon.",
    ]
    memory.edit_message("a1", AIMessage("Noted: Paris."))
    found = memory.search("where do I live", k=1)
    assert found[0].text == "input: I live in Paris\noutput: Noted: Paris."
    memory.delete_messages(["a1"])
    assert texts(memory) == ["input: I like tea\noutput: Tea it is."]
    memory.delete_messages(["never-saved"])  # no document was made of it: nothing changes
    assert len(texts(memory)) == 1
    with pytest.raises(InvalidInputError):
        memory.delete_messages("a1")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"^edit_message takes a LangChain message as"):
        memory.edit_message("h1", "not a message")  # type: ignore[arg-type]


def test_agent_turns_and_edits_reach_the_vector_memory_of_a_composite(
    make_vector: MakeVector,
) -> None:
    vector = make_vector(write="sync", memory_key="recalled")
    memory = CombinedMemory(memories=[WindowMemory(k=3), vector])
    turn = [
        HumanMessage("My pin is 1234, check my balance", id="h1"),
        AIMessage("", id="c1", tool_calls=[{"name": "balance", "args": {}, "id": "call-1"}]),
        ToolMessage("42 EUR", tool_call_id="call-1", id="t1"),
        AIMessage("You have 42 EUR.", id="a1"),
    ]
    assert save_exchange(memory, turn)
    assert texts(vector) == ["input: My pin is 1234, check my balance\noutput: You have 42 EUR."]
    took = apply_message_edits(
        memory, [HumanMessage("Check my balance", id="h1"), RemoveMessage(id=REMOVE_ALL_MESSAGES)]
    )
    assert took == 2
    assert texts(vector) == ["input: Check my balance\noutput: You have 42 EUR."]
    assert memory.memories[0].load_memory_variables({})["history"] == ""  # type: ignore[union-attr]
    asyncio.run(_async_delete(vector))
    assert texts(vector) == []


async def _async_delete(vector: object) -> None:
    await vector.aedit_message("a1", AIMessage("Balance: 42 EUR."))  # type: ignore[attr-defined]
    assert texts(vector) == ["input: Check my balance\noutput: Balance: 42 EUR."]
    await vector.adelete_messages(["h1"])  # type: ignore[attr-defined]
