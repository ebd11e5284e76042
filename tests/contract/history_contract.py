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
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from memories.errors import InvalidInputError
from memories.stores.history import ChatHistory, Edit, Entry
from tests.helpers import joined

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
        assert len(history.entries(last=25)) == 10
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
        joined(*threads)
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
        assert [e.seq for e in history.last_exchanges(2)] == seqs[2:]
        assert [e.seq for e in history.last_exchanges(9)] == seqs
        history.delete([seqs[6]])  # the last exchange's question: two exchanges now start at q1
        assert [e.seq for e in history.last_exchanges(2)] == [*seqs[:6], seqs[7]]

    def test_state_round_trips_and_is_per_key(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        assert history.load_state("a") is None
        history.save_state("a", {"cursor": 3, "counts": [1, 2], "text": "ü"})
        history.save_state("b", {"x": None})
        history.save_state("a", {"cursor": 4})
        assert history.load_state("a") == {"cursor": 4}
        assert history.load_state("b") == {"x": None}

    def test_state_keys_lists_this_sessions_keys_by_prefix(self, make_history: MakeHistory) -> None:
        history, other = make_history("s"), make_history("t")
        for key in ("summary:b", "summary:a", "window:a", "sum%_mary:c"):
            history.save_state(key, {"v": 1})
        other.save_state("summary:z", {"v": 2})
        assert history.state_keys() == ["sum%_mary:c", "summary:a", "summary:b", "window:a"]
        assert history.state_keys("summary:") == ["summary:a", "summary:b"]
        assert history.state_keys("sum%_") == ["sum%_mary:c"]  # no LIKE wildcards

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

    # -- edits by id (memories.stores.history.edits) ------------------------------------

    def test_write_follows_langgraphs_add_messages(self, make_history: MakeHistory) -> None:
        """The same batches through LangGraph's reducer and through write() show the same list."""
        from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

        batches: list[list[BaseMessage]] = [
            [HumanMessage("q1", id="h1"), AIMessage("a1", id="a1")],
            [HumanMessage("q2", id="h2"), AIMessage("a2", id="a2")],
            [AIMessage("a1, corrected", id="a1"), RemoveMessage(id="h2")],
            [HumanMessage("q3", id="h3"), AIMessage("draft", id="a3"), AIMessage("final", id="a3")],
            [HumanMessage("q4", id="h4"), RemoveMessage(id="h4"), RemoveMessage(id="a2")],
            [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("q5", id="h5")],
            [AIMessage("a5", id="a5")],
        ]
        history = make_history("s")
        expected: list[BaseMessage] = []
        for batch in batches:
            expected = add_messages(expected, batch)  # type: ignore[assignment]
            history.write(batch)
            assert history.messages == expected

    def test_edits_keep_the_log_and_change_what_is_shown(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        seqs = history.append([HumanMessage("q1", id="h1"), AIMessage("a1"), HumanMessage("q2")])
        history.replace("h1", HumanMessage("q1, reworded"))
        history.delete([seqs[1]])  # a message without an id is named by its seq
        shown = history.entries()
        assert [(e.seq, e.message.content) for e in shown] == [
            (seqs[0], "q1, reworded"),
            (seqs[2], "q2"),
        ]
        assert shown[0].message.id == "h1"  # the replacement keeps the id it replaced
        written = history.records()
        assert [r.message.content for r in written if isinstance(r, Entry)] == ["q1", "a1", "q2"]
        assert [(r.target, r.kind) for r in written if isinstance(r, Edit)] == [
            (seqs[0], "replace"),
            (seqs[1], "remove"),
        ]
        assert history.entries(last=1)[0].message.content == "q2"
        assert history.start_of_last_exchanges(2) == seqs[0]
        assert history.first_entry() == shown[0]

    def test_keep_last_never_keeps_a_tool_result_without_its_call(
        self, make_history: MakeHistory
    ) -> None:
        history = make_history("s")
        history.append(rich_messages())
        history.keep_last(2)  # the last two are a tool result and the answer: the call stays too
        assert [m.id for m in history.messages] == ["ai-1", "t-1", "ai-2"]
        history.keep_last(0)
        assert history.messages == []
        history.append([HumanMessage("after")])
        assert [m.content for m in history.messages] == ["after"]

    def test_removing_a_tool_call_or_result_leaves_no_orphan(
        self, make_history: MakeHistory
    ) -> None:
        history = make_history("s")
        history.append(rich_messages())
        history.delete(["t-1"])
        # The call had no text of its own: it went with its result.
        assert [m.id for m in history.messages] == ["sys-1", "h-1", "ai-2"]

        other = make_history("t")
        talkative = AIMessage(
            "Let me check.", id="ai-1", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]
        )
        other.append(
            [HumanMessage("q", id="h"), talkative, ToolMessage("r", tool_call_id="c1", id="t")]
        )
        other.delete(["t"])
        [_, kept] = other.messages
        assert isinstance(kept, AIMessage) and kept.text == "Let me check." and not kept.tool_calls

        third = make_history("u")
        third.append(rich_messages())
        third.delete(["ai-1"])
        assert [m.id for m in third.messages] == ["sys-1", "h-1", "ai-2"]

    def test_a_bad_edit_writes_nothing(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        history.append([HumanMessage("q", id="h")])
        before = history.records()
        for bad in (
            lambda: history.delete(["h", "missing"]),
            lambda: history.delete([]),
            lambda: history.delete("h"),  # type: ignore[arg-type]
            lambda: history.delete([99]),
            lambda: history.replace("missing", HumanMessage("x")),
            lambda: history.replace("h", "not a message"),  # type: ignore[arg-type]
            lambda: history.write([HumanMessage("new"), RemoveMessage(id="missing")]),
            lambda: history.keep_last(-1),
            lambda: history.append([RemoveMessage(id="h")]),
        ):
            with pytest.raises(InvalidInputError):
                bad()
        assert history.records() == before

    def test_edits_stay_in_their_session(self, make_history: MakeHistory) -> None:
        alice, bob = make_history("alice"), make_history("bob")
        [alices] = alice.append([HumanMessage("alice", id="same-id")])
        bob.append([HumanMessage("bob", id="same-id")])
        if alices not in {e.seq for e in bob.entries()}:
            # Another session's seq names nothing here (seqs may be shared across sessions).
            with pytest.raises(InvalidInputError):
                bob.delete([alices])
        bob.delete(["same-id"])
        bob.keep_last(0)
        assert [m.content for m in alice.messages] == ["alice"]
        assert bob.messages == []

    def test_changes_report_edits_behind_a_cursor(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        seqs = history.append([HumanMessage("q1", id="h1"), AIMessage("a1"), HumanMessage("q2")])
        quiet = history.changes(after=seqs[1], edits_after=None)
        assert [e.seq for e in quiet.entries] == [seqs[2]] and quiet.edits == []
        history.delete(["h1"])
        changed = history.changes(after=seqs[2], edits_after=None)
        assert changed.entries == [] and changed.touches(seqs[2])
        cursor = changed.edit_cursor(None)
        assert not history.changes(after=seqs[2], edits_after=cursor).edits

    async def test_async_edits_match_sync(self, make_history: MakeHistory) -> None:
        history = make_history("s")
        await history.awrite([HumanMessage("q", id="h"), AIMessage("a", id="a")])
        await history.areplace("a", AIMessage("a!"))
        await history.adelete(["h"])
        assert [m.content for m in await history.aget_messages()] == ["a!"]
        await history.akeep_last(0)
        assert await history.aentries() == []
