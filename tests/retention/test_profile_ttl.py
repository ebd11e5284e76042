"""Profiles and instructions with a time to live, on SQLite and PostgreSQL, the clock injected.

Expired, the document reads as the initial one at once; the sweep deletes it
with every version; its expiry row is written in the same transaction.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from memories import InstructionsMemory, InvalidInputError, ProfileMemory, create_memory
from memories.faces.commands import sweep
from memories.kernel.background import Debouncer
from memories.stores.expiry import ExpiryLedger
from tests.profile.fakes import ScriptedChatModel, tool_reply
from tests.retention.conftest import Clock

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "likes": {"type": "array"}},
    "default": {"likes": []},
}


@pytest.fixture
def url(ledger_url: str) -> str:
    return ledger_url


def profile(url: str, clock: Clock, **options: Any) -> ProfileMemory:
    options.setdefault("namespace", ("users", "ada"))
    return ProfileMemory(url=url, policy="manual", clock=clock, **options)


def test_an_expired_profile_reads_empty_at_once_and_is_swept_with_every_version(
    url: str, clock: Clock
) -> None:
    memory = profile(url, clock, ttl=60)
    memory.put({"city": "Porto"})
    memory.update([{"op": "add", "path": "/likes", "value": ["tea"]}])
    assert memory.get() == {"city": "Porto", "likes": ["tea"]}
    clock.minutes(61)

    assert memory.get() == {}
    assert memory.load_memory_variables({})["profile"] == ""
    assert len(memory.history()) == 2  # still stored until the sweep
    assert memory.sweep(dry_run=True) == {"users/ada": 1}
    assert memory.sweep() == {"users/ada": 1}
    assert memory.history() == [] and memory.status().version == 0
    assert memory.store.load(memory.namespace, memory.key) is None
    assert memory.expiry.count() == 0 and memory.sweep() == {}


def test_a_schema_profile_reads_its_initial_document_once_expired(url: str, clock: Clock) -> None:
    memory = profile(url, clock, ttl=10, schema=SCHEMA)
    memory.put({"city": "Rome", "likes": ["chess"]})
    clock.minutes(11)
    assert memory.get() == {"likes": []}
    # a write after expiry starts from the initial document, compare-and-set intact
    version = memory.update([{"op": "add", "path": "/city", "value": "Oslo"}])
    assert version == 2 and memory.get() == {"likes": [], "city": "Oslo"}
    # what expired is gone from the history with the new write, not only from reads
    assert [(c.version, c.document) for c in memory.history()] == [
        (2, {"likes": [], "city": "Oslo"})
    ]
    clock.minutes(9)
    assert memory.get() == {"likes": [], "city": "Oslo"}  # the write restarted its time
    assert memory.sweep() == {}


def test_each_write_restarts_the_time_and_refresh_on_read_restarts_it_on_reads(
    url: str, clock: Clock
) -> None:
    plain = profile(url, clock, ttl=10)
    read = profile(url, clock, ttl=10, refresh_on_read=True, namespace=("users", "bo"))
    plain.put({"city": "Lisbon"})
    read.put({"city": "Paris"})
    clock.minutes(8)
    assert plain.get() == {"city": "Lisbon"} and read.get() == {"city": "Paris"}
    clock.minutes(8)  # 16 minutes after the writes, 8 after the reads
    assert plain.get() == {}
    assert read.load_memory_variables({})["profile"] == '{"city":"Paris"}'
    clock.minutes(11)
    assert read.get() == {}
    assert plain.sweep() == {"users/ada": 1, "users/bo": 1}


def test_sweep_own_deletes_only_the_memorys_namespace_sync_and_async(
    url: str, clock: Clock
) -> None:
    ada = profile(url, clock, ttl=10)
    bo = profile(url, clock, ttl=10, namespace=("users", "bo"))
    ada.put({"city": "Lisbon"})
    bo.put({"city": "Paris"})
    clock.minutes(11)
    assert ada.sweep(own=True, dry_run=True) == {"users/ada": 1}
    assert asyncio.run(ada.asweep(own=True)) == {"users/ada": 1}
    assert ada.store.load(ada.namespace, ada.key) is None
    assert bo.store.load(bo.namespace, bo.key) is not None
    assert ada.sweep() == {"users/bo": 1}


def test_without_ttl_a_profile_never_expires(url: str, clock: Clock) -> None:
    memory = profile(url, clock)
    memory.put({"city": "Rome"})
    clock.minutes(10**6)
    assert memory.get() == {"city": "Rome"} and memory.sweep() == {}


def test_a_failure_with_the_expiry_row_writes_no_profile(
    url: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = profile(url, clock, ttl=10)
    real = ExpiryLedger.stamping

    def failing(self: ExpiryLedger, *args: Any, **kwargs: Any) -> Any:
        write = real(self, *args, **kwargs)

        def then_crash(connection: sa.Connection) -> None:
            write(connection)
            raise RuntimeError("crash between the profile and its expiry row")

        return then_crash

    monkeypatch.setattr(ExpiryLedger, "stamping", failing)
    with pytest.raises(RuntimeError, match="crash"):
        memory.put({"city": "Rome"})
    monkeypatch.undo()
    assert memory.status().version == 0 and memory.history() == []
    assert memory.expiry.count() == 0

    memory.put({"city": "Rome"})
    assert memory.expiry.expires_at(memory.namespace, memory.key) == clock() + 600


def test_the_ttl_round_trips_through_the_config(url: str) -> None:
    memory = ProfileMemory(url=url, policy="manual", ttl=30, refresh_on_read=True)
    config = memory.to_config()
    assert config["ttl"] == 30 and config["refresh_on_read"] is True and "clock" not in config
    again = create_memory(config)
    assert isinstance(again, ProfileMemory) and again.ttl == 30 and again.refresh_on_read
    assert again.to_config() == config


def test_memories_sweep_deletes_expired_profiles(url: str, clock: Clock) -> None:
    memory = profile(url, clock, ttl=5)
    memory.put({"city": "Rome"})
    clock.minutes(6)
    [found] = sweep(memory)
    assert found.rows == {"users/ada": 1} and found.policy == {"ttl": 5}
    assert memory.history() == []


def test_async_reads_and_sweep(url: str, clock: Clock) -> None:
    memory = profile(url, clock, ttl=5)

    async def scenario() -> tuple[Any, Any, dict[str, int]]:
        await memory.aput({"city": "Rome"})
        before = await memory.aget()
        clock.minutes(6)
        shown = await memory.aload_memory_variables({})
        return before, shown, await memory.asweep()

    before, shown, swept = asyncio.run(scenario())
    assert before == {"city": "Rome"} and shown == {"profile": ""}
    assert swept == {"users/ada": 1}


def test_a_background_profile_sweeps_its_expired_document_after_its_update(
    tmp_path: Path, clock: Clock
) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    with Debouncer(delay=3600, name="profile-ttl-test") as scheduler:
        memory = ProfileMemory(
            url=url,
            llm=ScriptedChatModel(replies=[tool_reply()]),  # nothing to change
            policy="background",
            scheduler=scheduler,
            clock=clock,
            ttl=10,
            namespace=("users", "ada"),
        )
        memory.put({"city": "Rome"})
        clock.minutes(11)
        memory.save_context({"input": "hello"}, {"output": "hi"})
        assert memory.flush(timeout=30)
    assert memory.expiry.count() == 0 and memory.history() == []


def test_instructions_expire_back_to_their_initial_prompts(url: str, clock: Clock) -> None:
    memory = InstructionsMemory(
        url=url, policy="manual", prompts="Be brief.", clock=clock, ttl=10, namespace=("a",)
    )
    memory.put("Be brief and kind.")
    assert memory.get() == {"main": "Be brief and kind."}
    clock.minutes(11)
    assert memory.get() == {"main": "Be brief."}
    assert memory.sweep() == {"a": 1} and memory.history() == []


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_expired_document_has_no_version_to_roll_back_to(
    url: str, clock: Clock, asynchronous: bool
) -> None:
    ada = profile(url, clock, ttl=10)
    ada.put({"city": "Porto"})
    ada.put({"city": "Rome"})
    rules = InstructionsMemory(
        url=url, policy="manual", prompts="Be brief.", clock=clock, ttl=10, namespace=("a",)
    )
    rules.put("Call Ada by her nickname")
    rules.put("Be kind.")
    clock.minutes(11)
    assert len(ada.history()) == 2 and len(rules.history()) == 2  # until the sweep
    for memory in (ada, rules):
        with pytest.raises(InvalidInputError, match="no version 1"):
            asyncio.run(memory.arollback(1)) if asynchronous else memory.rollback(1)
    assert ada.get() == {} and rules.get() == {"main": "Be brief."}
    assert rules.rollback(0) == 3  # the initial prompts are no stored version


def test_a_write_landing_while_the_sweep_runs_is_kept(
    url: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = profile(url, clock, ttl=10)
    memory.put({"city": "Rome"})
    clock.minutes(11)
    real, written = ExpiryLedger.expired, []

    def read_then_written(self: ExpiryLedger, **options: Any) -> Any:
        found = real(self, **options)
        if found and not written:
            written.append(True)
            other = profile(url, clock, ttl=10)
            other.put({"city": "Oslo"})  # another process writes after the sweep read the row
        return found

    monkeypatch.setattr(ExpiryLedger, "expired", read_then_written)
    memory.sweep()
    monkeypatch.undo()
    assert memory.get() == {"city": "Oslo"}
    assert memory.expiry.expires_at(memory.namespace, memory.key) == clock() + 600
