"""Collection memories with a time to live: hidden at once when expired, deleted by the sweep.

On Chroma (a persistent folder) with the ledger on SQLite and on PostgreSQL;
the clock is injected and moved by hand.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memories import InvalidInputError
from tests.retention.conftest import Clock, Make


def test_an_expired_memory_is_hidden_at_once_and_swept_whole(
    make: Make, clock: Clock, ledger_url: str
) -> None:
    memory = make()
    short = memory.put("Ada is on holiday in Porto this week", ttl=60)
    kept = memory.put("Ada likes green tea", ttl=None)
    assert {r.id for r in memory.list()} == {short, kept}
    clock.minutes(61)

    assert memory.get(short) is None
    assert [r.id for r in memory.list()] == [kept]
    assert short not in [r.id for r in memory.search("Where is Ada on holiday?")]
    assert "Porto" not in memory.load_memory_variables({"input": "holiday Porto"})["memories"]
    assert memory.history(short)  # still stored until the sweep

    assert memory.sweep(dry_run=True) == {"users/ada": 1}
    assert memory.sweep() == {"users/ada": 1}
    assert memory.history(short) == []  # every version's row is gone
    assert memory.backend.get([short]) == []  # and the Chroma document
    assert [r.id for r in memory.backend.get([kept])] == [kept]
    assert memory.expiry.count() == 0  # no orphan expiry row
    assert memory.sweep() == {}


def test_the_namespace_default_applies_to_what_the_memory_learns(make: Make, clock: Clock) -> None:
    memory = make(ttl=30)
    memory.save_context({"input": "I'm allergic to peanuts"}, {"output": "Noted"})
    assert "peanuts" in memory.load_memory_variables({"input": "peanuts"})["memories"]
    clock.minutes(31)
    assert memory.load_memory_variables({"input": "peanuts"})["memories"] == ""
    assert memory.sweep() == {"users/ada": 1}
    assert memory.list() == []


def test_a_search_reads_past_expired_memories_to_fill_k(make: Make, clock: Clock) -> None:
    memory = make()
    memory.put("Ada plays chess on Mondays", ttl=10)
    live = {memory.put("Ada plays chess with Bo"), memory.put("Ada plays chess online")}
    clock.minutes(11)
    assert {r.id for r in memory.search("chess", k=2)} == live


def test_refresh_on_read_keeps_a_read_memory_alive(make: Make, clock: Clock) -> None:
    memory = make(ttl=10, refresh_on_read=True)
    memory_id = memory.put("Ada's locker code is 1234")
    clock.minutes(8)
    assert memory.get(memory_id) is not None
    clock.minutes(8)  # 16 minutes after the put, 8 after the read
    assert memory.search("locker code")[0].id == memory_id
    clock.minutes(11)
    assert memory.get(memory_id) is None


def test_a_sweep_covers_every_namespace_and_leaves_the_live_ones(make: Make, clock: Clock) -> None:
    ada, bo = make(ttl=10), make(ttl=10, namespace=("users", "bo"))
    ada.put("Ada is in Rome")
    bo_forever = bo.put("Bo is a pilot", ttl=None)
    bo.put("Bo is in Oslo")
    clock.minutes(11)
    assert ada.sweep() == {"users/ada": 1, "users/bo": 1}
    assert ada.list() == [] and [r.id for r in bo.list()] == [bo_forever]


def test_an_update_by_hand_without_ttl_restarts_the_default(make: Make, clock: Clock) -> None:
    memory = make(ttl=10)
    memory_id = memory.put("Ada lives in Lisbon")
    clock.minutes(8)
    memory.put("Ada lives in Porto", memory_id=memory_id)
    clock.minutes(8)
    record = memory.get(memory_id)
    assert record is not None and record.content == "Ada lives in Porto"


def test_a_bad_ttl_is_refused_and_nothing_is_stored(make: Make) -> None:
    memory = make()
    with pytest.raises(InvalidInputError, match="ttl"):
        memory.put("x", ttl=0)
    assert memory.list() == []


def test_async_reads_hide_expired_memories(make: Make, clock: Clock) -> None:
    memory = make()

    async def scenario() -> tuple[Any, Any, list[Any], dict[str, int]]:
        memory_id = await memory.aput("Ada is at the dentist", ttl=5)
        before = await memory.aget(memory_id)
        clock.minutes(6)
        return before, await memory.aget(memory_id), await memory.alist(), await memory.asweep()

    before, after, listed, swept = asyncio.run(scenario())
    assert before is not None and after is None and listed == [] and swept == {"users/ada": 1}


def test_a_background_collection_sweeps_its_namespace_after_its_update(
    make: Make, clock: Clock
) -> None:
    from memories.kernel.background import Debouncer

    with Debouncer(delay=3600, name="collection-ttl-test") as scheduler:
        memory = make(policy="background", scheduler=scheduler)
        gone = memory.put("Ada is in Rome", ttl=10)
        clock.minutes(11)
        memory.save_context({"input": "I like tea"}, {"output": "ok"})
        assert memory.flush(timeout=30)
    assert memory.history(gone) == [] and memory.expiry.count() == 0
    assert [r.content for r in memory.list()] == ["I like tea"]


def test_a_memory_written_while_the_sweep_runs_is_kept(
    make: Make, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memories.stores.expiry import ExpiryLedger

    memory = make()
    memory_id = memory.put("Ada is in Rome", ttl=10)
    gone = memory.put("Ada is at the dentist", ttl=10)
    clock.minutes(11)
    real, written = ExpiryLedger.expired, []

    def read_then_written(self: ExpiryLedger, **options: Any) -> Any:
        found = real(self, **options)
        if found and not written:
            written.append(True)  # another writer puts it again after the sweep read the rows
            make().put("Ada is in Oslo", memory_id=memory_id, ttl=10)
        return found

    monkeypatch.setattr(ExpiryLedger, "expired", read_then_written)
    memory.sweep()
    monkeypatch.undo()
    record = memory.get(memory_id)
    assert record is not None and record.content == "Ada is in Oslo"
    assert [r.id for r in memory.search("Oslo")] == [memory_id]
    assert memory.get(gone) is None and memory.history(gone) == []
    assert memory.backend.get([gone]) == []
