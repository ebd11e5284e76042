"""Memories in LCEL runnables and in LangChain's classic chains."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from langchain_core.language_models import FakeListChatModel, FakeListLLM
from langchain_core.messages import AIMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder, PromptTemplate
from langchain_core.runnables import RunnableLambda

from memories import (
    BufferMemory,
    ConfigError,
    InvalidInputError,
    TokenBufferMemory,
    WindowMemory,
    with_memory,
)


def echo_history(inputs: dict[str, Any]) -> str:
    return f"saw [{inputs['history']}] then {inputs['input']}"


def test_runnable_loads_before_and_saves_after() -> None:
    memory = BufferMemory()
    chain = with_memory(RunnableLambda(echo_history), memory)
    assert chain.invoke({"input": "hi"}) == "saw [] then hi"
    assert chain.invoke("again") == "saw [Human: hi\nAI: saw [] then hi] then again"
    assert memory.buffer_as_messages[-2].content == "again"


def test_one_memory_per_session_from_config() -> None:
    made: list[str] = []

    def factory(session_id: str) -> BufferMemory:
        made.append(session_id)
        return BufferMemory()

    chain = with_memory(RunnableLambda(echo_history), factory)
    for session, text in [("alice", "a1"), ("bob", "b1"), ("alice", "a2")]:
        chain.invoke({"input": text}, config={"configurable": {"session_id": session}})
    assert made == ["alice", "bob"]
    out = chain.invoke({"input": "a3"}, config={"configurable": {"session_id": "alice"}})
    assert "a1" in out and "a2" in out and "b1" not in out


def test_factory_without_session_id_is_a_clear_error() -> None:
    chain = with_memory(RunnableLambda(echo_history), lambda sid: BufferMemory())
    with pytest.raises(ConfigError, match="session_id"):
        chain.invoke({"input": "hi"})
    with pytest.raises(ConfigError, match="session_id"):  # an empty id names no session
        chain.invoke({"input": "hi"}, config={"configurable": {"session_id": ""}})


def test_runnable_with_chat_model_saves_ai_messages() -> None:
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{input}")]
    )
    model = FakeListChatModel(responses=["Nice to meet you, Ada.", "You are Ada."])
    memory = WindowMemory(k=3, return_messages=True)
    chain = with_memory(prompt | model, memory)
    chain.invoke({"input": "I am Ada."})
    reply = chain.invoke({"input": "Who am I?"})
    assert isinstance(reply, AIMessage) and reply.content == "You are Ada."
    assert [m.content for m in memory.buffer_as_messages] == [
        "I am Ada.",
        "Nice to meet you, Ada.",
        "Who am I?",
        "You are Ada.",
    ]


def test_runnable_async_path_matches_sync() -> None:
    sync_memory, async_memory = (
        TokenBufferMemory(max_token_limit=50),
        TokenBufferMemory(max_token_limit=50),
    )
    sync_chain = with_memory(RunnableLambda(echo_history), sync_memory)
    async_chain = with_memory(RunnableLambda(echo_history), async_memory)
    for text in ("one", "two", "three"):
        sync_chain.invoke({"input": text})
        asyncio.run(async_chain.ainvoke({"input": text}))
    assert sync_memory.load_memory_variables({}) == async_memory.load_memory_variables({})


def test_runnable_rejects_unusable_input_and_ambiguous_output() -> None:
    chain = with_memory(RunnableLambda(echo_history), BufferMemory())
    with pytest.raises(InvalidInputError, match="takes a dict of inputs"):
        chain.invoke(42)
    two_outputs = with_memory(RunnableLambda(lambda x: {"a": 1, "b": 2}), BufferMemory())
    with pytest.raises(InvalidInputError, match="output_key"):
        two_outputs.invoke({"input": "x"})


def test_llm_chain_with_memory_sync_and_async() -> None:
    from langchain_classic.chains import LLMChain

    prompt = PromptTemplate.from_template("{history}\nHuman: {question}\nAI:")
    memory = WindowMemory(k=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chain = LLMChain(
            llm=FakeListLLM(responses=["r1", "r2", "r3"]), prompt=prompt, memory=memory
        )
        chain.invoke({"question": "q1"})
        asyncio.run(chain.ainvoke({"question": "q2"}))
        result = chain.invoke({"question": "q3"})
    assert result["history"] == "Human: q2\nAI: r2"
    assert memory.load_memory_variables({})["history"] == "Human: q3\nAI: r3"


def test_max_sessions_drops_the_least_recently_used_memory() -> None:
    made: list[str] = []

    def factory(session_id: str) -> BufferMemory:
        made.append(session_id)
        return BufferMemory()

    chain = with_memory(RunnableLambda(echo_history), factory, max_sessions=2)
    for session in ("a", "b", "a", "c", "a", "b"):
        chain.invoke({"input": "x"}, config={"configurable": {"session_id": session}})
    # "b" was least recently used when "c" arrived, so it was dropped and made again.
    assert made == ["a", "b", "c", "b"]
    for bad in (0, "2", True, 2.0):
        with pytest.raises(ConfigError, match=f"max_sessions must be a whole number .*{bad!r}"):
            with_memory(RunnableLambda(echo_history), factory, max_sessions=bad)  # type: ignore[arg-type]


def test_max_sessions_closes_the_memory_it_drops_so_its_deferred_work_is_written() -> None:
    made: dict[str, BufferMemory] = {}
    closed: list[BufferMemory] = []

    class Closing(BufferMemory):
        def close(self, *, timeout: float | None = None) -> bool:
            closed.append(self)
            return super().close(timeout=timeout)

    def factory(session_id: str) -> BufferMemory:
        made[session_id] = Closing()
        return made[session_id]

    chain = with_memory(RunnableLambda(echo_history), factory, max_sessions=1)
    for session in ("a", "a", "b"):
        chain.invoke({"input": "x"}, config={"configurable": {"session_id": session}})
    assert closed == [made["a"]]
