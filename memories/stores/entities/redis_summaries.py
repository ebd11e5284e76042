"""Entity summaries in Redis, every version kept: LangChain's ``RedisEntityStore`` on redis-py.

Per session (percent-encoded: no session id reaches another's keys) it keeps
``{key_prefix}:{session}:versions:{entity}`` (a list of ``[value or null,
created_at]`` as JSON, oldest first), ``...:entities`` (a sorted set of the names,
scored by their newest version's sequence number) and ``...:seq`` (the last one
given). A write is one ``MULTI``/``EXEC`` that ``WATCH``-es its keys: all of its
versions or none, in one order across processes. How it differs from LangChain's
store: ``docs/memories/langchain-entities.md``.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, NoReturn
from urllib.parse import quote

from memories.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigError,
    MissingDependencyError,
)
from memories.kernel.checks import non_empty_text, positive_number, whole_number
from memories.kernel.imports import install_hint
from memories.stores.entities.summaries import DEFAULT_ENTITY_SESSION, EntityStore, EntityVersion
from memories.stores.sql import redacted

__all__ = ["RedisEntityStore"]

#: How many times a write is retried when another client changed the session meanwhile.
WRITE_ATTEMPTS = 50


def _seconds(name: str, value: Any) -> int | None:
    return None if value is None else whole_number(value, name, least=1, hint="seconds, or None")


class RedisEntityStore(EntityStore):
    """Entities in a Redis server, every version kept (LangChain's ``RedisEntityStore``'s args).

    Args:
        session_id: whose entities these are.
        url: the server (``redis://[:password@]host:port/db``, ``rediss://`` for TLS).
        key_prefix: the first part of every key.
        ttl: seconds an entity (its history with it) is kept after a write; None:
            until deleted.
        recall_ttl: seconds an entity is kept after :meth:`get` reads it (``ttl`` if None).
        timeout: seconds a connection or a command may take before it fails
            with :class:`~memories.errors.BackendUnavailableError`.
        redis_client: a ``redis.Redis`` client (``decode_responses=True``) to use
            instead of one made from ``url`` and ``timeout`` (LangChain's store
            requires this argument, then replaces it).

    Raises:
        ConfigError: a bad argument.
        MissingDependencyError: redis-py is not installed.
    """

    config_type: ClassVar[str] = "redis"

    def __init__(
        self,
        session_id: str = DEFAULT_ENTITY_SESSION,
        url: str = "redis://localhost:6379/0",
        key_prefix: str = "memory_store",
        ttl: int | None = 60 * 60 * 24,
        recall_ttl: int | None = 60 * 60 * 24 * 3,
        *,
        timeout: float = 5.0,
        redis_client: Any = None,
    ) -> None:
        try:
            import redis
        except ImportError as exc:
            raise MissingDependencyError("RedisEntityStore", install_hint("redis")) from exc
        self.session_id = non_empty_text(session_id, "session_id")
        self.url = url
        self.key_prefix = non_empty_text(key_prefix, "key_prefix")
        self.ttl = _seconds("ttl", ttl)
        self.recall_ttl = _seconds("recall_ttl", recall_ttl) or self.ttl  # LangChain's rule
        self.timeout = positive_number(timeout, "timeout", hint="seconds")
        self._given = redis_client is not None
        self._client = redis_client if self._given else self._connect(redis, url, timeout)
        pool_options = getattr(
            getattr(self._client, "connection_pool", None), "connection_kwargs", {}
        )
        if not pool_options.get("decode_responses"):
            raise ConfigError(
                f"redis_client {self._client!r:.80} must decode responses: make it with "
                "redis.Redis(..., decode_responses=True), or pass url= instead."
            )
        self._errors = redis.exceptions
        #: The server, as errors and the repr name it (no password).
        self._where = redacted(url)
        if self._given:
            host, port = pool_options.get("host", "?"), pool_options.get("port", "?")
            self._where = f"redis://{host}:{port}/{pool_options.get('db', 0)}"
        base = f"{key_prefix}:{quote(session_id, safe='')}"
        self._index_key, self._seq_key = f"{base}:entities", f"{base}:seq"
        self._versions_prefix = f"{base}:versions:"

    @staticmethod
    def _connect(redis: Any, url: str, timeout: float) -> Any:
        try:
            return redis.Redis.from_url(
                url, decode_responses=True, socket_timeout=timeout, socket_connect_timeout=timeout
            )
        except ValueError as exc:
            raise ConfigError(
                f"url {redacted(url)!r} is not a Redis URL ({exc}); write it as "
                "redis://[:password@]host:port/db"
            ) from exc

    def _versions_key(self, entity: str) -> str:
        return self._versions_prefix + entity

    def _keep_session(self, pipe: Any) -> None:
        """Queue the time to live of the session's index and counter: its longest-kept
        entity's (none while entities written are kept until deleted)."""
        kept = None if self.ttl is None else max(self.ttl, self.recall_ttl or self.ttl)
        for key in (self._index_key, self._seq_key):
            self._keep(pipe, key, kept)

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Redis errors as the library's: unreachable or timed out, or any other failure."""
        errors = self._errors
        try:
            yield
        except (errors.ConnectionError, errors.TimeoutError) as exc:
            raise BackendUnavailableError(
                f"The Redis server {self._where!r} cannot be reached "
                f"(within {self.timeout} s): {exc}"
            ) from exc
        except errors.RedisError as exc:
            raise BackendError(f"The Redis server {self._where!r} failed: {exc}") from exc

    def _keep(self, pipe: Any, key: str, seconds: int | None) -> None:
        """Queue ``key``'s time to live: ``seconds``, or none at all (as LangChain's ``SET``)."""
        if seconds is None:
            pipe.persist(key)
        else:
            pipe.expire(key, seconds)

    @staticmethod
    def _version(entity: str, stored: str) -> EntityVersion:
        value, created_at = json.loads(stored)
        return EntityVersion(entity, value, created_at)

    def _latest(self, entity: str, /) -> EntityVersion | None:
        with self._translated():
            stored = self._client.lindex(self._versions_key(entity), -1)
        return None if stored is None else self._version(entity, stored)

    def get(self, key: str, default: str | None = None) -> str | None:
        """The entity's summary, or ``default``; reading it keeps it ``recall_ttl`` seconds more."""
        if self.recall_ttl is None:
            return super().get(key, default)
        versions = self._versions_key(key)
        with self._translated(), self._client.pipeline(transaction=True) as pipe:
            pipe.lindex(versions, -1)
            pipe.expire(versions, self.recall_ttl)
            self._keep_session(pipe)
            stored = pipe.execute()[0]
        value = None if stored is None else self._version(key, stored).value
        return default if value is None else value

    def _append(self, versions: Sequence[tuple[str, str | None]], /) -> None:
        now = time.time()

        def queue(pipe: Any, seq: int, names: list[str]) -> None:
            for number, (entity, value) in enumerate(versions, start=seq + 1):
                key = self._versions_key(entity)
                pipe.rpush(key, json.dumps([value, now], ensure_ascii=False))
                pipe.zadd(self._index_key, {entity: number})
                self._keep(pipe, key, self.ttl)
            pipe.set(self._seq_key, seq + len(versions))
            self._keep_session(pipe)

        self._transaction(queue, keys=[self._versions_key(entity) for entity, _ in versions])

    def _transaction(
        self,
        queue: Callable[[Any, int, list[str]], None],
        *,
        names: bool = False,
        keys: Sequence[str] = (),
    ) -> None:
        """Run ``queue(pipe, last sequence number, entity names)``'s commands in one transaction.

        One ``MULTI``/``EXEC``, the keys ``WATCH``-ed: if another client wrote them
        meanwhile, nothing is applied and it runs again. The names are read only if
        ``names``. Redis applies the rest of a transaction when one command fails, so
        the written keys' types are checked first.

        Raises:
            BackendError: a key holds another program's data, or it lost to
                other writers :data:`WRITE_ATTEMPTS` times; nothing was written.
        """
        watched = [self._seq_key, self._index_key, *keys]
        with self._translated(), self._client.pipeline(transaction=True) as pipe:
            for attempt in range(WRITE_ATTEMPTS):
                try:
                    pipe.watch(*watched)
                    self._check_types(watched)
                    seq = self._sequence(pipe.get(self._seq_key))
                    current = pipe.zrange(self._index_key, 0, -1) if names else []
                    pipe.multi()
                    queue(pipe, seq, current)
                    pipe.execute()
                    return
                except self._errors.WatchError:
                    # Every writer of a session watches its sequence: without a pause
                    # (jittered, doubling, at most 0.1 s) 16 writers kept invalidating
                    # each other past 50 attempts.
                    time.sleep(random.uniform(0, min(0.1, 0.002 * 2**attempt)))
        raise BackendError(
            f"Writing entities of session {self.session_id!r} to {self._where!r} lost "
            f"to other writers {WRITE_ATTEMPTS} times in a row; nothing was written. Retry."
        )

    def _check_types(self, keys: Sequence[str]) -> None:
        expected = {self._seq_key: "string", self._index_key: "zset"}
        with self._client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.type(key)
            types = pipe.execute()
        for key, found in zip(keys, types, strict=True):
            if found not in ("none", expected.get(key, "list")):
                self._foreign(key, f"a {found}")

    def _sequence(self, stored: str | None) -> int:
        try:
            return int(stored or 0)
        except ValueError:
            return self._foreign(self._seq_key, f"{stored!r:.40}")

    def _foreign(self, key: str, found: str) -> NoReturn:
        raise BackendError(
            f"The Redis key {key!r} on {self._where!r} holds {found}, not this store's data: "
            f"another program (LangChain's RedisEntityStore?) writes under key_prefix "
            f"{self.key_prefix!r} and session {self.session_id!r}. Give this store another "
            "key_prefix. Nothing was written."
        )

    def history(self, entity: str, /) -> list[EntityVersion]:
        with self._translated():
            stored = self._client.lrange(self._versions_key(entity), 0, -1)
        return [self._version(entity, item) for item in stored]

    def _each(self, command: Callable[[Any, str], None]) -> tuple[list[str], list[Any]]:
        """The session's entity names, and ``command(pipe, versions key)``'s reply for each."""
        names = self._client.zrange(self._index_key, 0, -1)
        with self._client.pipeline(transaction=False) as pipe:
            for name in names:
                command(pipe, self._versions_key(name))
            return names, pipe.execute() if names else []

    def entities(self) -> dict[str, str]:
        with self._translated():
            names, newest = self._each(lambda pipe, key: pipe.lindex(key, -1))
        current = {}
        for name, stored in zip(names, newest, strict=True):
            value = None if stored is None else self._version(name, stored).value
            if value is not None:  # None: deleted, or expired (its ttl ran out)
                current[name] = value
        return current

    def held(self) -> dict[str, int]:
        """Every version of every entity of the session, and the session's index and counter."""
        with self._translated():
            _, lengths = self._each(lambda pipe, key: pipe.llen(key))
            keys = int(self._client.exists(self._index_key, self._seq_key))
        return {"entity versions": sum(map(int, lengths)), "redis index keys": keys}

    def purge(self) -> None:
        def queue(pipe: Any, seq: int, names: list[str]) -> None:
            pipe.delete(self._index_key, self._seq_key, *map(self._versions_key, names))

        self._transaction(queue, names=True)

    def to_config(self) -> dict[str, Any]:
        if self._given:
            raise NotImplementedError("a RedisEntityStore on a redis_client has no config form")
        return {
            "type": self.config_type,
            "url": self.url,
            "session_id": self.session_id,
            "key_prefix": self.key_prefix,
            "ttl": self.ttl,
            "recall_ttl": self.recall_ttl,
            "timeout": self.timeout,
        }

    def close(self) -> None:
        """Close the connections to the server (a ``redis_client`` given stays open)."""
        if not self._given:
            self._client.close()

    def __repr__(self) -> str:
        return (
            f"RedisEntityStore({self._where!r}, session_id={self.session_id!r}, "
            f"key_prefix={self.key_prefix!r})"
        )
