"""The battery of checks every history backend passes.

A backend's test module subclasses :class:`HistoryContract` and provides a
``make_history`` fixture (``session_id -> history``); every backend then runs
the same checks, sync and async.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from memories.history import ChatHistory

MakeHistory = Callable[[str], ChatHistory]


def rich_messages() -> list[BaseMessage]:
    """Messages using every field a round trip must keep."""
    return [
        SystemMessage(content="You are terse.", id="sys-1"),
        HumanMessage(content="Weather in Paris? ☀️ — ünïcödé", name="alice", id="h-1"),
        AIMessage(
            content="",
            id="ai-1",
            tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "call-1"}],
            additional_kwargs={"refusal": None, "extra": [1, 2, {"x": "y"}]},
            response_metadata={"model_name": "fake", "finish_reason": "tool_calls"},
        ),
        ToolMessage(content="18C, sunny", tool_call_id="call-1", name="weather", id="t-1"),
        AIMessage(content=[{"type": "text", "text": "It is 18C and sunny."}], id="ai-2"),
    ]


class HistoryContract:
    """Subclass with a ``make_history`` fixture returning ``session_id -> history``."""

    #: Two objects for one session id see the same log (a database); else one object is shared.
    shared_across_instances = True

    @pytest.fixture
    def make_history(self) -> MakeHistory:  # pragma: no cover - overridden
        raise NotImplementedError

    def test_messages_round_trip_exactly(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        sent = rich_messages()
        history.append(sent)
        assert [e.message for e in history.entries()] == sent
        assert history.messages == sent

    def test_sequence_numbers_increase(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        first = history.append([HumanMessage("a"), AIMessage("b")])
        second = history.append([HumanMessage("c")])
        seqs = first + second
        assert seqs == sorted(seqs) and len(set(seqs)) == 3
        assert [e.seq for e in history.entries()] == seqs

    def test_entries_after_and_last(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        seqs = history.append([HumanMessage(str(i)) for i in range(10)])
        assert [e.message.content for e in history.entries(after=seqs[6])] == ["7", "8", "9"]
        assert [e.message.content for e in history.entries(last=2)] == ["8", "9"]
        assert [e.message.content for e in history.entries(after=seqs[8], last=5)] == ["9"]
        assert history.entries(last=0) == []
        assert history.entries(after=seqs[-1]) == []

    def test_appends_from_threads_lose_nothing(self, make_history: MakeHistory) -> None:
        def writer(n: int) -> None:
            history = make_history("shared")
            for i in range(20):
                history.append([HumanMessage(f"{n}-{i}"), AIMessage(f"{n}-{i}")])

        if not self.shared_across_instances:
            histories = {"shared": make_history("shared")}
            make_history = lambda session_id: histories[session_id]  # noqa: E731
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        entries = make_history("shared").entries()
        assert len(entries) == 160
        # each turn's two messages stay adjacent: an append is atomic
        for human, ai in zip(entries[::2], entries[1::2], strict=True):
            assert human.message.content == ai.message.content

    def test_sessions_are_isolated(self, make_history: MakeHistory) -> None:
        alice, bob = make_history("alice"), make_history("bob")
        alice.append([HumanMessage("alice's secret")])
        alice.save_state("k", {"who": "alice"})
        bob.append([HumanMessage("bob here")])
        assert [e.message.content for e in bob.entries()] == ["bob here"]
        assert bob.load_state("k") is None
        bob.clear()
        assert [e.message.content for e in alice.entries()] == ["alice's secret"]

    def test_first_entry(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        assert history.first_entry() is None
        history.append([SystemMessage("rules"), HumanMessage("hi")])
        first = history.first_entry()
        assert first is not None and first.message == SystemMessage("rules")

    def test_start_of_last_exchanges(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        seqs = history.append(
            [
                HumanMessage("q1"),
                AIMessage("a1"),
                HumanMessage("q2"),
                AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c"}]),
                ToolMessage("r", tool_call_id="c"),
                AIMessage("a2"),
                HumanMessage("q3"),
                AIMessage("a3"),
            ]
        )
        assert history.start_of_last_exchanges(1) == seqs[6]
        assert history.start_of_last_exchanges(2) == seqs[2]
        assert history.start_of_last_exchanges(3) == seqs[0]
        assert history.start_of_last_exchanges(4) is None

    def test_state_round_trips_and_is_per_key(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        assert history.load_state("a") is None
        history.save_state("a", {"cursor": 3, "counts": [1, 2], "text": "ü"})
        history.save_state("b", {"x": None})
        history.save_state("a", {"cursor": 4})
        assert history.load_state("a") == {"cursor": 4}
        assert history.load_state("b") == {"x": None}

    def test_clear_erases_messages_and_state(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        history.append([HumanMessage("hi")])
        history.save_state("k", {"v": 1})
        history.clear()
        assert history.entries() == []
        assert history.load_state("k") is None
        history.append([HumanMessage("again")])
        assert [e.message.content for e in history.entries()] == ["again"]

    def test_langchain_interface(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        history.add_user_message("hi")
        history.add_ai_message("hello")
        assert history.messages == [HumanMessage("hi"), AIMessage("hello")]

    async def test_async_twins_match_sync(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        seqs = await history.aappend(rich_messages())
        assert [e.seq for e in await history.aentries()] == seqs
        assert [e.message for e in await history.aentries(last=2)] == rich_messages()[-2:]
        await history.asave_state("k", {"v": 1})
        assert await history.aload_state("k") == {"v": 1}
        assert (await history.afirst_entry()) == history.first_entry()
        assert await history.astart_of_last_exchanges(1) == history.start_of_last_exchanges(1)
        assert await history.aget_messages() == rich_messages()
        await history.aclear()
        assert await history.aentries() == []
