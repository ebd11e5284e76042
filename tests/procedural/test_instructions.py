"""InstructionsMemory: prompts revised from conversations and feedback, under rules that hold."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memories import ConfigError, InstructionsMemory, InvalidInputError, create_memory
from memories.core.base import BaseMemory
from memories.long_term.instructions.reflection import FEEDBACK_KWARG
from memories.stores.history import ChatHistory, InMemoryHistory
from tests import needs
from tests.contract.memory_contract import MakeMemory, MemoryContract
from tests.procedural.fakes import DigestModel, FlakyModel, revise

BASE = "You are a travel assistant. Never book without asking."
PIN = "Never book without asking."


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'instructions.db'}"


def make(url: str, model: Any, **options: Any) -> InstructionsMemory:
    options.setdefault("prompts", BASE)
    return InstructionsMemory(llm=model, url=url, **options)


def converse(memory: InstructionsMemory, n: int = 1) -> None:
    for i in range(n):
        memory.save_context({"input": f"plan trip {i}"}, {"output": f"here is a long plan {i}"})


class TestInstructionsMemoryContract(MemoryContract):
    memory_type = "instructions"
    shows_latest_turn = False  # it shows the instructions the turns led to

    @pytest.fixture
    def history_factory(self) -> Callable[[str], ChatHistory]:
        return lambda session_id: InMemoryHistory(session_id=session_id)

    @pytest.fixture
    def make_memory(self, url: str) -> MakeMemory:
        return lambda history: InstructionsMemory(
            llm=DigestModel(),
            url=url,
            prompts="Be helpful.",
            namespace=(history.session_id,),
            policy="every_n",
            every_n=2,
            memory_key="history",
        )

    def stored_data(self, memory: BaseMemory, history: ChatHistory) -> Any:
        """The prompts, the queued items and the recorded versions."""
        assert isinstance(memory, InstructionsMemory)
        queued = memory.store.pending(memory.namespace, memory.key)
        return (
            memory.get(),
            [[m.content for m in turn.messages] for turn in queued],
            [(v.version, v.kind, v.error) for v in memory.history()],
        )

    def test_config_round_trips(self, make_memory: MakeMemory, history: ChatHistory) -> None:
        with pytest.raises(ConfigError, match="has no config form"):
            make_memory(history).to_config()  # the fake model is an object
        manual = InstructionsMemory(
            prompts={"main": "Be brief."}, policy="manual", pinned=["brief"]
        )
        config = manual.to_config()
        assert config["prompts"] == {"main": "Be brief."} and config["pinned"] == ["brief"]
        assert create_memory(config).to_config() == config

    def test_unicode_and_huge_input_round_trip(
        self, make_memory: MakeMemory, history: ChatHistory
    ) -> None:
        memory = make_memory(history)
        assert isinstance(memory, InstructionsMemory)
        memory.policy = "manual"
        huge = "ünïcødé 🧠 " * 50_000
        memory.save_context({"input": huge}, {"output": "noted, 日本語"})
        (queued,) = memory.store.pending(memory.namespace, memory.key)
        assert [m.content for m in queued.messages] == [huge, "noted, 日本語"]


def test_feedback_revises_the_prompt_and_the_history_keeps_why(url: str) -> None:
    new = f"{BASE} Keep plans under five lines."
    model = FlakyModel(script=[revise(new, "the user said plans are too long")])
    memory = make(url, model)
    converse(memory, 2)
    assert memory.prompt() == BASE and not model.prompts  # turns wait for feedback
    memory.feedback(score=0.2, comment="plans are too long")

    assert memory.prompt() == new
    assert memory.load_memory_variables({}) == {"instructions": new}
    shown = model.prompts[0][-1].text
    assert "plan trip 0" in shown and "plan trip 1" in shown
    assert 'score 0.2, "plans are too long"' in shown
    (version,) = memory.history()
    assert version.kind == "revision" and version.version == 1
    assert version.reasons == {"main": "the user said plans are too long"}
    assert "+You are a travel assistant" in version.diffs["main"]
    assert [[m.content for m in t] for t in version.turns] == [
        ["plan trip 0", "here is a long plan 0"],
        ["plan trip 1", "here is a long plan 1"],
    ]
    assert [(f.score, f.comment) for f in version.feedback] == [(0.2, "plans are too long")]
    assert memory.status().pending == 0 and memory.status().version == 1


def test_a_reply_removing_pinned_text_is_sent_back_and_the_fix_accepted(url: str) -> None:
    fixed = f"{BASE} Be brief."
    model = FlakyModel(script=[revise("You are a travel assistant. Be brief."), revise(fixed)])
    memory = make(url, model, pinned=[PIN])
    memory.feedback(comment="too chatty")
    assert memory.prompt() == fixed
    retry = model.prompts[1][-1].text
    assert "Rejected" in retry and "pinned passage" in retry and PIN in retry


def test_a_reply_over_the_budget_is_sent_back(url: str) -> None:
    long = BASE + " Also." * 200
    model = FlakyModel(script=[revise(long), revise(f"{BASE} Short.")])
    memory = make(url, model, max_tokens=60)
    memory.feedback(comment="x")
    assert memory.prompt() == f"{BASE} Short."
    assert "over the budget of 60" in model.prompts[1][-1].text


def test_bad_replies_past_the_retries_change_nothing_and_keep_the_feedback(url: str) -> None:
    bad = [revise("no pin here"), "not json at all", revise("nor here", prompt="ghost")]
    memory = make(url, FlakyModel(script=bad), pinned=[PIN], max_retries=2)
    converse(memory)
    memory.feedback(score=0.0, comment="wrong city")

    assert memory.prompt() == BASE
    status = memory.status()
    assert status.pending == 2 and status.failures == 1
    assert status.last_error is not None and "ghost" in status.last_error
    (failed,) = memory.history()
    assert failed.kind == "failed" and failed.version is None


def test_a_failing_model_never_changes_the_prompts_or_loses_feedback(url: str) -> None:
    model = FlakyModel(script=[RuntimeError("provider down"), revise(f"{BASE} Check dates.")])
    memory = make(url, model)
    memory.feedback(comment="wrong dates")  # the model raises: recorded, not raised
    assert memory.prompt() == BASE and memory.status().pending == 1
    assert "provider down" in (memory.status().last_error or "")

    assert memory.refresh().status == "revised"
    assert memory.prompt() == f"{BASE} Check dates."
    assert memory.status().pending == 0 and memory.status().failures == 0
    assert [f.comment for f in memory.history()[-1].feedback] == ["wrong dates"]


def test_approval_mode_waits_for_approve_and_reject_keeps_the_prompts(url: str) -> None:
    first, second = f"{BASE} One.", f"{BASE} Two."
    memory = make(url, FlakyModel(script=[revise(first), revise(second)]), approval=True)
    memory.feedback(comment="a")
    proposal = memory.proposal()
    assert proposal is not None and proposal.prompts == {"main": first}
    assert memory.prompt() == BASE and memory.status().proposal
    memory.feedback(comment="b")  # queued: one proposal at a time
    assert memory.refresh().status == "awaiting_approval"

    assert memory.approve() == 2
    assert memory.prompt() == first and memory.proposal() is None
    assert memory.refresh().status == "proposed"
    memory.reject("too strict")
    assert memory.prompt() == first and memory.proposal() is None
    kinds = [(v.kind, v.prompts["main"]) for v in memory.history()]
    assert kinds == [("proposal", BASE), ("approve", first), ("proposal", first), ("reject", first)]
    assert memory.history()[-1].reasons == {"main": "rejected: too strict"}
    with pytest.raises(InvalidInputError, match="No proposal waits"):
        memory.approve()


def test_a_proposal_made_stale_by_a_write_cannot_be_approved(url: str) -> None:
    memory = make(url, FlakyModel(script=[revise(f"{BASE} New.")]), approval=True)
    memory.feedback(comment="a")
    memory.put(f"{BASE} Edited by hand.")
    with pytest.raises(InvalidInputError, match="changed after this proposal"):
        memory.approve()
    memory.reject()
    assert memory.prompt() == f"{BASE} Edited by hand."


def test_several_prompts_are_revised_together_each_checked_on_its_own(url: str) -> None:
    prompts = {"planner": f"Plan trips. {PIN}", "writer": "Write replies."}
    both = (
        '{"revisions": [{"prompt": "planner", "text": "Plan trips.", "reason": "r1"},'
        '{"prompt": "writer", "text": "Write short replies.", "reason": "r2"}]}'
    )
    fixed = both.replace('"Plan trips."', f'"Plan trips. {PIN} Ask dates."')
    model = FlakyModel(script=[both, fixed])
    memory = make(url, model, prompts=prompts, pinned=[PIN])
    memory.feedback(comment="x")
    assert memory.get() == {
        "planner": f"Plan trips. {PIN} Ask dates.",
        "writer": "Write short replies.",
    }
    assert (
        "planner" in model.prompts[1][-1].text
        and "writer" not in model.prompts[1][-1].text.split("Rejected")[1]
    )
    (version,) = memory.history()
    assert version.reasons == {"planner": "r1", "writer": "r2"}
    text = memory.load_memory_variables({})["instructions"]
    assert text.startswith("## planner\nPlan trips.") and "## writer\nWrite short replies." in text


def test_rollback_restores_an_earlier_version_as_a_new_one(url: str) -> None:
    memory = make(url, FlakyModel(script=[revise(f"{BASE} A."), revise(f"{BASE} B.")]))
    memory.feedback(comment="1")
    memory.feedback(comment="2")
    assert memory.prompt() == f"{BASE} B."
    assert memory.rollback(1) == 3 and memory.prompt() == f"{BASE} A."
    assert memory.rollback(0) == 4 and memory.prompt() == BASE
    with pytest.raises(InvalidInputError, match="no version 99"):
        memory.rollback(99)
    memory.clear()
    assert memory.prompt() == BASE and memory.history()[-1].kind == "clear"


def test_every_n_manual_and_background_policies(url: str) -> None:
    model = FlakyModel(script=[revise(f"{BASE} N.")])
    every = make(url, model, policy="every_n", every_n=3, namespace=("n",))
    converse(every, 2)
    assert not model.prompts
    converse(every)
    assert every.prompt() == f"{BASE} N."

    manual = make(url, FlakyModel(script=[revise(f"{BASE} M.")]), policy="manual", namespace=("m",))
    manual.feedback(comment="x")
    assert manual.prompt() == BASE
    assert manual.refresh().status == "revised" and manual.prompt() == f"{BASE} M."

    background = make(
        url,
        FlakyModel(script=[revise(f"{BASE} B.")]),
        policy="background",
        debounce=60,
        namespace=("b",),
    )
    background.feedback(comment="x")
    assert background.prompt() == BASE
    assert background.flush(timeout=10)
    assert background.prompt() == f"{BASE} B."


def test_async_twins_do_what_the_sync_methods_do(url: str) -> None:
    memory = make(url, FlakyModel(script=[revise(f"{BASE} Async.")]), approval=True)

    async def scenario() -> tuple[Any, ...]:
        await memory.asave_context({"input": "hi"}, {"output": "hello"})
        await memory.afeedback(score=1.0)
        approved = await memory.aapprove()
        loaded = await memory.aload_memory_variables({})
        history = await memory.ahistory()
        return approved, loaded, len(history), (await memory.astatus()).version

    assert asyncio.run(scenario()) == (2, {"instructions": f"{BASE} Async."}, 2, 2)


def test_bad_arguments_are_refused_with_what_to_do(url: str) -> None:
    memory = make(url, FlakyModel())
    for score, comment in [(None, None), (float("nan"), None), (True, None), (None, 3)]:
        with pytest.raises(InvalidInputError):
            memory.feedback(score, comment)  # type: ignore[arg-type]
    assert memory.status().pending == 0
    with pytest.raises(ConfigError, match="in none of the prompts"):
        make(url, FlakyModel(), pinned=["not there"])
    with pytest.raises(ConfigError, match="llm is None"):
        InstructionsMemory(prompts="x", url=url)
    with pytest.raises(InvalidInputError, match="No prompt named"):
        memory.prompt("ghost")
    with pytest.raises(InvalidInputError, match="dict of names to texts"):
        memory.put({"main": 3})  # type: ignore[dict-item]


def test_feedback_is_queued_as_a_marked_message(url: str) -> None:
    memory = make(url, FlakyModel(), policy="manual")
    memory.feedback(score=3, comment="good")
    (queued,) = memory.store.pending(memory.namespace, memory.key)
    assert queued.messages[0].additional_kwargs[FEEDBACK_KWARG] == {"score": 3.0, "comment": "good"}


def test_in_create_agent_the_instructions_are_the_system_prompt(url: str) -> None:
    agents = pytest.importorskip("langchain.agents", reason=needs.extra("langchain.agents"))
    from memories.integrations.agents import MemoryMiddleware

    from memories.testing import ScriptedChatModel

    memory = make(url, FlakyModel(script=[revise(f"{BASE} Answer in French.")]))
    model = ScriptedChatModel(responses=["Bonjour", "Salut"])
    agent = agents.create_agent(
        model, [], middleware=[MemoryMiddleware(lambda _: memory, inject="system", header="")]
    )
    config = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [("user", "hello")]}, config)
    assert BASE in model.prompts[0][0].text
    memory.feedback(comment="answer in French")
    agent.invoke({"messages": [("user", "hello again")]}, config)
    assert "Answer in French." in model.prompts[1][0].text
    (version,) = memory.history()  # the first run's turn was reflected on; the second waits
    assert version.turns[0][0].content == "hello"
    assert memory.status().pending == 1


def test_in_a_langgraph_graph_the_instructions_lead_the_system_message(url: str) -> None:
    pytest.importorskip("langgraph", reason=needs.extra("langgraph"))
    from langgraph.graph import END, START, StateGraph
    from memories.integrations.langgraph_nodes import MemoryNodes, MemoryState

    from memories.testing import ScriptedChatModel

    memory = make(url, FlakyModel(script=[revise(f"{BASE} Quote prices in euros.")]))
    nodes = MemoryNodes(lambda _: memory)
    model = ScriptedChatModel(responses=["One ticket is 40 dollars.", "One ticket is 37 euros."])

    def chatbot(state: MemoryState) -> dict[str, Any]:
        return {"messages": [model.invoke(nodes.prompt(state))]}

    graph = StateGraph(MemoryState)
    graph.add_node("load_memory", nodes.load)
    graph.add_node("chatbot", chatbot)
    graph.add_node("save_memory", nodes.save)
    graph.add_edge(START, "load_memory")
    graph.add_edge("load_memory", "chatbot")
    graph.add_edge("chatbot", "save_memory")
    graph.add_edge("save_memory", END)
    app = graph.compile()
    config = {"configurable": {"thread_id": "t"}}
    app.invoke({"messages": [("user", "price of a ticket?")]}, config)
    assert BASE in model.prompts[0][0].text
    memory.feedback(comment="we are in Europe, use euros")
    app.invoke({"messages": [("user", "price of a ticket?")]}, config)
    assert "Quote prices in euros." in model.prompts[1][0].text


def test_refresh_reflects_on_every_queued_batch(url: str) -> None:
    model = FlakyModel(script=[revise(f"{BASE} One."), revise(f"{BASE} Two.")])
    memory = make(url, model, policy="manual", max_turns_per_update=3)
    converse(memory, 5)
    result = memory.refresh()
    assert (result.status, result.turns, result.version) == ("revised", 5, 2)
    assert len(model.prompts) == 2 and memory.status().pending == 0
    assert memory.prompt() == f"{BASE} Two."
