"""A time to live belongs to the item: a write keeps the item's own expiry rule.

A memory's default ``ttl`` applies to new items only. An edit (update,
rollback, a put over an existing id, the inspector's edit, MCP's
``manage_memory update``) keeps what the item was saved with: a permanent item
stays permanent, an item saved with ``ttl=X`` lives X minutes after the edit.
An expired item (hidden, not swept yet) is gone for an edit: "No memory ...".
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from memories import CollectionMemory, ExampleMemory, InvalidInputError
from tests.retention.conftest import EMBEDDINGS, Clock, Make
from tests.retention.test_ttl_writes import vector


def test_an_edited_permanent_memory_survives_the_sweep(make: Make, clock: Clock) -> None:
    # The reproducer: the edit gave the item the memory's default ttl.
    memory = make(policy="manual", ttl=0.01)
    x = memory.put("Ada is allergic to penicillin", ttl=None)
    memory.update(x, "Ada is allergic to penicillin and latex", expected_version=1)
    clock.minutes(1)
    assert memory.sweep() == {}
    record = memory.get(x)
    assert record is not None and record.content == "Ada is allergic to penicillin and latex"
    assert [v.version for v in memory.history(x)] == [1, 2]


def test_an_item_keeps_its_own_ttl_through_edits_and_restarts_it(make: Make, clock: Clock) -> None:
    memory = make(policy="manual", ttl=10)
    own = memory.put("Ada is in Porto for the summer", ttl=60)
    clock.minutes(30)
    memory.update(own, "Ada is in Porto until September")
    assert memory.expiry.expires_at(memory.namespace, own) == clock() + 60 * 60
    clock.minutes(50)  # 80 after the put, 50 after the edit: its own 60 minutes hold
    assert memory.get(own) is not None
    memory.rollback(own, 1)
    clock.minutes(59)
    assert memory.get(own) is not None
    clock.minutes(2)
    assert memory.get(own) is None


def test_a_memory_saved_without_ttl_stays_permanent_under_a_process_with_one(
    make: Make, clock: Clock
) -> None:
    saved = make(policy="manual").put("Ada's blood type is 0+")  # a config without ttl
    later = make(policy="manual", ttl=5)
    later.update(saved, "Ada's blood type is 0 negative")
    later.put("Ada's blood type is 0-", memory_id=saved)
    later.rollback(saved, 1)
    new = later.put("Ada is in Rome")  # a new item takes the default
    clock.minutes(6)
    assert later.sweep() == {"users/ada": 1}
    assert later.get(new) is None
    record = later.get(saved)
    assert record is not None and record.content == "Ada's blood type is 0+"
    assert later.expiry.expires_at(later.namespace, saved) is None


def test_a_restored_memory_keeps_the_rule_it_had_before_its_delete(
    make: Make, clock: Clock
) -> None:
    memory = make(policy="manual", ttl=5)
    forever = memory.put("Ada speaks Portuguese", ttl=None)
    hour = memory.put("Ada is at a conference", ttl=60)
    memory.delete(forever)
    memory.delete(hour)
    memory.rollback(forever, 1)
    memory.rollback(hour, 1)
    assert memory.expiry.expires_at(memory.namespace, forever) is None
    assert memory.expiry.expires_at(memory.namespace, hour) == clock() + 60 * 60
    clock.minutes(30)
    assert memory.sweep() == {}
    assert {r.id for r in memory.list()} == {forever, hour}


def test_a_deleted_memory_goes_with_its_history_at_its_expiry(make: Make, clock: Clock) -> None:
    memory = make(policy="manual", ttl=5)
    gone = memory.put("Ada's door code is 4711")
    memory.delete(gone)
    clock.minutes(6)
    assert memory.sweep() == {"users/ada": 1}
    assert memory.history(gone) == [] and memory.expiry.count() == 0


def test_an_expired_memory_is_no_memory_to_edit(make: Make, clock: Clock) -> None:
    memory = make(policy="manual")
    short = memory.put("Ada is at the dentist", ttl=5)
    clock.minutes(6)
    for edit in (
        lambda: memory.update(short, "Ada is at the dentist again"),
        lambda: memory.delete(short),
        lambda: memory.rollback(short, 1),
    ):
        with pytest.raises(InvalidInputError, match="No memory"):
            edit()
    with pytest.raises(InvalidInputError, match="No memory"):
        asyncio.run(memory.aupdate(short, "Ada is at the dentist again"))
    assert memory.sweep() == {"users/ada": 1} and memory.history(short) == []


def test_a_put_over_an_expired_id_is_a_new_memory_with_the_default(
    make: Make, clock: Clock
) -> None:
    memory = make(policy="manual")
    memory.put("Ada is in Rome", memory_id="where", ttl=5)
    clock.minutes(6)
    memory.put("Ada is in Oslo", memory_id="where")  # no default: it never expires
    assert memory.expiry.expires_at(memory.namespace, "where") is None
    clock.minutes(60)
    assert memory.sweep() == {}
    record = memory.get("where")
    assert record is not None and record.content == "Ada is in Oslo"


def test_async_edits_keep_the_items_own_rule(make: Make, clock: Clock) -> None:
    memory = make(policy="manual", ttl=0.5)

    async def edits() -> str:
        x = await memory.aput("Ada likes jazz", ttl=None)
        await memory.aupdate(x, "Ada likes jazz and blues")
        await memory.aput("Ada likes blues", memory_id=x)
        await memory.arollback(x, 1)
        return x

    x = asyncio.run(edits())
    clock.minutes(1)
    assert memory.sweep() == {} and memory.get(x) is not None


def test_manage_memory_update_of_an_expired_memory_says_no_memory(tmp_path: Path) -> None:
    from memories import memory_tools
    from memories.kernel.namespaces import in_namespace

    clock = Clock()
    memory = CollectionMemory(
        namespace=("memories", "{user_id}"),
        url=f"sqlite:///{tmp_path / 'ledger.db'}",
        mode="memory",
        collection=f"t{uuid.uuid4().hex[:10]}",  # the process's in-memory Chroma is shared
        embeddings=EMBEDDINGS,
        policy="manual",
        clock=clock,
    )
    manage, _ = memory_tools(memory)
    alice = {"configurable": {"user_id": "alice", "thread_id": "t"}}
    created = manage.invoke({"content": "Alice is in Lisbon"}, alice)
    memory_id = created.removeprefix("created memory ")
    ada = in_namespace(memory, ("memories", "alice"))
    ada.put("Alice is in Lisbon", memory_id=memory_id, ttl=5)
    clock.minutes(6)
    answer = manage.invoke({"action": "update", "id": memory_id, "content": "Porto"}, alice)
    assert answer.startswith("Error: No memory"), answer


def test_writers_sweeps_and_edits_lose_no_permanent_memory(tmp_path: Path) -> None:
    # Two writers put permanent and short-lived memories, an editor edits the permanent
    # ones, a sweeper sweeps, all at once, all on one SQLite ledger and one Chroma folder.
    clock, url = Clock(), f"sqlite:///{tmp_path / 'ledger.db'}"

    def memory() -> CollectionMemory:
        return CollectionMemory(
            path=str(tmp_path / "chroma"),
            url=url,
            namespace=("users", "ada"),
            embeddings=EMBEDDINGS,
            policy="manual",
            ttl=0.01,
            clock=clock,
        )

    permanent: list[str] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def writer(name: str) -> None:
        mine = memory()
        for i in range(25):
            permanent.append(mine.put(f"{name} keeps fact {i}", ttl=None))
            mine.put(f"{name} passing thought {i}")

    def editor() -> None:
        mine = memory()
        edited = 0
        while not done.is_set() or edited < len(permanent):
            for memory_id in list(permanent[edited:]):
                mine.update(memory_id, f"edited {memory_id}")
                edited += 1

    def sweeper() -> None:
        mine = memory()
        while not done.is_set():
            clock.minutes(1)
            mine.sweep()

    def guarded(work: Any, *args: Any) -> None:
        try:
            work(*args)
        except BaseException as exc:  # reported by the test below
            errors.append(exc)
            done.set()

    writers = [threading.Thread(target=guarded, args=(writer, n)) for n in ("w1", "w2")]
    others = [threading.Thread(target=guarded, args=(f,)) for f in (editor, sweeper)]
    for thread in writers + others:
        thread.start()
    for thread in writers:
        thread.join(timeout=120)
    done.set()
    for thread in others:
        thread.join(timeout=120)
    assert not errors, errors
    check = memory()
    clock.minutes(1)
    check.sweep()
    kept = {r.id: r.content for r in check.list()}
    assert set(permanent) <= kept.keys(), set(permanent) - kept.keys()
    assert all(kept[i] == f"edited {i}" for i in permanent)
    assert len(kept) == 50


def test_a_vector_document_written_again_keeps_its_own_rule(tmp_path: Path) -> None:
    clock = Clock()
    memory = vector(tmp_path, clock, ttl=5)
    [forever] = memory.add(["Ada speaks Portuguese"], ttl=None)
    [hour] = memory.add(["Ada is at a conference"], ttl=60)
    memory.add(["Ada speaks Portuguese and Spanish"], ids=[forever])
    memory.add(["Ada is at a conference in Porto"], ids=[hour])
    [new] = memory.add(["Ada is in Rome"], ids=["rome"])  # new: the default
    assert memory.expiry.expires_at(memory.namespace, forever) is None
    assert memory.expiry.expires_at(memory.namespace, hour) == clock() + 60 * 60
    assert memory.expiry.expires_at(memory.namespace, new) == clock() + 5 * 60


def test_an_example_recorded_again_keeps_its_own_rule(tmp_path: Path) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    clock = Clock()
    options: dict[str, Any] = {
        "path": str(tmp_path / "chroma"),
        "embeddings": EMBEDDINGS,
        "namespace": ("agents", "helper"),
        "clock": clock,
    }
    turn = [HumanMessage("hi"), AIMessage("hello")]
    ExampleMemory(**options).save_messages(turn, turn_id="t1")  # saved without a ttl
    later = ExampleMemory(**options, ttl=5)
    later.save_messages(turn, turn_id="t1")
    assert later.expiry.expires_at(later.namespace, "t1") is None


def test_a_profile_keeps_its_own_rule_under_a_process_with_another_ttl(
    ledger_url: str, clock: Clock
) -> None:
    from memories import ProfileMemory

    def profile(user: str, **options: Any) -> ProfileMemory:
        return ProfileMemory(
            url=ledger_url, namespace=("users", user), policy="manual", clock=clock, **options
        )

    profile("ada").put({"city": "Rome"})  # a config without ttl: permanent
    profile("bo", ttl=60).put({"city": "Oslo"})
    short = profile("ada", ttl=10)
    short.update([{"op": "add", "path": "/city", "value": "Porto"}])
    bo = profile("bo", ttl=10)
    bo.update([{"op": "add", "path": "/city", "value": "Bergen"}])
    new = profile("cy", ttl=10)
    new.put({"city": "Lima"})  # a new profile takes the default
    clock.minutes(30)
    assert short.sweep() == {"users/cy": 1}
    assert short.get() == {"city": "Porto"} and bo.get() == {"city": "Bergen"}
    assert short.expiry.expires_at(short.namespace, short.key) is None
    clock.minutes(31)
    assert bo.get() == {}


def test_a_models_update_keeps_the_permanent_memory_it_changes(make: Make, clock: Clock) -> None:
    from tests.collection.fakes import CollectionScript

    script = {
        "I moved to Porto.": [("update", "lives in", "User lives in Porto")],
        "I have a dog.": [("insert", None, "User has a dog")],
    }
    memory = make(llm=CollectionScript(script=script), update_method="json", ttl=5)
    home = memory.put("User lives in Lisbon", ttl=None)
    memory.save_context({"input": "I moved to Porto."}, {"output": "ok"})
    memory.save_context({"input": "I have a dog."}, {"output": "ok"})
    clock.minutes(6)
    assert memory.sweep() == {"users/ada": 1}  # the dog: new, the default
    assert [(r.id, r.content) for r in memory.list()] == [(home, "User lives in Porto")]
