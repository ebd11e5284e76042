"""CollectionMemory: facts stated, repeated, refined, contradicted and retracted, none lost."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest

from memories import CollectionMemory, ConfigError, InvalidInputError, create_memory
from memories.core.base import BaseMemory
from memories.stores.history import ChatHistory, InMemoryHistory
from memories.stores.vector.outbox import remove_orphaned_scratch
from tests.collection.fakes import CollectionScript
from tests.contract.memory_contract import MakeMemory, MemoryContract, run_turns
from tests.helpers import joined

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"

SCRIPT: dict[str, list[Any]] = {
    "My name is Ana.": [("insert", None, "User's name is Ana")],
    "I live in Lisbon.": [("insert", None, "User lives in Lisbon")],
    "I have a cat called Miso.": [("insert", None, "User has a cat called Miso")],
    "I'm vegetarian.": [("insert", None, "User is vegetarian")],
    "Did I say I live in Lisbon?": [("insert", None, "User lives in Lisbon")],
    "I live in Lisbon, in Alfama.": [("update", "lives in", "User lives in Lisbon, in Alfama")],
    "I moved to Porto last month.": [("update", "lives in", "User lives in Porto")],
    "Miso died, I have no cat now.": [("delete", "cat called Miso", None)],
    "I eat fish again.": [("update", "vegetarian", "User eats fish (pescatarian)")],
    "I work as a nurse.": [("insert", None, "User works as a nurse")],
    "I'm a teacher now, not a nurse.": [("update", "nurse", "User works as a teacher")],
    "My sister is Rita.": [("insert", None, "User's sister is Rita")],
    "I love jazz.": [("insert", None, "User loves jazz")],
    "Jazz is my favourite, really.": [("insert", None, "user loves JAZZ!")],
}
FILLER = [f"Small talk {i}: what do you think of item {i}?" for i in range(26)]
CONVERSATION = [*list(SCRIPT)[:7], *FILLER[:13], *list(SCRIPT)[7:], *FILLER[13:]]
EXPECTED = {
    "User's name is Ana",
    "User lives in Porto",
    "User eats fish (pescatarian)",
    "User works as a teacher",
    "User's sister is Rita",
    "User loves jazz",
}


@pytest.fixture
def make_collection(tmp_path: Path) -> Callable[..., CollectionMemory]:
    collection = f"c{uuid.uuid4().hex[:10]}"

    def make(**options: Any) -> CollectionMemory:
        options.setdefault("mode", "memory")
        options.setdefault("collection", collection)
        options.setdefault("embeddings", EMBEDDINGS)
        options.setdefault("url", f"sqlite:///{tmp_path / 'ledger.db'}")
        options.setdefault("update_method", "json")
        return CollectionMemory(**options)

    return make


def converse(memory: CollectionMemory, lines: list[str]) -> None:
    for line in lines:
        memory.save_context({"input": line}, {"output": "ok"})


def contents(memory: CollectionMemory) -> list[str]:
    return sorted(str(r.content) for r in memory.list())


class TestCollectionMemoryContract(MemoryContract):
    memory_type = "collection"
    shows_latest_turn = False  # it shows the memories most relevant to the input
    # Without a model a collection keeps statements, not the contract's questions.
    turns: ClassVar[list[tuple[str, str]]] = [
        (f"Note {i}: topic {i} is fine.", f"answer {i}: noted.") for i in range(6)
    ]

    @pytest.fixture
    def history_factory(self) -> Callable[[str], ChatHistory]:
        return lambda session_id: InMemoryHistory(session_id=session_id)

    @pytest.fixture
    def make_memory(self, make_collection: Callable[..., CollectionMemory]) -> MakeMemory:
        return lambda history: make_collection(
            namespace=("contract", history.session_id), memory_key="history"
        )

    def stored_data(self, memory: BaseMemory, history: ChatHistory) -> Any:
        """The memories, their versions and the queued turns, from the ledger."""
        assert isinstance(memory, CollectionMemory)
        queued = memory.ledger.pending(memory.namespace, memory.key)
        return (
            [(r.id, r.content, r.version) for r in memory.list()],
            [[m.content for m in t.messages] for t in queued],
        )

    def test_unicode_and_huge_input_round_trip(
        self, make_memory: MakeMemory, history: ChatHistory
    ) -> None:
        memory = make_memory(history)
        assert isinstance(memory, CollectionMemory)
        huge = "ünïcødé 🧠 " * 50_000
        memory.save_context({"input": huge}, {"output": "noted, 日本語"})
        assert [r.content for r in memory.list()] == [huge.strip()]
        run_turns(memory, self.turns[:1])
        assert memory.search(self.turns[0][0], k=1)[0].content == self.turns[0][0]


def test_forty_turns_leave_exactly_the_current_facts_with_their_history(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    model = CollectionScript(script=SCRIPT)
    memory = make_collection(llm=model)
    assert len(CONVERSATION) == 40
    converse(memory, CONVERSATION)

    assert contents(memory) == sorted(EXPECTED)  # the repeats added nothing
    (home,) = [r for r in memory.list() if "Porto" in r.content]
    history = memory.history(home.id)
    assert [(v.kind, v.content) for v in history] == [
        ("insert", "User lives in Lisbon"),
        ("update", "User lives in Lisbon, in Alfama"),
        ("update", "User lives in Porto"),
    ]
    assert [t[0].content for v in history for t in v.turns] == [
        "I live in Lisbon.",
        "I live in Lisbon, in Alfama.",
        "I moved to Porto last month.",
    ]
    assert history[0].invalid_at == history[1].valid_from and history[-1].invalid_at is None
    assert memory.status().pending == 0 and memory.status().failures == 0
    shown = memory.load_memory_variables({"input": "Where does the user live?"})["memories"]
    assert "- User lives in Porto" in shown.splitlines()


def test_a_deleted_fact_stays_in_history_with_its_cause(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    memory = make_collection(llm=CollectionScript(script=SCRIPT))
    converse(memory, ["I have a cat called Miso.", "Miso died, I have no cat now."])
    assert memory.list() == []
    (key,) = [k for k, _ in memory.ledger.key_changes(memory.namespace, "memory:")][:1]
    versions = memory.history(key.removeprefix("memory:"))
    assert [v.kind for v in versions] == ["insert", "delete"]
    assert versions[1].turns[0][0].content == "Miso died, I have no cat now."
    restored = memory.rollback(key.removeprefix("memory:"), 1)
    assert restored.content == "User has a cat called Miso" and restored.version == 3


def test_a_failing_model_invented_ids_and_bad_json_lose_and_duplicate_nothing(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    faults: dict[int, Any] = {}
    for call in range(1, 200, 2):  # every other call fails, in turn three ways
        faults[call] = [
            RuntimeError("provider down"),
            "I think you should remember things.",
            '[{"op": "update", "id": "m99", "content": "invented"}]',
        ][(call // 2) % 3]
    model = CollectionScript(script=SCRIPT, faults=faults)
    memory = make_collection(llm=model, max_retries=1)
    converse(memory, CONVERSATION)  # never raises
    while memory.refresh().status not in ("idle",):
        pass
    assert contents(memory) == sorted(EXPECTED)
    assert (memory.status().pending, memory.status().failures) == (0, 0)  # all recovered
    retried = [p for p in model.prompts if "Rejected" in p[-1].text]
    assert any("m99" in p[-1].text for p in retried)
    assert any("not a JSON array" in p[-1].text for p in retried)


def test_operations_of_one_reply_apply_together_or_not_at_all(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    memory = make_collection(llm=CollectionScript(script=SCRIPT), max_retries=0)
    converse(memory, ["I live in Lisbon."])
    bad = '[{"op": "insert", "content": "User likes tea"}, {"op": "delete", "id": "m7"}]'
    memory.llm = CollectionScript(faults={1: bad})
    converse(memory, ["I like tea."])
    assert contents(memory) == ["User lives in Lisbon"]  # the valid insert was not applied
    status = memory.status()
    assert status.pending == 1 and status.failures == 1 and "m7" in (status.last_error or "")


def test_tool_calling_models_answer_through_the_operations_tool(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    from langchain_core.messages import AIMessage

    from memories.testing import ScriptedChatModel

    call = {
        "name": "update_memories",
        "args": {"operations": [{"op": "insert", "content": "User plays chess"}]},
        "id": "c1",
    }
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=[call])], echo=False)
    memory = make_collection(llm=model, update_method="auto")
    converse(memory, ["I play chess on Sundays."])
    assert contents(memory) == ["User plays chess"]


def test_inserts_of_what_is_remembered_are_skipped_or_add_detail(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    memory = make_collection(duplicate_threshold=0.75)  # no llm: the user's lines are stored
    converse(memory, ["I like green tea", "i like GREEN tea!!", "I like green tea with mint"])
    (only,) = memory.list()
    assert only.content == "I like green tea with mint" and only.version == 2
    assert [v.kind for v in memory.history(only.id)] == ["insert", "update"]
    assert memory.duplicate_of("I LIKE green tea with mint.") is not None
    assert memory.duplicate_of("I play the cello") is None


def test_search_as_of_a_past_time_answers_what_was_current_then(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    memory = make_collection()
    before = datetime.now(UTC)
    time.sleep(0.01)
    memory_id = memory.put("User lives in Lisbon", metadata={"topic": "home"})
    time.sleep(0.01)
    between = datetime.now(UTC)
    time.sleep(0.01)
    memory.update(memory_id, "User lives in Porto")
    assert [r.content for r in memory.search("where does the user live")] == ["User lives in Porto"]
    (then,) = memory.search("where does the user live", as_of=between)
    assert then.content == "User lives in Lisbon" and then.invalid_at is not None
    # The same calibrated score as a search of the current memories (issue 15).
    (now,) = memory.search("where does the user live", as_of=datetime.now(UTC))
    [current] = memory.search("where does the user live")
    assert now.score == pytest.approx(current.score, abs=1e-6) and 0 < now.score < 1
    assert memory.search("where", as_of=before) == []
    assert memory.search("where", as_of=between, filter={"topic": "work"}) == []
    with pytest.raises(InvalidInputError, match="timezone-aware"):
        memory.search("where", as_of=datetime.now())


def test_direct_writes_check_content_ids_and_versions(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    memory = make_collection()
    memory_id = memory.put("User likes tea")
    record = memory.get(memory_id)
    assert record is not None and record.version == 1
    with pytest.raises(InvalidInputError, match="version 1, not 7"):
        memory.update(memory_id, "User likes coffee", expected_version=7)
    assert memory.update(memory_id, "User likes coffee", expected_version=1).version == 2
    for bad in ["", "   ", 42, None]:
        with pytest.raises(InvalidInputError):
            memory.put(bad)
    with pytest.raises(InvalidInputError, match="keeps itself"):
        memory.put("x", metadata={"version": 3})
    for forged in ["../etc", "a" * 65, "id with space"]:
        with pytest.raises(InvalidInputError, match="memory id"):
            memory.get(forged)
    with pytest.raises(InvalidInputError, match="No memory"):
        memory.delete(uuid.uuid4().hex)
    assert contents(memory) == ["User likes coffee"]


def test_structured_memories_follow_the_schema(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    schema = {
        "type": "object",
        "properties": {"fact": {"type": "string"}, "confidence": {"type": "number"}},
        "required": ["fact"],
        "additionalProperties": False,
    }
    bad = '[{"op": "insert", "content": {"fact": 3}}]'
    good = '[{"op": "insert", "content": {"fact": "User rides a bike", "confidence": 0.9}}]'
    model = CollectionScript(faults={1: bad, 2: good})
    memory = make_collection(llm=model, schema=schema)
    converse(memory, ["I ride my bike to work."])
    assert [r.content for r in memory.list()] == [{"fact": "User rides a bike", "confidence": 0.9}]
    assert "does not match the collection's schema" in model.prompts[1][-1].text
    with pytest.raises(ConfigError, match="must be text"):
        make_collection(schema=schema)  # no llm: only text can be stored


def test_namespaces_never_leak(make_collection: Callable[..., CollectionMemory]) -> None:
    users = {ns: make_collection(namespace=ns) for ns in [("u1",), ("u1", "x"), ("u10",)]}
    ids = {ns: memory.put(f"secret of {'.'.join(ns)}") for ns, memory in users.items()}
    for ns, memory in users.items():
        assert contents(memory) == [f"secret of {'.'.join(ns)}"]
        assert [r.content for r in memory.search("secret", k=10)] == [f"secret of {'.'.join(ns)}"]
        for other, other_id in ids.items():
            if other != ns:
                assert memory.get(other_id) is None
                with pytest.raises(InvalidInputError, match="No memory"):
                    memory.update(other_id, "overwritten")
    with pytest.raises(InvalidInputError):
        users[("u1",)].search("secret", filter={"namespace": "u10"})
    assert users[("u1",)].search("secret", filter={"$or": [{"topic": "a"}, {"topic": "b"}]}) == []


def test_clear_deletes_every_memory_but_keeps_their_history(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    memory = make_collection(policy="manual")
    first = memory.put("User likes tea")
    memory.save_context({"input": "queued line"}, {"output": "ok"})
    memory.clear()
    assert memory.list() == [] and memory.search("tea") == [] and memory.status().pending == 0
    assert [v.kind for v in memory.history(first)] == ["put", "clear"]


def test_async_twins_do_what_the_sync_methods_do(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    memory = make_collection(llm=CollectionScript(script=SCRIPT))

    async def scenario() -> Any:
        await memory.asave_context({"input": "My name is Ana."}, {"output": "Hi"})
        memory_id = await memory.aput("User likes tea")
        await memory.aupdate(memory_id, "User likes coffee")
        found = await memory.asearch("coffee", k=1)
        history = await memory.ahistory(memory_id)
        await memory.adelete(memory_id)
        listed = await memory.alist()
        return found[0].content, [v.kind for v in history], [r.content for r in listed]

    assert asyncio.run(scenario()) == (
        "User likes coffee",
        ["put", "update"],
        ["User's name is Ana"],
    )


def _count_to(args: tuple[str, str, int]) -> None:
    url, namespace, times = args
    memory = CollectionMemory(url=url, namespace=(namespace,), mode="memory", embeddings=EMBEDDINGS)
    (counter,) = [r for r in memory.list() if r.metadata.get("role") == "counter"]
    for _ in range(times):
        while True:
            current = memory.get(counter.id)
            assert current is not None
            try:
                memory.update(
                    counter.id,
                    str(int(current.content) + 1),
                    expected_version=current.version,
                )
                break
            except InvalidInputError:
                continue  # the other process got in first: read again
    for i in range(5):
        memory.put(f"fact {i} from process {multiprocessing.current_process().name}")


def test_two_processes_updating_one_namespace_lose_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    memory = CollectionMemory(url=url, namespace=("shared",), mode="memory", embeddings=EMBEDDINGS)
    memory.put("0", metadata={"role": "counter"})
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        pool.map_async(_count_to, [(url, "shared", 20)] * 2).get(timeout=300)
    remove_orphaned_scratch()  # the workers were terminated: their in-memory outboxes stay
    records = memory.list()
    (counter,) = [r for r in records if r.metadata.get("role") == "counter"]
    assert counter.content == "40" and counter.version == 41
    assert len(records) == 11 and len({r.content for r in records}) == 11


def test_config_round_trips_and_offline_needs_no_model(tmp_path: Path) -> None:
    memory = create_memory(
        {
            "type": "collection",
            "url": f"sqlite:///{tmp_path / 'l.db'}",
            "mode": "memory",
            "embeddings": EMBEDDINGS,
            "k": 3,
            "enable_deletes": False,
        }
    )
    assert isinstance(memory, CollectionMemory)
    assert create_memory(memory.to_config()).to_config() == memory.to_config()
    memory.save_context({"input": "I own a red bicycle"}, {"output": "Nice"})
    assert contents(memory) == ["I own a red bicycle"]


def test_put_many_checks_everything_before_writing_anything(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    memory = make_collection()
    with pytest.raises(InvalidInputError):
        memory.put_many(["fine", "", "also fine"])
    assert memory.list() == []
    ids = memory.put_many([f"fact {i}" for i in range(50)], metadatas=[{"n": i} for i in range(50)])
    assert len(set(ids)) == 50 and len(memory.list()) == 50
    assert memory.search("fact 7", k=1)[0].metadata == {"n": 7}
    assert len(asyncio.run(memory.aput_many(["one more"]))) == 1


def test_aput_many_awaits_the_ledgers_async_commit_on_the_event_loop(
    make_collection: Callable[..., CollectionMemory],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As ``put_many``'s loop, not the sync method on a worker thread."""
    memory = make_collection()
    store = memory.ledger
    threads: list[int] = []
    original = store.acommit_many

    async def commit(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return await original(*args, **kwargs)

    monkeypatch.setattr(store, "acommit_many", commit)

    async def put() -> tuple[int, list[str]]:
        ids = await memory.aput_many(["User likes tea"], metadatas=[{"n": 1}])
        return threading.get_ident(), ids

    loop, ids = asyncio.run(put())
    assert threads == [loop]
    assert [r.metadata for r in memory.list()] == [{"n": 1}] and len(ids) == 1


def test_an_index_lost_with_its_process_is_rebuilt_from_the_ledger(
    make_collection: Callable[..., CollectionMemory], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'restart.db'}"
    first = make_collection(url=url, collection=f"r{uuid.uuid4().hex[:8]}")
    first.put_many(["User likes tea", "User owns a bike"])
    # A new process: the in-memory index starts empty (another collection prefix here).
    again = make_collection(url=url, collection=f"r{uuid.uuid4().hex[:8]}")
    assert [r.content for r in again.search("bike", k=1)] == ["User owns a bike"]


def test_refresh_folds_every_queued_batch_in(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    memory = make_collection(policy="manual", max_turns_per_update=3)
    converse(memory, [f"Fact number {i} about me" for i in range(10)])
    result = memory.refresh()
    assert (result.status, result.turns, result.inserted) == ("updated", 10, 10)
    assert memory.status().pending == 0 and len(memory.list()) == 10


class SlowScript(CollectionScript):
    """Thinks for a while before answering, so two updaters overlap."""

    def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)
        return super()._generate(messages, *args, **kwargs)


def test_two_updaters_folding_the_same_turns_store_them_once(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    import threading

    script = {"I speak Basque.": [("insert", None, "User speaks Basque")]}
    first, second = (
        make_collection(llm=SlowScript(script=script), policy="manual", namespace=("race",))
        for _ in range(2)
    )
    converse(first, ["I speak Basque."])
    results: list[Any] = []
    threads = [
        threading.Thread(target=lambda m=m: results.append(m.refresh())) for m in (first, second)
    ]
    for thread in threads:
        thread.start()
    joined(*threads)
    assert contents(first) == ["User speaks Basque"]
    assert sorted(r.status for r in results) == ["idle", "updated"]  # the loser found it done


def test_a_chain_with_another_output_key_loads_its_memories(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    memory = make_collection(output_key="response")
    memory.save_context({"input": "I like green tea"}, {"response": "Noted"})
    assert memory.load_memory_variables({"input": "green tea?"}) == {
        "memories": "- I like green tea"
    }


def test_the_duplicate_check_embeds_the_new_text_once(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    """Its search and its similarity check share the text's embedding."""
    from tests.vector.conftest import WordEmbeddings

    embeddings = WordEmbeddings()
    memory = make_collection(duplicate_threshold=0.75, embeddings=embeddings)
    converse(memory, ["I like green tea"])
    embeddings.queries.clear()
    assert memory.duplicate_of("I like green tea a lot") is not None  # cosine 0.82
    assert embeddings.queries == ["I like green tea a lot"]


def test_an_update_the_index_missed_is_indexed_again_by_the_next_process(
    make_collection: Callable[..., CollectionMemory],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A process died between the ledger's write and the index's: same count, old text."""
    url, collection = f"sqlite:///{tmp_path / 'died.db'}", f"d{uuid.uuid4().hex[:8]}"
    first = make_collection(url=url, collection=collection)
    tea = first.put("User likes tea")
    first.put("User owns a bike")
    assert len(first.search("User", k=10)) == 2  # this object has checked its index
    with monkeypatch.context() as died:
        died.setattr(CollectionMemory, "_indexing", lambda self, keys, items: iter(()))
        first.update(tea, "User likes strong coffee")
    assert [r.content for r in first.search("tea", k=1)] == ["User likes tea"]  # the stale index
    again = make_collection(url=url, collection=collection)
    with caplog.at_level("WARNING"):
        found = again.search("strong coffee", k=1)
    assert [(r.content, r.version) for r in found] == [("User likes strong coffee", 2)]
    assert "1 memories are indexed at another version" in caplog.text
    assert len(again.search("User", k=10)) == 2


def test_search_as_of_now_ranks_and_scores_as_a_search_of_the_current_memories(
    make_collection: Callable[..., CollectionMemory],
) -> None:
    """Both use the memory's recall (hybrid: a rare word counts), not the embeddings alone."""
    memory = make_collection()
    memory.put("User drinks tea")
    memory.put("User named the new kitten Miso after the soup she loves eating every day")
    memory.put("User works from home on Fridays")
    current = memory.search("Miso user")
    now = memory.search("Miso user", as_of=datetime.now(UTC))
    assert "Miso" in current[0].content
    assert [r.id for r in now] == [r.id for r in current]
    assert [r.score for r in now] == pytest.approx([r.score for r in current], abs=1e-6)
