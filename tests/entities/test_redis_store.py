"""RedisEntityStore against a real redis-server, beside LangChain's RedisEntityStore on it.

The interface checks shared by every store run on it in test_entity_store.py;
here: the same answers and times to live as LangChain's store for random
sequences of calls, the same conversation through ConversationEntityMemory,
LangChain's own store driven by our memory, sessions that cannot reach each
other, nothing lost by concurrent writers, bounded waits on a dead server.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memories import ConversationEntityMemory, create_memory
from memories.core.config import with_session
from memories.errors import BackendError, BackendUnavailableError, ConfigError
from memories.stores.entities.redis_summaries import RedisEntityStore
from memories.stores.entities.summaries import (
    LangChainEntityStore,
    as_entity_store,
    create_entity_store,
)
from tests.entities.conftest import needs_redis
from tests.entities.fakes import RuleModel
from tests.entities.test_entity_memory import NAMES, converse, langchain_memory, texts
from tests.helpers import joined
from tests.redis_server import RedisServer

pytestmark = [*needs_redis, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

MakeStore = Callable[..., RedisEntityStore]


def langchain_redis(url: str, **options: Any) -> Any:
    from langchain_classic.memory.entity import RedisEntityStore as LangChainRedis

    options.setdefault("session_id", f"lc-{uuid.uuid4().hex[:12]}")
    # LangChain's __init__ validates a redis_client before building its own from the
    # url: without one it raises, so its users pass one (any value; it is replaced).
    return LangChainRedis(url=url, redis_client=None, **options)


@pytest.fixture
def client(redis: RedisServer) -> Iterator[Any]:
    import redis as redis_py

    connection = redis_py.Redis.from_url(redis.url, decode_responses=True, socket_timeout=5)
    yield connection
    connection.close()


# -- LangChain's answers, LangChain's times to live ---------------------------------------

KEYS = ["Jane", "Tom", "Oslo"]
call = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(KEYS), st.sampled_from(["", "a", "b c", "é ✓"])),
    st.tuples(st.sampled_from(["get", "delete", "exists"]), st.sampled_from(KEYS), st.just("")),
    st.tuples(st.just("clear"), st.just(""), st.just("")),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(calls=st.lists(call, max_size=25))
def test_random_calls_answer_as_langchains_redis_store(
    calls: list[tuple[str, str, str]], redis: RedisServer, redis_store: MakeStore
) -> None:
    theirs, ours = langchain_redis(redis.url), redis_store()
    for name, key, value in calls:
        if name == "get":
            # LangChain's store answers "" for an unknown key whatever the default;
            # the memory always asks with default "", where both agree.
            assert ours.get(key, "") == theirs.get(key, "")
        elif name == "exists":
            assert ours.exists(key) == theirs.exists(key)
        else:
            for store in (theirs, ours):
                getattr(store, name)(
                    *((key, value) if name == "set" else (key,) * (name != "clear"))
                )
    assert {k: ours.get(k, "") for k in KEYS} == {k: theirs.get(k, "") for k in KEYS}


def test_times_to_live_are_langchains(
    redis: RedisServer, redis_store: MakeStore, client: Any
) -> None:
    options = {"ttl": 1000, "recall_ttl": 5000}
    theirs, ours = langchain_redis(redis.url, **options), redis_store(**options)

    def ttls(entity: str) -> tuple[int, int]:
        their_key = f"{theirs.full_key_prefix}:{entity}"
        return client.ttl(their_key), client.ttl(ours._versions_key(entity))

    for store in (theirs, ours):
        store.set("Jane", "one")
    assert all(900 < t <= 1000 for t in ttls("Jane"))
    for store in (theirs, ours):
        store.get("Jane")
    assert all(4900 < t <= 5000 for t in ttls("Jane"))
    # recall_ttl=None means ttl, as in LangChain's store; ttl=None keeps entities for good.
    assert redis_store(ttl=60, recall_ttl=None).recall_ttl == 60
    forever = redis_store(ttl=None, recall_ttl=None)
    forever.set("Jane", "kept")
    forever.get("Jane")
    assert client.ttl(forever._versions_key("Jane")) == -1  # no expiry
    assert client.ttl(forever._index_key) == -1


def test_an_expired_entity_is_gone_from_every_read(redis_store: MakeStore, client: Any) -> None:
    store = redis_store()
    store.set("Jane", "one")
    store.set("Tom", "two")
    client.delete(store._versions_key("Jane"))  # what the server does when its ttl runs out
    assert store.entities() == {"Tom": "two"}
    assert store.get("Jane") is None and not store.exists("Jane")
    assert store.history("Jane") == []


# -- ConversationEntityMemory on Redis ----------------------------------------------------


def test_the_memory_on_our_store_matches_langchains_on_theirs(
    redis: RedisServer, redis_store: MakeStore
) -> None:
    theirs_model, ours_model = RuleModel(), RuleModel()
    theirs = langchain_memory(llm=theirs_model, entity_store=langchain_redis(redis.url))
    ours = ConversationEntityMemory(llm=ours_model, entity_store=redis_store())
    assert converse(ours) == converse(theirs)
    assert texts(ours_model.prompts) == texts(theirs_model.prompts)
    theirs_summaries = {n: theirs.entity_store.get(n, "") for n in NAMES}
    assert {n: ours.entity_store.get(n, "") for n in NAMES} == theirs_summaries
    assert theirs_summaries["Jane"]
    assert len(ours.entity_store.history("Jane")) == 2  # every version kept


def test_the_memory_drives_langchains_own_redis_store(redis: RedisServer) -> None:
    theirs = langchain_memory(llm=RuleModel(), entity_store=langchain_redis(redis.url))
    store = langchain_redis(redis.url)
    ours = ConversationEntityMemory(llm=RuleModel(), entity_store=store)
    assert isinstance(as_entity_store(store), LangChainEntityStore)
    assert converse(ours) == converse(theirs)
    assert ours.entity_store is store
    assert {n: store.get(n, "") for n in NAMES} == {
        n: theirs.entity_store.get(n, "") for n in NAMES
    }
    ours.clear()
    assert all(store.get(n, "") == "" for n in NAMES)


def test_a_config_gives_each_session_its_own_entities(redis: RedisServer) -> None:
    config = {
        "type": "conversation_entity",
        "entity_store": {"type": "redis", "url": redis.url, "ttl": None},
    }
    for user, text in [("maya", "Maya lives in Oslo"), ("ravi", "Ravi lives in Pune")]:
        memory = create_memory({**with_session(config, user), "llm": RuleModel()})
        memory.load_memory_variables({"input": text})
        memory.save_context({"input": text}, {"output": "ok"})
    maya = create_entity_store({"type": "redis", "url": redis.url, "session_id": "maya"})
    ravi = create_entity_store({"type": "redis", "url": redis.url, "session_id": "ravi"})
    assert set(maya.entities()) == {"Maya", "Oslo"}
    assert set(ravi.entities()) == {"Ravi", "Pune"}
    assert create_entity_store(maya.to_config()).to_config() == maya.to_config()


# -- isolation, concurrency, failures ---------------------------------------------------


def test_no_session_id_reaches_another_sessions_keys(redis_store: MakeStore) -> None:
    # With LangChain's layout, session "u:versions" entity "x" and session "u" entity
    # "versions:x" would share a key; the session is percent-encoded here.
    victim = redis_store(session_id="u")
    victim.set("versions:x", "private")
    for session in ["u:versions", "u:versions:versions", "u%3Aversions", "*", "u:*"]:
        intruder = redis_store(session_id=session)
        assert intruder.get("x") is None and intruder.entities() == {}
        intruder.set("x", "mine")
        intruder.purge()
    assert victim.entities() == {"versions:x": "private"}


def test_a_restarted_store_reads_everything_back(redis_store: MakeStore) -> None:
    first = redis_store(ttl=None)
    first.set("Jane", "one")
    first.set("Jane", "two")
    first.set("Oslo", "city")
    first.delete("Oslo")
    first.close()
    again = redis_store(session_id=first.session_id, ttl=None)
    assert again.entities() == {"Jane": "two"}
    assert [v.value for v in again.history("Oslo")] == ["city", None]


def test_concurrent_writers_lose_nothing(redis_store: MakeStore) -> None:
    session, writers, writes = f"c-{uuid.uuid4().hex[:8]}", 4, 40
    stores = [redis_store(session_id=session) for _ in range(writers)]
    start = threading.Barrier(writers)

    def write(number: int) -> None:
        start.wait()
        for i in range(writes):
            stores[number].set("Jane", f"{number}-{i}")
            stores[number].set(f"E{number}", str(i))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    joined(*threads)
    history = [v.value for v in stores[0].history("Jane")]
    assert len(history) == writers * writes
    for number in range(writers):  # each writer's versions in its own order
        assert [v for v in history if v and v.startswith(f"{number}-")] == [
            f"{number}-{i}" for i in range(writes)
        ]
    entities = stores[0].entities()
    assert {k: v for k, v in entities.items() if k != "Jane"} == {
        f"E{n}": str(writes - 1) for n in range(writers)
    }
    assert entities["Jane"] == history[-1]  # the newest version is the current summary


def test_sixteen_writers_of_one_session_all_get_through(redis_store: MakeStore) -> None:
    """Each write watches the session's sequence; the losers back off instead of spinning."""
    session, writers, writes = f"w-{uuid.uuid4().hex[:8]}", 16, 25
    stores = [redis_store(session_id=session) for _ in range(writers)]
    start, failed = threading.Barrier(writers), []

    def write(number: int) -> None:
        start.wait()
        for i in range(writes):
            try:
                stores[number].set("Jane", f"{number}-{i}")
            except BackendError as exc:
                failed.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    joined(*threads)
    assert failed == []
    assert len(stores[0].history("Jane")) == writers * writes


def test_held_counts_every_version_that_purge_erases(redis_store: MakeStore) -> None:
    store = redis_store()
    store.set("Jane", "one")
    store.set("Jane", "two")
    store.delete("Jane")
    store.set("Tom", "x")
    assert store.held() == {"entity versions": 4, "redis index keys": 2}
    store.purge()
    assert store.held() == {"entity versions": 0, "redis index keys": 0}
    assert store.history("Jane") == []


def test_a_batch_is_written_whole(redis_store: MakeStore) -> None:
    store = redis_store()
    store.set("Jane", "one")
    store.set("Tom", "two")
    store.clear()  # one version per entity, in one transaction
    assert store.entities() == {}
    assert [v.value for v in store.history("Jane")] == ["one", None]
    assert [v.value for v in store.history("Tom")] == ["two", None]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


def test_a_server_that_never_answers_fails_within_the_timeout(silent_port: int) -> None:
    store = RedisEntityStore(url=f"redis://:s3cret@127.0.0.1:{silent_port}/0", timeout=0.2)
    with pytest.raises(BackendUnavailableError, match=r"cannot be reached \(within 0.2 s\)") as e:
        store.set("Jane", "one")
    assert "s3cret" not in str(e.value) and "s3cret" not in repr(store)


def test_a_stopped_server_is_unavailable_not_a_crash(redis: RedisServer) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    store = RedisEntityStore(url=f"redis://127.0.0.1:{port}/0", timeout=1)
    with pytest.raises(BackendUnavailableError):
        store.get("Jane")


def test_bad_arguments_say_what_to_do() -> None:
    with pytest.raises(ConfigError, match="session_id"):
        RedisEntityStore(session_id="")
    with pytest.raises(ConfigError, match="key_prefix"):
        RedisEntityStore(key_prefix="")
    with pytest.raises(
        ConfigError, match=r"ttl must be a whole number >= 1 \(seconds, or None\), got 0"
    ):
        RedisEntityStore(ttl=0)
    with pytest.raises(ConfigError, match="recall_ttl must be"):
        RedisEntityStore(recall_ttl=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="timeout"):
        RedisEntityStore(timeout=0)
    with pytest.raises(ConfigError, match="not a Redis URL"):
        RedisEntityStore(url="http://example.invalid")


def test_a_client_can_be_given_as_langchains_store_requires(
    redis: RedisServer, client: Any
) -> None:
    # LangChain's store must be given redis_client= (it then makes its own from url).
    store = RedisEntityStore(
        url=redis.url, session_id=f"c-{uuid.uuid4().hex[:8]}", redis_client=None
    )
    store.set("Jane", "one")
    given = RedisEntityStore(session_id=store.session_id, redis_client=client)
    assert given.get("Jane") == "one"
    assert f"127.0.0.1:{redis.port}" in repr(given)
    with pytest.raises(NotImplementedError, match="no config form"):
        given.to_config()
    given.close()
    assert client.ping()  # a client given is the caller's to close
    import redis as redis_py

    raw = redis_py.Redis.from_url(redis.url)
    with pytest.raises(ConfigError, match="decode_responses=True"):
        RedisEntityStore(redis_client=raw)
    raw.close()


@pytest.mark.parametrize("their_entity", ["entities", "seq", "versions:Jane"])
def test_keys_of_another_program_fail_the_write_and_nothing_is_written(
    redis: RedisServer, redis_store: MakeStore, their_entity: str
) -> None:
    # LangChain's store on the same prefix and session, with an entity named like our keys.
    session = f"shared-{uuid.uuid4().hex[:8]}"
    langchain_redis(redis.url, session_id=session).set(their_entity, "A summary.")
    ours = redis_store(session_id=session)
    with pytest.raises(BackendError, match=r"another program .* Nothing was written"):
        ours.set_many({"Jane": "one", "Tom": "two"})
    assert ours.history("Tom") == []
