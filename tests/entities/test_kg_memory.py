"""ConversationKGMemory: LangChain's class (NetworkxEntityGraph) and ours side by side.

Both run the same conversations with the same rule-following model; every
loaded variable, every prompt the model saw and every triple of the graph
must be equal. Our graphs answer as networkx does (random sequences of
changes), the SQL graph survives a restart, and a failing model loses no turn.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import SystemMessage

from memories import ConfigError, ConversationKGMemory, SQLiteHistory, create_memory
from memories.errors import MissingDependencyError
from memories.long_term.entities.kg import parse_triples
from memories.stores.entities.triples import (
    InMemoryEntityGraph,
    KnowledgeTriple,
    SQLEntityGraph,
    as_entity_graph,
)
from tests.contract.memory_contract import MakeMemory, MemoryContract
from tests.entities.fakes import RuleModel
from tests.entities.test_entity_memory import texts

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CONVERSATION = [
    ("Jane lives in Oslo with Tom", "Nice."),
    ("Tom plays Chopin on Sundays", "Lovely."),
    ("Jane likes Tom", "Good."),
    ("Jane hates Tom now", "Oh no."),  # overwrites the (Jane, Tom) relation
    ("what about it?", "Hm."),
]
QUESTIONS = ["What about Jane?", "And Tom and Chopin?", "Oslo?", "nothing here"]


def networkx_graph() -> Any:
    from langchain_community.graphs import NetworkxEntityGraph

    return NetworkxEntityGraph()


def langchain_memory(**kwargs: Any) -> Any:
    from langchain_community.memory.kg import ConversationKGMemory as LangChainKG

    kwargs.setdefault("kg", networkx_graph())
    return LangChainKG(**kwargs)


def converse(memory: Any) -> list[Any]:
    loads = []
    for question, answer in CONVERSATION:
        loads.append(memory.load_memory_variables({"input": question}))
        memory.save_context({"input": question}, {"output": answer})
    loads += [memory.load_memory_variables({"input": q}) for q in QUESTIONS]
    return loads


@pytest.mark.parametrize(
    "options",
    [{}, {"k": 1}, {"return_messages": True}, {"human_prefix": "User", "memory_key": "facts"}],
    ids=lambda o: ",".join(o) or "defaults",
)
@pytest.mark.parametrize("graph", ["ours", "sql", "networkx"])
def test_same_variables_prompts_and_triples_as_langchains(
    options: dict[str, Any], graph: str, tmp_path: Path
) -> None:
    graphs = {
        "ours": InMemoryEntityGraph,
        "sql": lambda: SQLEntityGraph(f"sqlite:///{tmp_path / 'kg.db'}"),
        "networkx": networkx_graph,
    }
    theirs_model, ours_model = RuleModel(), RuleModel()
    theirs = langchain_memory(llm=theirs_model, **options)
    ours = ConversationKGMemory(llm=ours_model, kg=graphs[graph](), **options)
    assert ours.memory_variables == theirs.memory_variables
    assert converse(ours) == converse(theirs)
    assert texts(ours_model.prompts) == texts(theirs_model.prompts)
    assert ours.kg.get_triples() == theirs.kg.get_triples()
    assert ("Jane", "Tom", "hates") in ours.kg.get_triples()


def test_async_does_what_langchains_sync_path_does() -> None:
    theirs_model, ours_model = RuleModel(), RuleModel()
    theirs, ours = langchain_memory(llm=theirs_model), ConversationKGMemory(llm=ours_model)

    async def aconverse() -> list[Any]:
        loads = []
        for question, answer in CONVERSATION:
            loads.append(await ours.aload_memory_variables({"input": question}))
            await ours.asave_context({"input": question}, {"output": answer})
        return loads + [await ours.aload_memory_variables({"input": q}) for q in QUESTIONS]

    assert asyncio.run(aconverse()) == converse(theirs)
    assert texts(ours_model.prompts) == texts(theirs_model.prompts)


def test_langchains_methods_answer_alike() -> None:
    theirs, ours = langchain_memory(llm=RuleModel()), ConversationKGMemory(llm=RuleModel())
    for memory in (theirs, ours):
        memory.save_context({"input": "Jane met Tom"}, {"output": "ok"})
    assert ours.get_current_entities("Jane and Oslo") == theirs.get_current_entities(
        "Jane and Oslo"
    )
    assert ours.get_knowledge_triplets("Tom visits Rome") == theirs.get_knowledge_triplets(
        "Tom visits Rome"
    )


def test_triples_are_parsed_as_langchain_parses_them() -> None:
    from langchain_community.graphs.networkx_graph import parse_triples as theirs

    for reply in [
        "(A, b, C)<|>(D, e, F)",
        "NONE",
        "",
        "  (A, b, C) <|>junk<|>(X, y, Z, W)<|>(P, q, R)",
        "(A, b c, D)",
    ]:
        assert [tuple(t) for t in parse_triples(reply)] == [tuple(t) for t in theirs(reply)]


def test_a_conversation_chain_runs_it_in_place_of_langchains() -> None:
    from langchain_classic.chains import ConversationChain
    from langchain_core.language_models import FakeListLLM

    import memories

    results = []
    for make in (langchain_memory, memories.ConversationKGMemory):
        chain = ConversationChain(
            llm=FakeListLLM(responses=["Hi.", "Ok.", "Yes."]), memory=make(llm=RuleModel())
        )
        results.append(
            [
                chain.invoke({"input": text})
                for text in ("Jane lives in Oslo", "Tom visits Jane", "Where is Jane?")
            ]
        )
    assert results[0] == results[1]
    assert results[1][-1]["history"] == "On Jane: Jane lives Oslo."


WORDS = ["Jane", "Tom", "lives", "in", "Oslo", "likes", "hates", "tea", "she", "Rome"]
phrase = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
operation = st.one_of(
    st.tuples(st.sampled_from(["load", "aload"]), phrase),
    st.tuples(st.sampled_from(["save", "asave"]), st.tuples(phrase, phrase)),
    st.tuples(st.sampled_from(["clear", "two-inputs", "two-outputs"]), phrase),
)


@settings(max_examples=60, deadline=None)
@given(
    operations=st.lists(operation, min_size=1, max_size=14),
    # k=0: LangChain's class sends the whole conversation ([-0:]), ours none (documented).
    k=st.integers(min_value=1, max_value=3),
    return_messages=st.booleans(),
    graph=st.sampled_from(["ours", "networkx"]),
)
def test_random_conversations_match_langchains(
    operations: list[tuple[str, Any]], k: int, return_messages: bool, graph: str
) -> None:
    theirs_model, ours_model = RuleModel(), RuleModel()
    options = {"k": k, "return_messages": return_messages}
    theirs = langchain_memory(llm=theirs_model, **options)
    kg = InMemoryEntityGraph() if graph == "ours" else networkx_graph()
    ours = ConversationKGMemory(llm=ours_model, kg=kg, **options)
    for kind, value in operations:
        if kind in ("load", "aload"):
            expected = theirs.load_memory_variables({"input": value})
            if kind == "load":
                got = ours.load_memory_variables({"input": value})
            else:
                got = asyncio.run(ours.aload_memory_variables({"input": value}))
            assert got == expected
        elif kind in ("save", "asave"):
            question, answer = value
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
        assert ours.kg.get_triples() == theirs.kg.get_triples()
    assert [m.content for m in ours.chat_memory.messages] == [
        m.content for m in theirs.chat_memory.messages
    ]


# -- the graph answers as networkx does ---------------------------------------------------

NODES = ["A", "B", "C", "D"]
change = st.tuples(
    st.sampled_from(["add", "add", "delete"]),
    st.sampled_from(NODES),
    st.sampled_from(["knows", "likes", "hates"]),
    st.sampled_from(NODES),
)


@settings(max_examples=80, deadline=None)
@given(changes=st.lists(change, max_size=20), depth=st.integers(min_value=0, max_value=3))
def test_random_changes_give_networkx_answers(
    changes: list[tuple[str, str, str, str]], depth: int
) -> None:
    theirs, ours = networkx_graph(), InMemoryEntityGraph()
    for kind, subject, predicate, object_ in changes:
        triple = KnowledgeTriple(subject, predicate, object_)
        for graph in (theirs, ours):
            graph.add_triple(triple) if kind == "add" else graph.delete_triple(triple)
    assert ours.get_triples() == theirs.get_triples()
    for node in [*NODES, "E"]:
        assert ours.get_entity_knowledge(node, depth) == theirs.get_entity_knowledge(node, depth)


@pytest.mark.parametrize("kind", ["memory", "sql"])
def test_add_triples_adds_each_as_add_triple_does(kind: str, tmp_path: Path) -> None:
    def graph() -> Any:
        if kind == "memory":
            return InMemoryEntityGraph()
        return SQLEntityGraph(f"sqlite:///{tmp_path / f'{uuid.uuid4().hex}.db'}")

    one_by_one, at_once = graph(), graph()
    triples = [KnowledgeTriple("A", "knows", "B"), ("B", "likes", "C"), ("A", "hates", "B")]
    for triple in triples:
        one_by_one.add_triple(triple)
    at_once.add_triples(triples)
    at_once.add_triples([])
    assert (
        at_once.get_triples()
        == one_by_one.get_triples()
        == [
            ("A", "B", "hates"),
            ("B", "C", "likes"),
        ]
    )
    assert [c.predicate for c in at_once.history("A", "B")] == ["knows", "hates"]


def test_held_counts_every_change_of_the_session_deletions_included(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'kg.db'}"
    graphs = [InMemoryEntityGraph(), SQLEntityGraph(url, session_id="s")]
    SQLEntityGraph(url, session_id="other").add_triples([("X", "r", "Y")] * 5)
    for graph in graphs:
        graph.add_triples([("A", "knows", "B"), ("A", "hates", "B"), ("B", "likes", "C")])
        graph.delete_triple(("A", "", "B"))
        graph.delete_triple(("A", "", "Z"))  # no such edge: nothing written
        assert graph.held() == {"graph changes": 4}
        graph.clear()
        assert graph.held() == {"graph changes": 0}
    assert SQLEntityGraph(url, session_id="other").held() == {"graph changes": 5}


def test_the_sql_graph_survives_a_restart_and_keeps_overwritten_relations(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'kg.db'}"

    def memory(model: RuleModel) -> ConversationKGMemory:
        return ConversationKGMemory(
            llm=model,
            chat_memory=SQLiteHistory(tmp_path / "chat.db", session_id="s"),
            kg=SQLEntityGraph(url, session_id="s"),
        )

    first = memory(RuleModel())
    converse(first)
    restarted = memory(RuleModel())
    assert restarted.kg.get_triples() == first.kg.get_triples()
    assert restarted.load_memory_variables({"input": "Jane?"}) == {
        "history": "On Jane: Jane lives Oslo. Jane hates Tom."
    }
    assert [c.predicate for c in restarted.kg.history("Jane", "Tom")] == ["likes", "hates"]
    assert SQLEntityGraph(url, session_id="other").get_triples() == []


def test_a_failed_extraction_keeps_the_turn_and_is_retried(tmp_path: Path) -> None:
    steady = ConversationKGMemory(llm=RuleModel())
    converse(steady)
    # Call 2 is the first save's triple extraction.
    failing = ConversationKGMemory(llm=RuleModel(fail_calls={2, 6}))
    converse(failing)
    assert len(failing.chat_memory.messages) == 2 * len(CONVERSATION)
    assert failing.flush() and failing.status().pending == 0
    assert sorted(failing.kg.get_triples()) == sorted(steady.kg.get_triples())


@settings(max_examples=40, deadline=None)
@given(fail_calls=st.sets(st.integers(min_value=1, max_value=20), max_size=10))
def test_any_failing_calls_lose_and_duplicate_no_triple(fail_calls: set[int]) -> None:
    steady = ConversationKGMemory(llm=RuleModel())
    converse(steady)
    failing = ConversationKGMemory(llm=RuleModel(fail_calls=fail_calls))
    converse(failing)
    while not failing.flush():  # the model fails some retries too; it recovers after call 20
        pass
    assert failing.kg.get_triples() == steady.kg.get_triples()
    assert len(failing.chat_memory.messages) == 2 * len(CONVERSATION)


def test_a_failure_is_recorded_and_the_queue_survives_a_restart(tmp_path: Path) -> None:
    def memory(model: RuleModel) -> ConversationKGMemory:
        return ConversationKGMemory(
            llm=model,
            chat_memory=SQLiteHistory(tmp_path / "chat.db", session_id="s"),
            kg={"type": "sql", "url": f"sqlite:///{tmp_path / 'kg.db'}", "session_id": "s"},
        )

    down = memory(RuleModel(fail_calls=set(range(1, 50))))
    down.save_context({"input": "Jane lives in Oslo"}, {"output": "ok"})
    assert down.status().pending == 1 and down.status().failures == 1
    assert down.kg.get_triples() == []
    up = memory(RuleModel())
    assert up.flush()
    assert up.kg.get_triples() == [("Jane", "Oslo", "lives")]


def test_arguments_and_errors() -> None:
    with pytest.raises(ConfigError, match="needs an llm"):
        ConversationKGMemory()
    with pytest.raises(ConfigError, match="kg must be"):
        ConversationKGMemory(llm=RuleModel(), kg=42)
    with pytest.raises(ConfigError, match="valid types: memory, networkx, sql"):
        as_entity_graph({"type": "neo4j"})
    memory = create_memory(
        {"type": "conversation_kg", "llm": RuleModel(), "summary_message_cls": "human"}
    )
    memory.llm = "openai:gpt-4o-mini"
    assert memory.to_config() == {
        "type": "conversation_kg",
        "llm": "openai:gpt-4o-mini",
        "summary_message_cls": "human",
    }
    assert ConversationKGMemory(llm=RuleModel()).summary_message_cls is SystemMessage


class TestConversationKGMemoryContract(MemoryContract):
    memory_type = "conversation_kg"
    shows_latest_turn = False  # it shows facts about entities, never the turns
    configurable = False  # a model object has no config form (the config is tested above)

    @pytest.fixture
    def make_memory(self) -> MakeMemory:
        def make(history: Any) -> ConversationKGMemory:
            model = RuleModel(
                entities_reply="topic", triples_reply="(topic, is discussed in, question)"
            )
            return ConversationKGMemory(llm=model, chat_memory=history)

        return make


def test_a_networkx_graph_from_a_config_is_langchains() -> None:
    memory = create_memory(
        {"type": "conversation_kg", "llm": RuleModel(), "kg": {"type": "networkx"}}
    )
    assert type(memory.kg).__name__ == "NetworkxEntityGraph"


def test_a_networkx_graph_without_networkx_names_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "networkx", None)  # import networkx raises ImportError
    with pytest.raises(MissingDependencyError, match=r"pip install 'chat-memories\[kg\]'"):
        as_entity_graph({"type": "networkx"})
