"""ConversationVectorStoreTokenBufferMemory: LangChain's class and ours side by side.

Both run the same conversations with the same word-counting model, each over
its own in-memory vector store with the same embeddings and the clock frozen;
every loaded variable and every document written to the store must be equal.
Ours also survives a restart on a persistent history without writing an
exchange twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import SystemMessage
from langchain_core.vectorstores import InMemoryVectorStore

import memories.long_term.vector.token_buffer as ours_module
from memories import (
    ConfigError,
    ConversationVectorStoreTokenBufferMemory,
    InvalidInputError,
    SQLiteHistory,
)
from memories.stores.history import ChatHistory
from tests.contract.memory_contract import MakeMemory, MemoryContract
from tests.core.test_random_parity import word_llm

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class FrozenClock(datetime):
    @classmethod
    def now(cls, tz: Any = None) -> FrozenClock:
        return cls(2026, 1, 2, 3, 4, 5)


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    import langchain_classic.memory.vectorstore_token_buffer_memory as theirs_module

    monkeypatch.setattr(theirs_module, "datetime", FrozenClock)
    monkeypatch.setattr(ours_module, "datetime", FrozenClock)
    yield


def retriever() -> Any:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    return store.as_retriever(search_kwargs={"k": 2})


def documents(memory: Any) -> list[str]:
    return sorted(d["text"] for d in memory.retriever.vectorstore.store.values())


def theirs_memory(**options: Any) -> Any:
    from langchain_classic.memory.vectorstore_token_buffer_memory import (
        ConversationVectorStoreTokenBufferMemory as Theirs,
    )

    return Theirs(llm=word_llm(), retriever=retriever(), return_messages=True, **options)


def ours_memory(**options: Any) -> ConversationVectorStoreTokenBufferMemory:
    options = {"return_messages": True, **options}
    return ConversationVectorStoreTokenBufferMemory(
        llm=word_llm(), retriever=retriever(), **options
    )


def turns(n: int) -> list[tuple[str, str]]:
    return [
        (f"question {i} about cats", f"answer {i} about cats and dogs" + " and birds" * (i * 15))
        for i in range(n)
    ]


@pytest.mark.parametrize(
    "options",
    [{"max_token_limit": 12}, {"max_token_limit": 40, "split_chunk_size": 220}, {}],
    ids=["tiny", "chunked", "defaults"],
)
def test_same_variables_and_documents_as_langchains(options: dict[str, Any]) -> None:
    theirs, ours = theirs_memory(**options), ours_memory(**options)
    for question, answer in turns(6):
        theirs.save_context({"input": question}, {"output": answer})
        ours.save_context({"input": question}, {"output": answer})
        query = {"input": "what about cats?"}
        assert ours.load_memory_variables(query) == theirs.load_memory_variables(query)
        assert documents(ours) == documents(theirs)
    theirs.save_remainder()
    ours.save_remainder()
    assert documents(ours) == documents(theirs)
    assert ours.load_memory_variables({"input": "x"}) == theirs.load_memory_variables(
        {"input": "x"}
    )


def test_async_does_what_langchains_sync_path_does() -> None:
    theirs, ours = theirs_memory(max_token_limit=20), ours_memory(max_token_limit=20)
    for question, answer in turns(5):
        theirs.save_context({"input": question}, {"output": answer})
        asyncio.run(ours.asave_context({"input": question}, {"output": answer}))
        query = {"input": "cats"}
        got = asyncio.run(ours.aload_memory_variables(query))
        assert got == theirs.load_memory_variables(query)
    assert documents(ours) == documents(theirs)


def test_a_conversation_chain_runs_it_in_place_of_langchains() -> None:
    from langchain_classic.chains import ConversationChain
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

    import memories
    from tests.entities.fakes import RuleModel
    from tests.entities.test_entity_memory import texts

    # Its history is messages (a system message, then the recent turns): a chat prompt.
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{input}")]
    )
    results, prompts = [], []
    for make in (theirs_memory, memories.ConversationVectorStoreTokenBufferMemory):
        model = RuleModel()
        memory = (
            make(max_token_limit=12)
            if make is theirs_memory
            else make(
                llm=word_llm(), retriever=retriever(), return_messages=True, max_token_limit=12
            )
        )
        chain = ConversationChain(llm=model, prompt=prompt, memory=memory)
        results.append(
            [
                chain.invoke({"input": text})
                for text in (
                    "cats purr a lot",
                    "dogs bark at cats",
                    "tea in Oslo",
                    "what about cats?",
                )
            ]
        )
        prompts.append(texts(model.prompts))
    assert results[0] == results[1]
    assert prompts[0] == prompts[1]
    assert "cats purr a lot" in prompts[1][-1][0][1]  # overflowed, then recalled by relevance


def test_as_a_string_it_is_the_same_messages_in_one_buffer() -> None:
    # LangChain's class extends its message list with the string's characters here.
    ours = ours_memory(max_token_limit=15, return_messages=False)
    messages = ours_memory(max_token_limit=15)
    for question, answer in [("question 0 about cats", "cats purr " * 5), ("tea?", "yes")]:
        ours.save_context({"input": question}, {"output": answer})
        messages.save_context({"input": question}, {"output": answer})
    text = ours.load_memory_variables({"input": "cats"})["history"]
    listed = messages.load_memory_variables({"input": "cats"})["history"]
    assert isinstance(listed[0], SystemMessage) and len(listed) == 3
    assert text.startswith("System: \nCurrent date and time: 2026-01-02 03:04:05")
    assert "<2026-01-02 03:04:05 UTC/00> question 0 about cats" in text  # found in the store
    assert text.endswith(f"Human: {listed[-2].content}\nAI: {listed[-1].content}")


words = st.lists(st.sampled_from(["cats", "dogs", "tea", "Oslo", "rain", "piano"]), min_size=1)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    operations=st.lists(
        st.one_of(
            st.tuples(st.just("save"), words.map(" ".join), words.map(" ".join)),
            st.tuples(st.sampled_from(["load", "remainder"]), words.map(" ".join), st.none()),
        ),
        max_size=12,
    ),
    limit=st.integers(min_value=1, max_value=30),
)
def test_random_conversations_match_langchains(
    operations: list[tuple[str, str, Any]], limit: int
) -> None:
    theirs, ours = theirs_memory(max_token_limit=limit), ours_memory(max_token_limit=limit)
    for kind, text, answer in operations:
        if kind == "save":
            theirs.save_context({"input": text}, {"output": answer})
            ours.save_context({"input": text}, {"output": answer})
        elif kind == "remainder":
            theirs.save_remainder()
            ours.save_remainder()
        query = {"input": text}
        assert ours.load_memory_variables(query) == theirs.load_memory_variables(query)
        assert documents(ours) == documents(theirs)


def test_a_restart_keeps_the_timestamps_and_writes_no_exchange_twice(tmp_path: Path) -> None:
    shared = retriever()

    def memory() -> ConversationVectorStoreTokenBufferMemory:
        return ConversationVectorStoreTokenBufferMemory(
            retriever=shared,
            chat_memory=SQLiteHistory(tmp_path / "chat.db", session_id="s"),
            max_token_limit=30,
            token_counter="chars",
            return_messages=True,
        )

    first = memory()
    for question, answer in turns(3):
        first.save_context({"input": question}, {"output": answer})
    written = sorted(d["text"] for d in shared.vectorstore.store.values())
    assert written and all("<2026-01-02 03:04:05" in text for text in written)
    again = memory()  # a new process on the same history and store
    assert again.load_memory_variables({"input": "cats"}) == first.load_memory_variables(
        {"input": "cats"}
    )
    again.save_context({"input": "one more"}, {"output": "ok"})
    texts = [d["text"] for d in shared.vectorstore.store.values()]
    assert len(texts) == len(set(texts))  # nothing written twice
    assert set(written) <= set(texts)


def test_a_retriever_is_required_as_in_langchain() -> None:
    with pytest.raises(ConfigError, match="needs a retriever"):
        ConversationVectorStoreTokenBufferMemory()


def test_a_chunk_size_within_the_overlap_fails_when_built() -> None:
    with pytest.raises(ConfigError, match="chunk overlap"):
        ours_memory(split_chunk_size=100)


def test_a_load_without_inputs_dict_is_refused_as_the_vector_memory_refuses_it() -> None:
    """It searches with the input, as VectorStoreRetrieverMemory, so it refuses what that does."""
    memory = ours_memory()
    memory.save_context({"input": "hi"}, {"output": "hello"})
    refused = r"inputs must be a dict of chain inputs, got NoneType: None"
    with pytest.raises(InvalidInputError, match=refused):
        memory.load_memory_variables(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=refused):
        asyncio.run(memory.aload_memory_variables(None))  # type: ignore[arg-type]
    assert [m.text for m in memory.load_memory_variables({"input": "hi"})["history"][1:]] == [
        "hi",
        "hello",
    ]


class TestConversationVectorStoreTokenBufferContract(MemoryContract):
    memory_type = "conversation_vectorstore_token_buffer"
    configurable = False  # a retriever object has no config form, as in LangChain

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        def make(history: ChatHistory) -> ConversationVectorStoreTokenBufferMemory:
            return ConversationVectorStoreTokenBufferMemory(
                retriever=retriever(), chat_memory=history, max_token_limit=200
            )

        return make


def test_one_retriever_in_a_per_session_config_is_refused(tmp_path: Path) -> None:
    """Every session would write its overflow to, and recall from, the same store."""
    from memories import memory_factory

    config = {
        "type": "conversation_vectorstore_token_buffer",
        "retriever": retriever(),
        "history": {"type": "sqlite", "path": str(tmp_path / "chat.db"), "session_id": "x"},
    }
    with pytest.raises(ConfigError, match=r"retriever is a store object .* every session"):
        memory_factory(config)
