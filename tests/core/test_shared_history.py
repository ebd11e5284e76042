"""Members of a combined memory that share one history session write each turn once.

The natural "recent turns plus a summary" config puts a window and a summary
on one history; every path that saves a combined memory (a chain's
``save_context``, ``with_memory``, the agent middleware, the LangGraph nodes,
all through :func:`memories.core.combined.saves_of`) writes each turn to that
history once, and each member's derived state follows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage

from memories import (
    CombinedMemory,
    ConfigError,
    InMemoryHistory,
    SQLHistory,
    SQLiteHistory,
    create_memory,
)
from memories.faces.exchange import apply_message_edits, asave_exchange, save_exchange
from memories.stores.history.base import ChatHistory

TURNS = [
    ("Hi, I'm Ada.", "Hello Ada!"),
    ("I live in Oslo.", "A fine city."),
    ("I drink green tea.", "Noted."),
    ("My sister is Mia.", "Nice."),
]


def config(db: Path) -> dict[str, Any]:
    history = {"type": "sqlite", "path": str(db), "session_id": "u42"}
    return {
        "type": "combined",
        "memories": [
            {"type": "window", "k": 2, "memory_key": "recent", "history": history},
            {"type": "summary", "memory_key": "summary", "history": history},
        ],
    }


def stored(db: Path) -> list[str]:
    return [m.text for m in SQLiteHistory(db, session_id="u42").messages]


def said() -> list[str]:
    return [text for turn in TURNS for text in turn]


def test_a_window_and_a_summary_on_one_history_store_each_turn_once(tmp_path: Path) -> None:
    memory = create_memory(config(tmp_path / "chat.db"))
    for user, answer in TURNS:
        memory.save_context({"input": user}, {"output": answer})
    assert stored(tmp_path / "chat.db") == said()  # 8 messages for 4 turns
    shown = memory.load_memory_variables({})
    assert (
        shown["recent"]
        == "Human: I drink green tea.\nAI: Noted.\nHuman: My sister is Mia.\nAI: Nice."
    )
    summary = memory.memories[1]
    assert summary.chat_memory.load_state(summary.state_key) is not None  # its state followed
    assert "Mia" in shown["summary"]


def test_one_sqlite_file_named_by_two_urls_is_one_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spellings = ["sqlite:///chat.db", f"sqlite:///{tmp_path / 'chat.db'}?timeout=5"]
    histories = [{"type": "sql", "url": url, "session_id": "u42"} for url in spellings]
    memory = create_memory(
        {
            "type": "combined",
            "memories": [
                {"type": "buffer", "memory_key": "a", "history": histories[0]},
                {"type": "window", "k": 2, "memory_key": "b", "history": histories[1]},
            ],
        }
    )
    memory.save_context({"input": "hi"}, {"output": "hello"})
    assert stored(tmp_path / "chat.db") == ["hi", "hello"]  # written once, not once a member


def test_async_saves_write_each_turn_once_too(tmp_path: Path) -> None:
    memory = create_memory(config(tmp_path / "chat.db"))

    async def converse() -> None:
        for user, answer in TURNS:
            await memory.asave_context({"input": user}, {"output": answer})

    asyncio.run(converse())
    assert stored(tmp_path / "chat.db") == said()


@pytest.mark.parametrize("runner", ["sync", "async"])
def test_agent_turns_on_a_shared_history_are_written_once(tmp_path: Path, runner: str) -> None:
    memory = create_memory(config(tmp_path / "chat.db"))
    for user, answer in TURNS:
        turn = [HumanMessage(user), AIMessage(answer)]
        if runner == "sync":
            save_exchange(memory, turn)
        else:
            asyncio.run(asave_exchange(memory, turn))
    assert stored(tmp_path / "chat.db") == said()


def test_an_edit_of_a_shared_history_is_applied_once_and_every_member_follows(
    tmp_path: Path,
) -> None:
    memory = create_memory(config(tmp_path / "chat.db"))
    for user, answer in TURNS:
        save_exchange(memory, [HumanMessage(user, id=f"h-{user}"), AIMessage(answer)])
    assert apply_message_edits(memory, [RemoveMessage(id="h-My sister is Mia.")]) == 2
    assert "My sister is Mia." not in stored(tmp_path / "chat.db")
    window, summary = memory.memories
    assert "Mia" not in window.buffer and "Mia" not in summary.buffer


def test_a_nested_combined_memory_shares_the_history_of_its_parent(tmp_path: Path) -> None:
    outer = config(tmp_path / "chat.db")
    window, summary = outer["memories"]
    outer["memories"] = [window, {"type": "combined", "memories": [summary]}]
    memory = create_memory(outer)
    for user, answer in TURNS:
        memory.save_context({"input": user}, {"output": answer})
    assert stored(tmp_path / "chat.db") == said()


@pytest.mark.parametrize(
    "history",
    [
        lambda: InMemoryHistory(session_id="u42"),
        # Private in-memory databases all have the URL "sqlite://" and are still two logs.
        lambda: SQLHistory("sqlite://", session_id="u42"),
    ],
    ids=["in-memory", "private-sqlite"],
)
def test_members_on_different_histories_each_write(history: Callable[[], ChatHistory]) -> None:
    # In-process histories are their own logs even under one session id.
    first, second = history(), history()
    memory = CombinedMemory(
        memories=[
            create_memory({"type": "buffer", "memory_key": "a", "chat_memory": first}),
            create_memory({"type": "buffer", "memory_key": "b", "chat_memory": second}),
        ]
    )
    memory.save_context({"input": "hi"}, {"output": "hello"})
    assert [m.text for m in first.messages] == [m.text for m in second.messages] == ["hi", "hello"]


def test_an_entity_memory_following_a_shared_history_still_updates_its_entities(
    tmp_path: Path,
) -> None:
    from tests.entities.fakes import RuleModel

    history = {"type": "sqlite", "path": str(tmp_path / "chat.db"), "session_id": "u42"}
    memory = create_memory(
        {
            "type": "combined",
            "memories": [
                {"type": "window", "k": 2, "memory_key": "recent", "history": history},
                {"type": "conversation_entity", "llm": RuleModel(), "history": history},
            ],
        }
    )
    for user, answer in TURNS:  # as a chain does: load (entities found), then save
        memory.load_memory_variables({"input": user})
        memory.save_context({"input": user}, {"output": answer})
    assert stored(tmp_path / "chat.db") == said()
    entities = memory.memories[1]
    assert "Oslo" in entities.entity_store.get("Oslo", "")


def test_two_summaries_on_one_history_with_different_prompts_are_refused(tmp_path: Path) -> None:
    history = {"type": "sqlite", "path": str(tmp_path / "chat.db"), "session_id": "u42"}
    prompt = "Summary so far: {summary}\nNew lines: {new_lines}\nIn French:"
    with pytest.raises(ConfigError, match=r"'english' and 'french' \(summary\).*own session_id"):
        create_memory(
            {
                "type": "combined",
                "memories": [
                    {"type": "summary", "memory_key": "english", "history": history},
                    {
                        "type": "summary",
                        "memory_key": "french",
                        "history": history,
                        "prompt": prompt,
                    },
                ],
            }
        )


def test_one_summary_under_two_names_on_one_history_is_one_state(tmp_path: Path) -> None:
    history = {"type": "sqlite", "path": str(tmp_path / "chat.db"), "session_id": "u42"}
    memory = create_memory(
        {
            "type": "combined",
            "memories": [
                {"type": "summary", "memory_key": "a", "history": history},
                {"type": "summary", "memory_key": "b", "history": history},
                {"type": "window", "k": 1, "memory_key": "c", "history": history},
                {
                    "type": "window",
                    "k": 1,
                    "memory_key": "d",
                    "history": history,
                    "return_messages": True,
                },
            ],
        }
    )
    for user, answer in TURNS:
        memory.save_context({"input": user}, {"output": answer})
    shown = memory.load_memory_variables({})
    assert shown["a"] == shown["b"] and "Mia" in shown["a"]
    assert stored(tmp_path / "chat.db") == said()


@pytest.mark.parametrize("mode", ["inputs", "messages"])
def test_with_memory_writes_a_shared_history_once(tmp_path: Path, mode: str) -> None:
    from langchain_core.runnables import RunnableLambda

    from memories import with_memory

    memory = create_memory(config(tmp_path / "chat.db"))
    answers = iter(answer for _, answer in TURNS)
    if mode == "inputs":
        chain = with_memory(RunnableLambda(lambda _: next(answers)), memory)
        for user, _ in TURNS:
            chain.invoke({"input": user})
    else:
        chain = with_memory(RunnableLambda(lambda _: AIMessage(next(answers))), memory)
        for user, _ in TURNS:
            chain.invoke([HumanMessage(user)])
    assert stored(tmp_path / "chat.db") == said()
