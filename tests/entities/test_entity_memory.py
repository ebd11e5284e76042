"""ConversationEntityMemory: LangChain's class and ours side by side, the contract, failures.

The parity tests run LangChain's ``ConversationEntityMemory`` and ours on the
same conversations with the same rule-following model (its reply depends on
the prompt only) and compare every loaded variable, every prompt the model
saw and the entity summaries stored. The hypothesis test does so for random
sequences of loads, saves, clears and bad turns.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage

from memories import ConfigError, ConversationEntityMemory, SQLiteHistory, create_memory
from memories.stores.entities.summaries import InMemoryEntityStore, SQLiteEntityStore
from memories.stores.history import ChatHistory
from tests.contract.memory_contract import MakeMemory, MemoryContract
from tests.entities.fakes import RuleModel

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CONVERSATION = [
    ("Jane works in Paris with Tom", "Nice, tell me more."),
    ("Tom plays the piano", "Lovely."),
    ("what does she do?", "She works in Paris."),
    ("Paris is rainy in May", "It can be."),
    ("Jane and Tom moved to Rome", "Big change!"),
]


def langchain_memory(**kwargs: Any) -> Any:
    from langchain_classic.memory import ConversationEntityMemory as LangChainEntityMemory
    from langchain_classic.memory.entity import InMemoryEntityStore as LangChainStore

    kwargs.setdefault("entity_store", LangChainStore())
    return LangChainEntityMemory(**kwargs)


def texts(prompts: list[list[BaseMessage]]) -> list[list[tuple[str, str]]]:
    return [[(m.type, str(m.content)) for m in prompt] for prompt in prompts]


def converse(memory: Any, turns: list[tuple[str, str]] = CONVERSATION) -> list[dict[str, Any]]:
    loads = []
    for question, answer in turns:
        loads.append(memory.load_memory_variables({"input": question}))
        memory.save_context({"input": question}, {"output": answer})
    loads.append(memory.load_memory_variables({"input": "Where are Jane and Tom?"}))
    return loads


async def aconverse(memory: Any, turns: list[tuple[str, str]] = CONVERSATION) -> list[Any]:
    loads = []
    for question, answer in turns:
        loads.append(await memory.aload_memory_variables({"input": question}))
        await memory.asave_context({"input": question}, {"output": answer})
    loads.append(await memory.aload_memory_variables({"input": "Where are Jane and Tom?"}))
    return loads


def summaries(memory: Any, names: list[str]) -> dict[str, Any]:
    return {name: memory.entity_store.get(name, "") for name in names}


NAMES = ["Jane", "Tom", "Paris", "Rome", "May", "Where"]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"k": 1},
        {"k": 2, "return_messages": True},
        {"human_prefix": "User", "ai_prefix": "Bot"},
        {"chat_history_key": "chat"},
        {"input_key": "input", "output_key": "output"},
    ],
    ids=lambda o: ",".join(o) or "defaults",
)
def test_same_variables_prompts_and_summaries_as_langchains(options: dict[str, Any]) -> None:
    theirs_model, ours_model = RuleModel(), RuleModel()
    theirs = langchain_memory(llm=theirs_model, **options)
    ours = ConversationEntityMemory(llm=ours_model, **options)
    assert ours.memory_variables == theirs.memory_variables
    assert converse(ours) == converse(theirs)
    assert texts(ours_model.prompts) == texts(theirs_model.prompts)
    assert summaries(ours, NAMES) == summaries(theirs, NAMES)
    assert ours.entity_cache == theirs.entity_cache
    assert summaries(ours, NAMES)["Jane"]  # the conversation did write summaries


def test_async_does_what_langchains_sync_path_does() -> None:
    theirs_model, ours_model = RuleModel(), RuleModel()
    theirs = langchain_memory(llm=theirs_model)
    ours = ConversationEntityMemory(llm=ours_model)
    assert asyncio.run(aconverse(ours)) == converse(theirs)
    assert texts(ours_model.prompts) == texts(theirs_model.prompts)


def test_abuffer_is_every_message_as_buffer_is() -> None:
    """LangChain's ``buffer`` here is the whole session; ``abuffer`` gave the shown window."""
    memory = ConversationEntityMemory(llm=RuleModel(), k=1)
    converse(memory)
    assert len(memory.buffer) == 2 * len(CONVERSATION)
    assert asyncio.run(memory.abuffer()) == memory.buffer


@pytest.mark.parametrize("store", ["langchain", "memory", "sqlite"])
def test_any_entity_store_gives_langchains_results(store: str, tmp_path: Path) -> None:
    from langchain_classic.memory.entity import InMemoryEntityStore as LangChainStore

    stores: dict[str, Any] = {
        "langchain": LangChainStore(),
        "memory": InMemoryEntityStore(),
        "sqlite": SQLiteEntityStore(db_file=tmp_path / "entities.db"),
    }
    theirs, ours = langchain_memory(llm=RuleModel()), None
    ours = ConversationEntityMemory(
        llm=RuleModel(),
        chat_memory=SQLiteHistory(tmp_path / "chat.db"),
        entity_store=stores[store],
    )
    assert converse(ours) == converse(theirs)
    assert summaries(ours, NAMES) == summaries(theirs, NAMES)
    assert ours.entity_store is stores[store]  # the store given, not a wrapper


def test_a_conversation_chain_runs_it_in_place_of_langchains() -> None:
    from langchain_classic.chains import ConversationChain
    from langchain_classic.memory.prompt import ENTITY_MEMORY_CONVERSATION_TEMPLATE
    from langchain_core.language_models import FakeListLLM

    import memories

    results, prompts = [], []
    for memory_class in (langchain_memory, memories.ConversationEntityMemory):
        model = RuleModel()
        chain = ConversationChain(
            llm=FakeListLLM(responses=["Hello!", "Sure.", "In Paris."]),
            prompt=ENTITY_MEMORY_CONVERSATION_TEMPLATE,
            memory=memory_class(llm=model),
        )
        results.append(
            [
                chain.invoke({"input": text})
                for text in ("Hi, I am Jane", "Jane works in Paris", "Where does Jane work?")
            ]
        )
        prompts.append(texts(model.prompts))
    assert results[0] == results[1]
    assert prompts[0] == prompts[1]
    assert results[1][-1]["entities"]["Jane"].startswith("Hi, I am Jane")


WORDS = ["Jane", "Tom", "works", "in", "Paris", "likes", "tea", "Oslo", "she", "Rome"]
phrase = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
operation = st.one_of(
    st.tuples(st.just("load"), phrase),
    st.tuples(st.just("save"), st.tuples(phrase, phrase)),
    st.tuples(st.sampled_from(["clear", "two-inputs", "two-outputs", "aload", "asave"]), phrase),
)


@settings(max_examples=60, deadline=None)
@given(
    operations=st.lists(operation, min_size=1, max_size=14),
    k=st.integers(min_value=1, max_value=3),
    return_messages=st.booleans(),
)
def test_random_conversations_match_langchains(
    operations: list[tuple[str, Any]], k: int, return_messages: bool
) -> None:
    theirs_model, ours_model = RuleModel(), RuleModel()
    options = {"k": k, "return_messages": return_messages}
    theirs = langchain_memory(llm=theirs_model, **options)
    ours = ConversationEntityMemory(llm=ours_model, **options)
    for kind, value in operations:
        if kind in ("load", "aload"):
            expected = theirs.load_memory_variables({"input": value})
            if kind == "load":
                got = ours.load_memory_variables({"input": value})
            else:
                got = asyncio.run(ours.aload_memory_variables({"input": value}))
            assert got == expected
        elif kind in ("save", "asave"):
            question, answer = value if kind == "save" else (value, value.upper())
            theirs.save_context({"input": question}, {"output": answer})
            if kind == "save":
                ours.save_context({"input": question}, {"output": answer})
            else:
                asyncio.run(ours.asave_context({"input": question}, {"output": answer}))
        elif kind == "clear":
            theirs.clear()
            ours.clear()
        else:
            bad = (
                ({"a": value, "b": value}, {"output": "o"})
                if kind == "two-inputs"
                else ({"input": value}, {"x": "1", "y": "2"})
            )
            with pytest.raises(ValueError) as their_error:
                theirs.save_context(*bad)
            with pytest.raises(ValueError) as our_error:
                ours.save_context(*bad)
            assert str(our_error.value).startswith(str(their_error.value)[:20])
        assert texts(ours_model.prompts) == texts(theirs_model.prompts)
        assert ours.entity_cache == theirs.entity_cache
    assert summaries(ours, ["Jane", "Tom", "Paris", "Oslo", "Rome"]) == summaries(
        theirs, ["Jane", "Tom", "Paris", "Oslo", "Rome"]
    )
    assert [m.content for m in ours.chat_memory.messages] == [
        m.content for m in theirs.chat_memory.messages
    ]


# -- a failing model loses no turn ---------------------------------------------------


def final_summaries(memory: Any) -> dict[str, str]:
    return {name: memory.entity_store.get(name, "") for name in NAMES}


def test_a_failed_summary_call_keeps_the_turn_and_is_retried_in_order() -> None:
    steady = ConversationEntityMemory(llm=RuleModel())
    converse(steady)
    # Call 2 is the first save's first summary (Jane); call 7 a later one.
    failing = ConversationEntityMemory(llm=RuleModel(fail_calls={2, 7}))
    converse(failing)
    assert len(failing.chat_memory.messages) == 2 * len(CONVERSATION)  # every turn saved
    assert failing.flush()
    assert failing.status().pending == 0
    assert final_summaries(failing) == final_summaries(steady)


def test_a_failed_extraction_at_load_is_made_up_for_at_save() -> None:
    steady = ConversationEntityMemory(llm=RuleModel())
    converse(steady)
    failing = ConversationEntityMemory(llm=RuleModel(fail_calls={1}))
    first = failing.load_memory_variables({"input": CONVERSATION[0][0]})
    assert first["entities"] == {}  # the chain still runs this turn
    failing.save_context({"input": CONVERSATION[0][0]}, {"output": CONVERSATION[0][1]})
    converse(failing, CONVERSATION[1:])
    assert final_summaries(failing) == final_summaries(steady)


@settings(max_examples=40, deadline=None)
@given(fail_calls=st.sets(st.integers(min_value=1, max_value=30), max_size=12))
def test_any_failing_calls_lose_and_duplicate_no_knowledge(fail_calls: set[int]) -> None:
    steady = ConversationEntityMemory(llm=RuleModel())
    converse(steady)
    failing = ConversationEntityMemory(llm=RuleModel(fail_calls=fail_calls))
    converse(failing)
    while not failing.flush():  # the model fails some retries too; it recovers after call 30
        pass
    assert final_summaries(failing) == final_summaries(steady)
    assert {n: [v.value for v in failing.entity_store.history(n)] for n in NAMES} == {
        n: [v.value for v in steady.entity_store.history(n)] for n in NAMES
    }  # no version written twice
    assert len(failing.chat_memory.messages) == 2 * len(CONVERSATION)


def test_failures_are_recorded_and_the_queue_survives_a_restart(tmp_path: Path) -> None:
    def memory(model: RuleModel) -> ConversationEntityMemory:
        return ConversationEntityMemory(
            llm=model,
            chat_memory=SQLiteHistory(tmp_path / "chat.db", session_id="s"),
            entity_store=SQLiteEntityStore("s", tmp_path / "entities.db"),
        )

    down = RuleModel(fail_calls=set(range(2, 100)))
    first = memory(down)
    first.load_memory_variables({"input": "Jane works in Paris"})
    first.save_context({"input": "Jane works in Paris"}, {"output": "ok"})
    first.save_context({"input": "Tom too"}, {"output": "ok"})
    status = first.status()
    assert status.pending == 2 and status.failures == 2
    assert status.last_error is not None and "ConnectionError" in status.last_error
    restarted = memory(RuleModel())  # a new process, the model back up
    assert restarted.status().pending == 2
    assert restarted.flush()
    # The second save had no load before it: as in LangChain, it updates the cached entities.
    assert restarted.entity_store.get("Jane") == "Jane works in Paris | Tom too"
    assert [v.value for v in restarted.entity_store.history("Paris")] == [
        "Jane works in Paris",
        "Jane works in Paris | Tom too",
    ]
    assert [m.content for m in restarted.chat_memory.messages][::2] == [
        "Jane works in Paris",
        "Tom too",
    ]


def test_async_failures_are_queued_as_sync_ones_are() -> None:
    failing = ConversationEntityMemory(llm=RuleModel(fail_calls={2}))
    asyncio.run(failing.aload_memory_variables({"input": "Jane is here"}))
    asyncio.run(failing.asave_context({"input": "Jane is here"}, {"output": "hi"}))
    assert failing.status().pending == 1
    assert asyncio.run(failing.aflush())
    assert failing.entity_store.get("Jane") == "Jane is here"


def test_every_version_of_a_summary_is_kept_in_our_store(tmp_path: Path) -> None:
    store = SQLiteEntityStore(db_file=tmp_path / "e.db")
    memory = ConversationEntityMemory(llm=RuleModel(), entity_store=store)
    converse(memory)
    assert [v.value for v in store.history("Jane")] == [
        "Jane works in Paris with Tom",
        "Jane works in Paris with Tom | Jane and Tom moved to Rome",
    ]


# -- arguments and errors ---------------------------------------------------------------


def test_an_llm_is_required_as_in_langchain() -> None:
    with pytest.raises(ConfigError, match="needs an llm"):
        ConversationEntityMemory()


def test_a_config_builds_it_with_a_sql_store(tmp_path: Path) -> None:
    memory = create_memory(
        {
            "type": "conversation_entity",
            "llm": RuleModel(),
            "k": 2,
            "entity_store": {"type": "sqlite", "db_file": str(tmp_path / "e.db")},
        }
    )
    assert isinstance(memory, ConversationEntityMemory)
    assert isinstance(memory.entity_store, SQLiteEntityStore)
    memory.llm = "openai:gpt-4o-mini"  # a model by name has a config form
    config = memory.to_config()
    assert config["entity_store"] == memory.entity_store.to_config()
    assert config["k"] == 2 and "entity_cache" not in config


def test_a_store_config_builds_one_store(monkeypatch: pytest.MonkeyPatch) -> None:
    from memories.stores.entities import summaries

    built: list[Any] = []
    real = summaries.create_entity_store
    monkeypatch.setattr(
        summaries, "create_entity_store", lambda config: built.append(config) or real(config)
    )
    memory = ConversationEntityMemory(llm=RuleModel(), entity_store={"type": "memory"})
    assert isinstance(memory.entity_store, InMemoryEntityStore)
    assert built == [{"type": "memory"}]  # not a second store built and dropped


def test_its_prompts_are_written_as_templates_and_a_chat_prompt_is_refused() -> None:
    from langchain_core.prompts import ChatPromptTemplate, PromptTemplate

    memory = ConversationEntityMemory(
        llm=RuleModel(),
        entity_extraction_prompt=PromptTemplate.from_template("Names in {history} / {input}"),
    )
    memory.llm = "openai:gpt-4o-mini"  # a model by name has a config form
    assert memory.to_config()["entity_extraction_prompt"] == "Names in {history} / {input}"
    memory.entity_summarization_prompt = ChatPromptTemplate.from_messages(
        [("human", "{entity} {summary} {history} {input}")]
    )
    with pytest.raises(ConfigError, match=r"entity_summarization_prompt = .* no config form"):
        memory.to_config()


def test_clear_forgets_the_entities_too() -> None:
    memory = ConversationEntityMemory(llm=RuleModel())
    converse(memory)
    memory.clear()
    assert memory.entity_store.entities() == {} and memory.entity_cache == []
    assert memory.load_memory_variables({"input": "Jane?"}) == {
        "entities": {"Jane": ""},
        "history": "",
    }


class TestConversationEntityMemoryContract(MemoryContract):
    memory_type = "conversation_entity"
    dict_variables = frozenset({"entities"})
    # A model object has no config form; the config with a SQL store is tested above.
    configurable = False

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        return lambda history: ConversationEntityMemory(llm=RuleModel(), chat_memory=history)

    def test_return_messages_gives_messages(
        self, make_memory: MakeMemory, history: ChatHistory
    ) -> None:
        # The history is the second variable here (LangChain's order: entities, history).
        memory = make_memory(history)
        memory.return_messages = True
        memory.save_context({"input": "Jane"}, {"output": "hi"})
        value = memory.load_memory_variables({"input": "next"})["history"]
        assert [m.content for m in value] == ["Jane", "hi"]

    def test_a_copy_keeps_its_entities(self, make_memory: MakeMemory, history: ChatHistory) -> None:
        memory = make_memory(history)
        converse(memory, CONVERSATION[:2])
        assert copy.deepcopy(memory).entity_store.entities() == memory.entity_store.entities()
