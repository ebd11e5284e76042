"""Issue 36: without a model a collection keeps facts, not questions, and a correction updates."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memories import CollectionMemory
from memories.long_term.collection.offline import statements

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"
TEA = "I prefer tea over coffee, green tea especially."
COFFEE = "Actually I've switched to coffee lately, black, no sugar."


@pytest.fixture
def memory(tmp_path: Path) -> CollectionMemory:
    return offline_collection(tmp_path)


def offline_collection(tmp_path: Path, **options: Any) -> CollectionMemory:
    return CollectionMemory(
        mode="memory",
        embeddings=EMBEDDINGS,
        url=f"sqlite:///{tmp_path / 'ledger.db'}",
        namespace=("users", "maya"),
        **options,
    )


def say(memory: CollectionMemory, *lines: str) -> None:
    for line in lines:
        memory.save_context({"input": line}, {"output": "Noted."})


def test_questions_requests_and_greetings_are_not_statements() -> None:
    assert statements("What do you know about me so far?") == []
    assert statements("And what do I drink these days?") == []
    assert statements("Can you remind me to pack my field notebook?") == []
    assert statements("Please remind me to call Ines") == []
    assert statements("Hi! Thanks.") == []
    assert statements("Hi! I'm Maya, a marine biologist.") == ["I'm Maya, a marine biologist."]
    assert statements(COFFEE) == ["I've switched to coffee lately, black, no sugar."]


def test_a_question_is_not_a_memory(memory: CollectionMemory) -> None:
    """It was stored verbatim: "What do you know about me so far?" became a memory."""
    say(memory, "I live in Lisbon.", "What do you know about me so far?")
    assert [r.content for r in memory.list()] == ["I live in Lisbon."]


def test_a_correction_updates_the_memory_it_is_about_and_keeps_both_versions(
    memory: CollectionMemory,
) -> None:
    """ "Tea" then "coffee" stood side by side; now one memory, its second version the coffee."""
    say(memory, "I study octopuses in tide pools.", TEA, COFFEE)
    records = {r.content: r for r in memory.list()}
    assert sorted(records) == [
        "I study octopuses in tide pools.",
        "I've switched to coffee lately, black, no sugar.",
    ]
    drink = records["I've switched to coffee lately, black, no sugar."]
    first, second = memory.history(drink.id)
    assert (first.content, second.content) == (TEA, drink.content)
    assert second.turns[0][0].text == COFFEE  # the turn that caused it
    memory.rollback(drink.id, first.version)
    assert memory.get(drink.id).content == TEA


def test_a_correction_of_nothing_remembered_is_inserted(memory: CollectionMemory) -> None:
    say(memory, "I study octopuses.", "Actually I moved to Porto.")
    assert sorted(r.content for r in memory.list()) == ["I moved to Porto.", "I study octopuses."]


def test_a_correction_in_the_same_update_replaces_the_insert(tmp_path: Path) -> None:
    memory = offline_collection(tmp_path, policy="manual")
    say(memory, TEA, COFFEE)
    memory.refresh()
    assert [r.content for r in memory.list()] == [
        "I've switched to coffee lately, black, no sugar."
    ]


def test_the_async_twin_updates_as_the_sync_one(memory: CollectionMemory) -> None:
    async def chat() -> None:
        for line in (TEA, COFFEE, "What do I drink?"):
            await memory.asave_context({"input": line}, {"output": "Noted."})

    asyncio.run(chat())
    (drink,) = memory.list()
    assert drink.version == 2 and "coffee" in str(drink.content)
