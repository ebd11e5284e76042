"""``with_memory`` as RunnableWithMessageHistory's replacement (issue 11).

The examples of LangChain's own RunnableWithMessageHistory documentation run
twice: through LangChain's class and through ``with_memory``, ported by
changing the import and the call, with the same fake chat model. Outputs,
streamed chunks, what the model saw and what the history holds afterwards
must be the same.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import ConfigurableFieldSpec, RunnableParallel
from pydantic import Field

from memories import InvalidInputError, SummaryBufferMemory, WindowMemory, with_memory

RESPONSES = ["Cosine is a ratio.", "It is adjacent over hypotenuse.", "You asked about cosine."]


class RecordingChat(FakeListChatModel):
    """A fake chat model that remembers the messages of every call."""

    seen: list[list[tuple[str, str]]] = Field(default_factory=list)

    def _call(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> str:
        self.seen.append([(m.type, m.text) for m in messages])
        return super()._call(messages, *args, **kwargs)

    def _stream(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append([(m.type, m.text) for m in messages])
        return super()._stream(messages, *args, **kwargs)


def model() -> RecordingChat:
    return RecordingChat(responses=list(RESPONSES), seen=[])


def stores() -> tuple[dict[str, InMemoryChatMessageHistory], Callable[..., BaseChatMessageHistory]]:
    store: dict[str, InMemoryChatMessageHistory] = {}

    def get_session_history(*args: Any, **kwargs: Any) -> BaseChatMessageHistory:
        key = "/".join(map(str, [*args, *kwargs.values()]))
        return store.setdefault(key, InMemoryChatMessageHistory())

    return store, get_session_history


def theirs(*args: Any, **kwargs: Any) -> Any:
    from langchain_core.runnables.history import RunnableWithMessageHistory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RunnableWithMessageHistory(*args, **kwargs)


def plain(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    # LangChain stores a stream's sum as an AIMessageChunk; ours stores the AIMessage.
    return [(m.type.removesuffix("MessageChunk").lower(), m.text) for m in messages]


def answer(value: Any) -> Any:
    if isinstance(value, BaseMessage):
        return (value.type, value.text)
    if isinstance(value, dict):
        return {k: answer(v) for k, v in value.items()}
    return value


PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "You're an assistant who's good at {ability}"),
        MessagesPlaceholder(variable_name="history"),
        ("human", "{question}"),
    ]
)
QUESTIONS = ["What does cosine mean?", "Say more.", "What did I ask first?"]


def run_both(make: Callable[[Any, Any], Any], calls: list[tuple[Any, dict[str, Any]]]) -> None:
    """Run the same calls through LangChain's class and ours; everything must match."""
    results = []
    for build in ("theirs", "ours"):
        store, factory = stores()
        llm = model()
        chain = make(llm, factory) if build == "ours" else make(llm, factory, lc=True)
        outputs = [answer(chain.invoke(value, config=config)) for value, config in calls]
        results.append((outputs, llm.seen, {k: plain(v.messages) for k, v in store.items()}))
    assert results[1] == results[0]


def test_the_documented_prompt_example_matches() -> None:
    def make(llm: Any, factory: Any, lc: bool = False) -> Any:
        build = theirs if lc else with_memory
        return build(
            PROMPT | llm, factory, input_messages_key="question", history_messages_key="history"
        )

    config = {"configurable": {"session_id": "foo"}}
    run_both(make, [({"ability": "math", "question": q}, config) for q in QUESTIONS])


def test_the_documented_two_field_session_example_matches() -> None:
    specs = [
        ConfigurableFieldSpec(id="user_id", annotation=str, name="User ID", default="",
                              is_shared=True),
        ConfigurableFieldSpec(id="conversation_id", annotation=str, name="Conversation ID",
                              default="", is_shared=True),
    ]  # fmt: skip

    def make(llm: Any, factory: Any, lc: bool = False) -> Any:
        build = theirs if lc else with_memory
        return build(
            PROMPT | llm,
            factory,
            input_messages_key="question",
            history_messages_key="history",
            history_factory_config=specs,
        )

    def make_both(llm: Any, factory: Any, lc: bool = False) -> Any:
        def get_session_history(user_id: str, conversation_id: str) -> BaseChatMessageHistory:
            return factory(user_id, conversation_id)

        return make(llm, get_session_history, lc)

    first = {"configurable": {"user_id": "123", "conversation_id": "1"}}
    second = {"configurable": {"user_id": "123", "conversation_id": "2"}}
    run_both(make_both, [({"ability": "math", "question": QUESTIONS[0]}, first),
                    ({"ability": "math", "question": QUESTIONS[1]}, second),
                    ({"ability": "math", "question": QUESTIONS[2]}, first)])  # fmt: skip


@pytest.mark.parametrize(
    "inputs",
    [QUESTIONS, [HumanMessage(q) for q in QUESTIONS], [[HumanMessage(q)] for q in QUESTIONS]],
    ids=["strings", "messages", "message-lists"],
)
def test_a_chat_model_wrapped_directly_matches(inputs: list[Any]) -> None:
    def make(llm: Any, factory: Any, lc: bool = False) -> Any:
        return (theirs if lc else with_memory)(llm, factory)

    config = {"configurable": {"session_id": "s"}}
    run_both(make, [(value, config) for value in inputs])


def test_a_dict_output_with_output_messages_key_matches() -> None:
    def make(llm: Any, factory: Any, lc: bool = False) -> Any:
        chain = RunnableParallel({"output_message": llm})
        return (theirs if lc else with_memory)(chain, factory, output_messages_key="output_message")

    config = {"configurable": {"session_id": "s"}}
    run_both(make, [([HumanMessage(q)], config) for q in QUESTIONS])


def test_streaming_passes_chunks_through_and_saves_their_sum() -> None:
    chunks_by_build = []
    for build in ("theirs", "ours"):
        store, factory = stores()
        wrap = theirs if build == "theirs" else with_memory
        chain = wrap(
            PROMPT | model(), factory, input_messages_key="question", history_messages_key="history"
        )
        config = {"configurable": {"session_id": "s"}}
        chunks = [c.text for c in chain.stream({"ability": "math", "question": "hi"}, config)]
        chunks_by_build.append((chunks, plain(store["s"].messages)))
    assert chunks_by_build[1] == chunks_by_build[0]
    chunks, saved = chunks_by_build[1]
    assert len(chunks) > 1 and saved == [("human", "hi"), ("ai", RESPONSES[0])]


def test_async_stream_and_batch_save_every_turn() -> None:
    store, factory = stores()
    chain = with_memory(
        PROMPT | model(), factory, input_messages_key="question", history_messages_key="history"
    )

    async def stream() -> list[str]:
        config = {"configurable": {"session_id": "a"}}
        return [c.text async for c in chain.astream({"ability": "x", "question": "one"}, config)]

    assert "".join(asyncio.run(stream())) == RESPONSES[0]
    configs = [{"configurable": {"session_id": s}} for s in ("b", "c")]
    chain.batch([{"ability": "x", "question": "two"}, {"ability": "x", "question": "3"}], configs)
    assert sorted(store) == ["a", "b", "c"]
    assert all(len(history.messages) == 2 for history in store.values())


def test_a_bad_input_is_refused_before_the_model_runs() -> None:
    """Issue 11: the model was called, then InvalidInputError was raised and the answer lost."""
    llm = model()
    chain = with_memory(llm, WindowMemory(k=2, return_messages=True))
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        chain.invoke({"messages": [HumanMessage("bad \ud800")]})
    with pytest.raises(InvalidInputError, match="Expected str, BaseMessage"):
        chain.invoke(42)
    assert llm.seen == []
    reply = chain.invoke(
        {"messages": [HumanMessage("hello")]}
    )  # RunnableWithMessageHistory's shape
    assert reply.text == RESPONSES[0] and llm.seen == [[("human", "hello")]]


def test_a_messages_placeholder_gets_messages_from_a_text_memory() -> None:
    """Issue 11: a port failed with 'variable history should be a list of base messages'."""
    llm = model()
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{input}")]
    )
    memory = SummaryBufferMemory(max_token_limit=200)  # return_messages=False: it renders text
    chain = with_memory(prompt | llm, memory)
    chain.invoke({"input": "I am Ada."})
    chain.invoke({"input": "Who am I?"})
    assert llm.seen[-1] == [("human", "I am Ada."), ("ai", RESPONSES[0]), ("human", "Who am I?")]


def test_a_memory_factory_is_made_once_per_session_and_a_history_factory_asked_each_time() -> None:
    made: list[str] = []

    def memories(session_id: str) -> WindowMemory:
        made.append(session_id)
        return WindowMemory(k=1, return_messages=True)

    chain = with_memory(model(), memories)
    for _ in range(2):
        chain.invoke("hi", config={"configurable": {"session_id": "s"}})
    assert made == ["s"]

    asked: list[str] = []
    store, factory = stores()

    def histories(session_id: str) -> BaseChatMessageHistory:
        asked.append(session_id)
        return factory(session_id)

    chain = with_memory(model(), histories)
    for _ in range(2):
        chain.invoke("hi", config={"configurable": {"session_id": "s"}})
    assert asked == ["s", "s"] and len(store["s"].messages) == 4
    assert isinstance(chain.invoke("x", config={"configurable": {"session_id": "t"}}), AIMessage)
