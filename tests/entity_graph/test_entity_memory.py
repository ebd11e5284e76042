"""EntityMemory: facts stated, contradicted, renamed, merged and retracted, none lost or doubled."""

from __future__ import annotations

import asyncio
import multiprocessing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import SystemMessage

from memories import EntityMemory, InvalidInputError, create_memory
from memories.kernel.accounting import Budget
from tests.entity_graph.fakes import GraphScript

SCRIPT: dict[str, list[dict[str, Any]]] = {
    "I live in Lisbon.": [
        {"op": "entity", "name": "Lisbon", "type": "place"},
        {"op": "relate", "subject": "User", "predicate": "lives_in", "object": "Lisbon"},
    ],
    "My sister Melanie is a painter.": [
        {"op": "entity", "name": "Melanie", "type": "person", "summary": "the user's sister"},
        {"op": "relate", "subject": "User", "predicate": "sister", "object": "Melanie"},
        {"op": "relate", "subject": "Melanie", "predicate": "occupation", "value": "painter"},
    ],
    "Melanie lives in Paris.": [
        {"op": "relate", "subject": "@Melanie", "predicate": "lives_in", "object": "Paris"},
    ],
    "I work at Acme.": [
        {"op": "relate", "subject": "User", "predicate": "works_at", "object": "Acme"},
    ],
    "My colleague Robert is great.": [
        {"op": "entity", "name": "Robert", "type": "person"},
        {"op": "relate", "subject": "User", "predicate": "colleague", "object": "Robert"},
    ],
    "Mel visited me last week.": [
        {"op": "entity", "name": "Mel", "type": "person"},
        {"op": "relate", "subject": "Mel", "predicate": "visited", "object": "User"},
    ],
    "Mel is short for Melanie, by the way.": [
        {"op": "merge", "id": "@Mel", "into": "@Melanie", "reason": "Mel is short for Melanie"},
    ],
    "I moved to Porto.": [
        {
            "op": "relate",
            "subject": "User",
            "predicate": "lives_in",
            "object": "Porto",
            "replaces": ["@User lives_in Lisbon"],
        },
    ],
    "Robert goes by Bob now.": [{"op": "entity", "id": "@Robert", "name": "Bob"}],
    "I have a dog called Rex.": [
        {"op": "relate", "subject": "User", "predicate": "has_pet", "object": "Rex"},
    ],
    "Rex ran away, I no longer have a dog.": [
        {"op": "end", "subject": "User", "predicate": "has_pet", "object": "Rex"},
    ],
    "Melanie is a sculptor now.": [
        {
            "op": "relate",
            "subject": "Melanie",
            "predicate": "occupation",
            "value": "sculptor",
            "replaces": ["@Melanie occupation painter"],
        },
    ],
    "I left Acme and joined Globex.": [
        {
            "op": "relate",
            "subject": "User",
            "predicate": "works_at",
            "object": "Globex",
            "replaces": ["@User works_at Acme"],
        },
    ],
    "Bob is my manager at Globex.": [
        {"op": "relate", "subject": "User", "predicate": "manager", "object": "@Bob"},
    ],
    "Actually I never lived in Porto, it was Braga.": [
        {
            "op": "relate",
            "subject": "User",
            "predicate": "lives_in",
            "object": "Braga",
            "replaces": ["@User lives_in Porto"],
        },
    ],
    "I live in Braga, as I said.": [
        {"op": "relate", "subject": "User", "predicate": "lives_in", "object": "Braga"},
    ],
}
FACTS = list(SCRIPT)
FILLER = [f"Small talk {i}: what do you think of item {i}?" for i in range(24)]
# 40 turns: the facts in order, small talk between them.
CONVERSATION = [line for pair in zip(FACTS, FILLER, strict=False) for line in pair] + FILLER[16:]
EXPECTED_CURRENT = {
    "Melanie lives_in Paris",
    "Melanie occupation sculptor",
    "Melanie visited User",
    "User colleague Bob",
    "User lives_in Braga",
    "User manager Bob",
    "User sister Melanie",
    "User works_at Globex",
}
EXPECTED_CLOSED = {
    "Melanie occupation painter": "contradicted",
    "User has_pet Rex": "retracted",
    "User lives_in Lisbon": "contradicted",
    "User lives_in Porto": "contradicted",
    "User works_at Acme": "contradicted",
}
EXPECTED_ENTITIES = [
    "Acme", "Bob", "Braga", "Globex", "Lisbon", "Melanie", "Paris", "Porto", "Rex", "User",
]  # fmt: skip


def converse(memory: EntityMemory, lines: list[str]) -> None:
    for line in lines:
        memory.save_context({"input": line}, {"output": "ok"})


def current(memory: EntityMemory) -> list[str]:
    return sorted(r.text() for r in memory.relations())


def closed(memory: EntityMemory) -> dict[str, str | None]:
    return {r.text(): r.ended for r in memory.history()}


def assert_expected_graph(memory: EntityMemory) -> None:
    assert len(CONVERSATION) == 40
    assert current(memory) == sorted(EXPECTED_CURRENT)
    assert closed(memory) == EXPECTED_CLOSED
    assert len(memory.history()) == len(EXPECTED_CLOSED)  # each closed once, none doubled
    assert [e.name for e in memory.entities()] == EXPECTED_ENTITIES
    assert memory.status().pending == 0


def test_a_scripted_conversation_ends_with_exactly_the_expected_graph(tmp_path: Path) -> None:
    memory = EntityMemory(url=f"sqlite:///{tmp_path / 'g.db'}", llm=GraphScript(script=SCRIPT))
    converse(memory, CONVERSATION)
    assert_expected_graph(memory)
    melanie = memory.entity("Mel")
    assert melanie is not None and melanie.name == "Melanie" and "Mel" in melanie.aliases
    bob = memory.entity("Robert")
    assert bob is not None and bob.name == "Bob" and bob.aliases == ("Robert",)
    (lisbon,) = [r for r in memory.history() if r.object == "Lisbon"]
    assert lisbon.turns[0][0].text == "I live in Lisbon."
    assert lisbon.ended_by[0][0].text == "I moved to Porto."
    assert lisbon.invalid_at is not None and lisbon.invalid_at >= lisbon.valid_at


def test_a_model_failing_every_other_call_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    faults: dict[int, Any] = {}
    for call in range(2, 400, 2):  # every other call fails, in turn three ways
        faults[call] = [
            RuntimeError("provider down"),
            "I think the graph is fine.",
            '[{"op": "end", "id": "r99"}]',
        ][(call // 2) % 3]
    model = GraphScript(script=SCRIPT, faults=faults)
    memory = EntityMemory(url=f"sqlite:///{tmp_path / 'g.db'}", llm=model, max_retries=1)
    converse(memory, CONVERSATION)  # never raises
    while memory.refresh().status != "idle":
        pass
    assert_expected_graph(memory)
    retried = [p[-1].text for p in model.prompts if "Rejected" in p[-1].text]
    assert any("r99" in text for text in retried)
    assert any("not a JSON array" in text for text in retried)


def test_a_failed_update_applies_nothing_and_keeps_the_turns(tmp_path: Path) -> None:
    bad = '[{"op": "entity", "name": "Ana"}, {"op": "relate", "subject": "Ana"}]'
    model = GraphScript(script=SCRIPT, faults={1: bad, 2: bad})
    memory = EntityMemory(url=f"sqlite:///{tmp_path / 'g.db'}", llm=model, max_retries=1)
    converse(memory, ["I live in Lisbon."])
    status = memory.status()
    assert status.pending == 1 and status.failures == 1
    assert "predicate" in (status.last_error or "")
    assert memory.entities() == [] and memory.relations() == []
    assert memory.refresh().status == "updated"
    assert current(memory) == ["User lives_in Lisbon"]
    assert memory.status().failures == 0


def test_a_spent_budget_defers_the_update_and_keeps_the_turn(tmp_path: Path) -> None:
    # as the collection, the profile and the instructions do: a save never raises for it
    budget = Budget(calls=1, per="day")
    model = GraphScript(script=SCRIPT)
    memory = EntityMemory(url=f"sqlite:///{tmp_path / 'g.db'}", llm=model, budget=budget)
    memory.save_context({"input": "I live in Lisbon."}, {"output": "ok"})
    memory.save_context({"input": "I work at Acme."}, {"output": "ok"})
    status = memory.status()
    assert (model.calls, status.pending, status.failures) == (1, 1, 0)
    assert status.deferred is not None and "budget" in status.deferred


def test_the_graph_and_the_queue_survive_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'g.db'}"
    first = EntityMemory(url=url, namespace=("ana",), llm=GraphScript(script=SCRIPT))
    converse(first, CONVERSATION[:10])
    first.policy = "manual"
    converse(first, CONVERSATION[10:])
    again = EntityMemory(url=url, namespace=("ana",), llm=GraphScript(script=SCRIPT))
    assert again.status().pending == 30
    assert current(again) == current(first)
    again.refresh()
    assert_expected_graph(again)
    assert EntityMemory(url=url, namespace=("bo",)).relations() == []  # namespaces isolate


def test_as_of_reads_the_graph_at_a_past_time(tmp_path: Path) -> None:
    memory = EntityMemory(url=f"sqlite:///{tmp_path / 'g.db'}", llm=GraphScript(script=SCRIPT))
    converse(memory, ["I live in Lisbon.", "I work at Acme."])
    then = datetime.now(UTC)
    converse(memory, ["I moved to Porto.", "I left Acme and joined Globex."])
    past = sorted(r.text() for r in memory.relations(as_of=then))
    assert past == ["User lives_in Lisbon", "User works_at Acme"]
    assert current(memory) == ["User lives_in Porto", "User works_at Globex"]
    assert "Lisbon" in memory.recall("where do I live?", as_of=then).text()
    with pytest.raises(InvalidInputError, match="timezone-aware"):
        memory.relations(as_of=datetime(2020, 1, 1))


def test_recall_follows_one_more_hop_within_the_token_budget(tmp_path: Path) -> None:
    memory = EntityMemory(url=f"sqlite:///{tmp_path / 'g.db'}", llm=GraphScript(script=SCRIPT))
    converse(memory, FACTS[:3])
    text = memory.load_memory_variables({"input": "Where does my sister live?"})["entities"]
    assert "User sister Melanie" in text and "Melanie lives_in Paris" in text
    one_hop = memory.model_copy(update={"hops": 1})
    assert "Paris" not in one_hop.recall("what do I do?").text()
    tight = memory.model_copy(update={"max_tokens": 12})
    shown = tight.recall("Where does my sister live?").text()
    assert 0 < tight._counter([SystemMessage(shown)]) <= 12
    messages = memory.model_copy(update={"return_messages": True})
    (message,) = messages.load_memory_variables({"input": "Melanie?"})["entities"]
    assert "Melanie" in message.text


def test_merges_record_their_reason_and_undo_restores_both(tmp_path: Path) -> None:
    memory = EntityMemory(url=f"sqlite:///{tmp_path / 'g.db'}")  # the rule-based extractor
    converse(memory, ["My sister Melanie is kind.", "Mel called me today."])
    (melanie,) = [e for e in memory.entities() if e.name == "Melanie"]
    assert "Mel" in melanie.aliases
    (merged,) = memory.merges()
    assert merged.name == "Mel" and merged.merge_reason == "'Mel' is a short form of 'Melanie'"
    assert merged.merged_into == melanie.id
    memory.undo_merge("Mel")
    assert memory.merges() == []
    assert sorted(e.name for e in memory.entities()) == ["Mel", "Melanie", "User"]
    memory.merge("Mel", "Melanie", reason="the same sister")
    assert memory.entity("Mel") == memory.entity("Melanie")


def test_direct_operations_are_checked_and_applied_all_or_none(tmp_path: Path) -> None:
    memory = EntityMemory(url=f"sqlite:///{tmp_path / 'g.db'}", single_valued=["lives_in"])
    memory.apply([{"op": "relate", "subject": "Ana", "predicate": "lives in", "object": "Rome"}])
    with pytest.raises(InvalidInputError) as raised:
        memory.apply(
            [
                {"op": "relate", "subject": "Ana", "predicate": "likes", "value": "tea"},
                {"op": "merge", "id": "Ana", "into": "Nobody", "reason": "?"},
                {"op": "fly"},
            ]
        )
    assert "Nobody" in str(raised.value) and "fly" in str(raised.value)
    assert current(memory) == ["Ana lives_in Rome"]
    memory.apply([{"op": "relate", "subject": "Ana", "predicate": "lives_in", "object": "Oslo"}])
    assert current(memory) == ["Ana lives_in Oslo"]  # single-valued: Rome closed
    assert [r.text() for r in memory.history()] == ["Ana lives_in Rome"]
    memory.clear()
    assert memory.relations() == [] and len(memory.history()) == 2


def test_the_rule_based_extractor_keeps_a_usable_graph(tmp_path: Path) -> None:
    memory = EntityMemory(url=f"sqlite:///{tmp_path / 'g.db'}")
    converse(
        memory,
        [
            "I live in Lisbon. My favourite colour is blue.",
            "Anna is my friend.",
            "I moved to Porto last year.",
            "My favourite colour is green.",
            "I work at Acme.",
            "I no longer work at Acme.",
            "Anna's husband is Tom. Tom works at Globex. She lives in Oslo.",
        ],
    )
    assert current(memory) == [
        "Anna husband Tom",
        "Tom works_at Globex",
        "User favourite_colour green",
        "User friend Anna",
        "User lives_in Porto",
    ]
    assert sorted(closed(memory)) == [
        "User favourite_colour blue",
        "User lives_in Lisbon",
        "User works_at Acme",
    ]


def _update(args: tuple[str, str]) -> None:
    url, worker = args
    memory = EntityMemory(url=url, namespace=("shared",))
    for i in "abcdefgh":
        memory.save_context({"input": f"My pet{worker}{i} is Pet{worker}{i}."}, {"output": "ok"})


def test_two_processes_updating_one_namespace_lose_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        pool.map_async(_update, [(url, "x"), (url, "y")]).get(timeout=300)
    memory = EntityMemory(url=url, namespace=("shared",))
    expected = [f"User pet{w}{i} Pet{w}{i}" for w in "xy" for i in "abcdefgh"]
    assert current(memory) == sorted(expected)
    assert [e.name for e in memory.entities()].count("User") == 1
    assert len(memory.entities()) == 17 and memory.status().pending == 0


def test_config_round_trips_and_async_twins_do_the_same_work(tmp_path: Path) -> None:
    memory = create_memory(
        {"type": "entity", "url": f"sqlite:///{tmp_path / 'g.db'}", "hops": 1, "max_tokens": 300}
    )
    assert isinstance(memory, EntityMemory)
    assert create_memory(memory.to_config()).to_config() == memory.to_config()

    async def run() -> None:
        await memory.asave_context({"input": "I live in Lisbon."}, {"output": "ok"})
        assert [r.text() for r in await memory.arelations()] == ["User lives_in Lisbon"]
        loaded = await memory.aload_memory_variables({"input": "Where do I live?"})
        assert "User lives_in Lisbon" in loaded["entities"]
        await memory.aapply(
            [{"op": "end", "subject": "User", "predicate": "lives_in", "object": "Lisbon"}]
        )
        assert [r.ended for r in await memory.ahistory()] == ["retracted"]
        assert (await memory.astatus()).pending == 0

    asyncio.run(run())


def test_the_background_policy_folds_turns_in_off_the_hot_path(tmp_path: Path) -> None:
    memory = EntityMemory(
        url=f"sqlite:///{tmp_path / 'g.db'}",
        llm=GraphScript(script=SCRIPT),
        policy="background",
        debounce=0.05,
    )
    converse(memory, FACTS[:4])
    assert memory.flush(timeout=30)
    assert current(memory) == [
        "Melanie lives_in Paris",
        "Melanie occupation painter",
        "User lives_in Lisbon",
        "User sister Melanie",
        "User works_at Acme",
    ]
    assert memory.status().pending == 0


def test_a_model_with_tool_calling_answers_through_the_graph_tool(tmp_path: Path) -> None:
    from langchain_core.messages import AIMessage

    from memories.testing import ScriptedChatModel

    def call(*operations: dict[str, Any], name: str = "update_graph") -> AIMessage:
        args = {"operations": list(operations)}
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": "c1"}])

    relate = {"op": "relate", "subject": "User", "predicate": "lives_in", "object": "Oslo"}
    model = ScriptedChatModel(
        responses=[call(relate, name="update_memories"), call(relate)], echo=False
    )
    memory = EntityMemory(url=f"sqlite:///{tmp_path / 'g.db'}", llm=model)
    converse(memory, ["I live in Oslo."])
    assert current(memory) == ["User lives_in Oslo"]
    first, second = model.prompts
    assert "Call update_graph" in first[0].text  # the tool's reply format, not JSON text
    assert "the only tool is 'update_graph'" in second[-1].text  # the wrong tool, sent back
