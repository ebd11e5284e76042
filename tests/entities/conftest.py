"""Fixtures for the entity stores: a throwaway Redis server, and a fresh store on it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memories.stores.entities.redis_summaries import RedisEntityStore
from tests import needs
from tests.redis_server import RedisServer, find_redis_server, redis_server

#: Marks a test (or a parameter) that needs ``redis-server``.
needs_redis = [
    pytest.mark.server,
    pytest.mark.skipif(find_redis_server() is None, reason=needs.NO_REDIS),
]


@pytest.fixture(scope="session")
def redis() -> Iterator[RedisServer]:
    """One Redis server for the session's tests (each store on a session id of its own)."""
    with redis_server() as server:
        yield server


@pytest.fixture
def redis_store(redis: RedisServer) -> Iterator[Callable[..., RedisEntityStore]]:
    """Make a store on the test server, on a fresh session unless one is given."""
    made: list[RedisEntityStore] = []

    def make(**options: Any) -> RedisEntityStore:
        options.setdefault("session_id", f"s-{uuid.uuid4().hex[:12]}")
        store = RedisEntityStore(url=redis.url, **options)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
