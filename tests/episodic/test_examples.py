"""ExampleMemory: past interactions recalled as few-shot examples, and LangChain's selector API."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from memories import ExampleMemory, InvalidInputError
from memories.core.base import BaseMemory
from memories.stores.history import ChatHistory, InMemoryHistory
from tests.contract.memory_contract import TURNS, MakeMemory, MemoryContract, run_turns
from tests.vector.conftest import WordEmbeddings

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"


EXAMPLES = [
    {"input": "convert 3 miles to km", "output": "3 miles is 4.8 km"},
    {"input": "convert 10 pounds to kg", "output": "10 pounds is 4.5 kg"},
    {"input": "what is the capital of France", "output": "Paris"},
    {"input": "what is the capital of Japan", "output": "Tokyo"},
    {"input": "write a haiku about rain", "output": "soft rain on the roof"},
    {"input": "write a haiku about snow", "output": "white hush on the hills"},
]


@pytest.fixture
def make_examples() -> Callable[..., ExampleMemory]:
    collection = f"e{uuid.uuid4().hex[:12]}"

    def make(**options: Any) -> ExampleMemory:
        options.setdefault("mode", "memory")
        options.setdefault("collection", collection)
        options.setdefault("embeddings", EMBEDDINGS)
        options.setdefault("write", "sync")
        return ExampleMemory(**options)

    return make


class TestExampleMemoryContract(MemoryContract):
    memory_type = "examples"
    shows_latest_turn = False  # examples are chosen by likeness to the input

    @pytest.fixture
    def history_factory(self) -> Callable[[str], ChatHistory]:
        return lambda session_id: InMemoryHistory(session_id=session_id)

    @pytest.fixture
    def make_memory(self, make_examples: Callable[..., ExampleMemory]) -> MakeMemory:
        return lambda history: make_examples(
            namespace=("contract", history.session_id), memory_key="history"
        )

    def stored_data(self, memory: BaseMemory, history: ChatHistory) -> Any:
        """The namespace's example documents in the store."""
        assert isinstance(memory, ExampleMemory)
        memory.flush()
        return sorted((e.id, str(e.values)) for e in memory.select("question", k=100))

    def test_unicode_and_huge_input_round_trip(
        self, make_memory: MakeMemory, history: ChatHistory
    ) -> None:
        memory = make_memory(history)
        assert isinstance(memory, ExampleMemory)
        huge = "ünïcødé 🧠 " * 50_000
        memory.save_context({"input": huge}, {"output": "noted, 日本語"})
        (found,) = memory.select("ünïcødé", k=1)
        assert found.values == {"input": huge, "output": "noted, 日本語"}
        run_turns(memory, TURNS[:1])
        assert memory.select(TURNS[0][0], k=1)[0].values["input"] == TURNS[0][0]


def test_the_most_similar_examples_are_shown_as_few_shot_exchanges(
    make_examples: Callable[..., ExampleMemory],
) -> None:
    memory = make_examples(k=2)
    memory.add_examples(EXAMPLES)
    shown = memory.load_memory_variables({"input": "convert 5 miles to km"})["examples"]
    assert shown.startswith("Human: convert 3 miles to km\nAI: 3 miles is 4.8 km\n\n")
    assert "capital" not in shown and "haiku" not in shown

    memory.return_messages = True
    messages = memory.load_memory_variables({"input": "the capital of Italy"})["examples"]
    assert [type(m) for m in messages] == [HumanMessage, AIMessage] * 2
    assert {m.content for m in messages[1::2]} == {"Paris", "Tokyo"}


def test_turns_are_examples_and_feedback_decides_which_are_shown(
    make_examples: Callable[..., ExampleMemory],
) -> None:
    memory = make_examples(k=3, min_feedback=0.5)
    memory.save_context({"input": "book a flight to Rome"}, {"output": "Booked, seat 12A"})
    good = memory.last_turn_id
    memory.save_context({"input": "book a flight to Oslo"}, {"output": "Error, try later"})
    bad = memory.last_turn_id
    memory.save_context({"input": "book a hotel in Rome"}, {"output": "Hotel booked"}, turn_id="r1")
    assert good and bad and good != bad
    assert memory.select("book a flight") == []  # nothing rated yet

    memory.feedback(good, 1.0)
    memory.feedback(bad, 0.0)
    rated = memory.feedback("r1", 0.9)
    assert rated.feedback == 0.9 and rated.values["input"] == "book a hotel in Rome"
    assert {e.id for e in memory.select("book a flight")} == {good, "r1"}
    assert [e.id for e in memory.select("book a flight", min_feedback=-1)][:3] != []
    with pytest.raises(InvalidInputError, match="No example with id 'nope'"):
        memory.feedback("nope", 1.0)
    with pytest.raises(InvalidInputError, match="finite number"):
        memory.feedback(good, float("inf"))


def test_an_agent_turn_comes_back_whole_with_its_tool_calls(
    make_examples: Callable[..., ExampleMemory],
) -> None:
    memory = make_examples(return_messages=True, k=1)
    call = {"name": "weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}
    turn = [
        HumanMessage("weather in Paris?"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("18C, sunny", tool_call_id="call_1"),
        AIMessage("It is 18C and sunny in Paris."),
    ]
    memory.save_messages(turn)
    (example,) = memory.select("weather in Lyon?")
    assert example.values == {
        "input": "weather in Paris?",
        "output": "It is 18C and sunny in Paris.",
    }
    shown = memory.load_memory_variables({"input": "weather in Lyon?"})["examples"]
    assert [type(m) for m in shown] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert shown[1].tool_calls[0]["id"] == "call_1" and shown[2].tool_call_id == "call_1"
    with pytest.raises(InvalidInputError, match="needs a human message and an AI answer"):
        memory.save_messages([HumanMessage("only a question")])


def test_it_is_a_langchain_example_selector_in_few_shot_prompts(
    make_examples: Callable[..., ExampleMemory],
) -> None:
    from langchain_core.prompts import (
        ChatPromptTemplate,
        FewShotChatMessagePromptTemplate,
        FewShotPromptTemplate,
        PromptTemplate,
    )

    memory = make_examples(k=1)
    for example in EXAMPLES:
        memory.add_example(example)
    few_shot = FewShotChatMessagePromptTemplate(
        example_selector=memory,
        example_prompt=ChatPromptTemplate.from_messages([("human", "{input}"), ("ai", "{output}")]),
        input_variables=["input"],
    )
    prompt = ChatPromptTemplate.from_messages([("system", "Help."), few_shot, ("human", "{input}")])
    messages = prompt.invoke({"input": "write a haiku about rain"}).to_messages()
    assert [m.content for m in messages] == [
        "Help.",
        "write a haiku about rain",
        "soft rain on the roof",
        "write a haiku about rain",
    ]
    text = FewShotPromptTemplate(
        example_selector=memory,
        example_prompt=PromptTemplate.from_template("Q: {input}\nA: {output}"),
        suffix="Q: {input}\nA:",
        input_variables=["input"],
    ).format(input="capital of Japan?")
    assert text == "Q: what is the capital of Japan\nA: Tokyo\n\nQ: capital of Japan?\nA:"
    assert asyncio.run(
        few_shot.aformat_messages(input="convert miles")
    ) == few_shot.format_messages(input="convert miles")


def test_add_example_takes_its_example_by_keyword_as_langchains_selector_does(
    make_examples: Callable[..., ExampleMemory],
) -> None:
    """``BaseExampleSelector.add_example(example)`` names its argument: a caller may too."""
    memory = make_examples(k=1)
    first = memory.add_example(example=EXAMPLES[0])
    second = asyncio.run(memory.aadd_example(example=EXAMPLES[1], metadata={"kind": "unit"}))
    assert [e.values for e in memory.get([first, second])] == EXAMPLES[:2]


def test_selection_matches_langchains_selectors_on_the_same_embeddings(
    make_examples: Callable[..., ExampleMemory],
) -> None:
    from langchain_core.example_selectors import (
        MaxMarginalRelevanceExampleSelector,
        SemanticSimilarityExampleSelector,
    )
    from langchain_core.vectorstores import InMemoryVectorStore

    embeddings = WordEmbeddings()
    examples = [
        {"input": f"{w} {v}", "output": w} for w in ("red", "blue", "green") for v in "abcd"
    ]
    # (No query equals a stored text: then MMR's second pick is an exact tie, broken by noise.)
    queries = [{"input": q} for q in ("red apple", "blue green sky", "green dog d", "b c x")]
    for mmr, theirs_cls in [
        (False, SemanticSimilarityExampleSelector),
        (True, MaxMarginalRelevanceExampleSelector),
    ]:
        ours = ExampleMemory.from_examples(
            examples,
            embeddings,
            mode="memory",
            collection=f"p{uuid.uuid4().hex[:8]}",
            write="sync",
            k=3,
            input_keys=["input"],
            recall={"mode": "dense"},
            mmr=mmr,
        )
        theirs = theirs_cls.from_examples(
            examples, embeddings, InMemoryVectorStore, k=3, input_keys=["input"]
        )
        for query in queries:
            assert ours.select_examples(query) == theirs.select_examples(query), (mmr, query)


def test_a_token_budget_keeps_the_best_examples_that_fit(
    make_examples: Callable[..., ExampleMemory],
) -> None:
    memory = make_examples(k=3, max_tokens=40, token_counter="chars")
    long = {"input": "rain poem please", "output": "rain " * 40}
    memory.add_examples([long, {"input": "rain haiku", "output": "drops"}, EXAMPLES[4]])
    chosen = memory.select("rain poem")
    assert long not in [e.values for e in chosen] and chosen
    used = sum(memory._counter(e.as_messages()) for e in chosen)
    assert used <= 40


def test_filters_namespaces_and_bad_examples(make_examples: Callable[..., ExampleMemory]) -> None:
    alice = make_examples(namespace=("alice",))
    bob = make_examples(namespace=("alice", "x"))
    alice.add_examples(EXAMPLES[:2], metadatas=[{"topic": "units"}, {"topic": "weights"}])
    assert bob.select("convert") == []
    assert [e.values["output"] for e in alice.select("convert", filter={"topic": "weights"})] == [
        "10 pounds is 4.5 kg"
    ]
    before = alice.select("convert", k=10)
    bad: list[Any] = [
        [{"output": "no input"}],
        [{"input": 3, "output": "x"}],
        [EXAMPLES[0], "not a dict"],
        [{"input": "ok", "output": object()}],
    ]
    for examples in bad:
        with pytest.raises(InvalidInputError):
            alice.add_examples(examples)
    with pytest.raises(InvalidInputError, match="keeps for itself"):
        alice.add_example(EXAMPLES[0], metadata={"feedback": 1.0})
    with pytest.raises(InvalidInputError, match="reserved"):
        alice.add_example(EXAMPLES[0], metadata={"namespace": "bob"})
    assert alice.select("convert", k=10) == before


def test_async_twins_select_what_the_sync_methods_select(
    make_examples: Callable[..., ExampleMemory],
) -> None:
    memory = make_examples(k=2, mmr=True)

    async def scenario() -> Any:
        ids = await memory.aadd_examples(EXAMPLES)
        await memory.aadd_example({"input": "convert 1 inch to cm", "output": "2.54 cm"})
        await memory.asave_context({"input": "convert 2 miles"}, {"output": "3.2 km"})
        await memory.afeedback(ids[0], 1.0)
        return (
            await memory.aselect_examples({"input": "convert units"}),
            await memory.aload_memory_variables({"input": "convert units"}),
        )

    selected, loaded = asyncio.run(scenario())
    assert selected == memory.select_examples({"input": "convert units"})
    assert loaded == memory.load_memory_variables({"input": "convert units"})
    assert len(selected) == 2


def test_examples_survive_a_restart_in_the_persistent_store(tmp_path: Path) -> None:
    options: dict[str, Any] = {"path": str(tmp_path / "chroma"), "embeddings": EMBEDDINGS}
    first = ExampleMemory(**options)
    first.add_examples(EXAMPLES)
    first.save_context({"input": "convert 4 miles"}, {"output": "6.4 km"})
    assert first.close(timeout=10)
    again = ExampleMemory(**options)
    assert len(again.select("convert", k=10)) == len(EXAMPLES) + 1


def test_feedback_right_after_a_background_save_is_never_lost(
    make_examples: Callable[..., ExampleMemory],
) -> None:
    # Each fresh namespace races its first writes with the ratings (lost 1 run in 6 while
    # the outbox's writer forgot every queued copy of an id, the rated one included).
    for run in range(12):
        memory = make_examples(write="background", k=10, min_feedback=0.5, namespace=(f"r{run}",))
        ids = []
        for i in range(3):
            memory.save_context({"input": f"task {i} done well"}, {"output": f"answer {i}"})
            ids.append(memory.last_turn_id)
            memory.feedback(ids[-1], 1.0)  # while the writer may still hold the turn
        assert sorted(e.id for e in memory.select("task done well")) == sorted(ids)
        assert memory.dead_letters() == []


def test_a_chain_with_another_output_key_loads_its_examples(
    make_examples: Callable[..., ExampleMemory],
) -> None:
    memory = make_examples(output_key="response")
    memory.save_context({"input": "convert 3 miles"}, {"response": "4.8 km"})
    shown = memory.load_memory_variables({"input": "convert 5 miles"})["examples"]
    assert shown == "Human: convert 3 miles\nAI: 4.8 km"


def test_a_diverse_selection_embeds_its_query_once(
    make_examples: Callable[..., ExampleMemory],
) -> None:
    """The search and MMR's diversity pass share the query's embedding."""
    embeddings = WordEmbeddings()
    memory = make_examples(k=2, mmr=True, embeddings=embeddings)
    memory.add_examples(EXAMPLES)
    selected = memory.select_examples({"input": "convert 3 feet to metres"})
    assert len(selected) == 2
    assert embeddings.queries == ["convert 3 feet to metres"]
