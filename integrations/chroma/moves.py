"""Moves of a namespace between its shard and a collection of its own.

Promotion fills a collection marked incomplete, then empties the shard;
demotion marks the collection as leaving, copies it into the shard, then
deletes it. Both are safe while other processes read and write and finish
when run again after a crash; the protocol and its known limits are on the
architecture page ("Chroma: where a namespace lives").
"""

from __future__ import annotations

import logging
import sqlite3
import time
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import httpx
from chromadb.errors import ChromaError, NotFoundError
from memories.integrations.chroma.parts import (
    _IN_SHARD,
    _INCOMPLETE_KEY,
    _JITTER,
    _LEAVING_AT_KEY,
    _LEAVING_KEY,
    _LEAVING_SECONDS,
    _NAMESPACE_META_KEY,
    _OTHER_WIDTH,
    _PAGE,
    Demotion,
    _busy,
    _Placement,
    _shard_of,
    _tag,
)

from memories.stores.vector.filters import NAMESPACE_KEY

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from memories.integrations.chroma.store import ChromaStore


def demote(store: ChromaStore, namespace: str, *, limit: int, dry_run: bool) -> Demotion:
    own, complete = store._own_collection(namespace)
    if own is None:
        return Demotion(namespace, 0, kept=_IN_SHARD)
    if not complete:
        # A promotion that crashed mid-copy: the shard still holds everything.
        if not dry_run:
            with suppress(NotFoundError):
                store._get_client().delete_collection(own.name)
            store._remember(namespace, store._shard(namespace), shard=True)
        return Demotion(namespace, 0)
    ids: list[str] = own.get(include=[])["ids"]
    if len(ids) > limit:
        return Demotion(namespace, len(ids), kept=f"more than {limit} documents")
    shard = existing_shard(store, namespace)  # a dry run makes no shard
    if shard is not None and other_shard_width(store, shard, own, ids):
        return Demotion(namespace, len(ids), kept=_OTHER_WIDTH)
    busy = moved_by_another(store, own)
    if busy is not None:
        return Demotion(namespace, len(ids), kept=_busy(busy))
    if not dry_run and not move_into_shard(store, namespace, own):
        return Demotion(namespace, len(ids), kept=_busy(0.0))
    return Demotion(namespace, len(ids))


def move_into_shard(store: ChromaStore, namespace: str, own: Any) -> bool:
    """Mark, copy, delete: False when another store's mark replaced this one's."""
    name = own.name
    own.modify(
        metadata={
            _NAMESPACE_META_KEY: namespace,
            _LEAVING_KEY: store._token,
            _LEAVING_AT_KEY: time.time(),
        }
    )
    # From here on, every write or delete that lands in the collection repeats itself in
    # the shard (upsert, delete): what the copy below misses, they bring.
    shard = store._shard(namespace)
    try:
        # Every id first: pages by offset would skip documents deleted meanwhile.
        ids: list[str] = own.get(include=[])["ids"]
        for start in range(0, len(ids), _PAGE):
            if not marked_by_me(store, name):
                return False
            copy_page(store, own, shard, namespace, ids[start : start + _PAGE], into_shard=True)
        if not marked_by_me(store, name):
            return False
        store._get_client().delete_collection(name)
    except NotFoundError:
        pass  # another store finished the move, after copying every document
    store._remember(namespace, shard, shard=True)
    return True


def copy_page(
    store: ChromaStore,
    source: Any,
    target: Any,
    namespace: str,
    ids: list[str],
    *,
    into_shard: bool,
) -> None:
    """Copy these documents of the namespace from one placement to the other (``ids`` as the
    source holds them), keeping newer writes there.

    Chroma's ``add`` leaves an id the target holds as it is: a write made during
    the copy reached it already. A document deleted from the source meanwhile is
    deleted from the copy too: its deleter may have looked at the target too early.
    """
    where = None if into_shard else {NAMESPACE_KEY: {"$eq": namespace}}
    page = source.get(ids=ids, where=where, include=["documents", "metadatas", "embeddings"])
    if not page["ids"]:
        return
    tag = _tag(namespace)
    copied = [tag + i if into_shard else i[len(tag) :] for i in page["ids"]]
    target.add(
        ids=copied,
        documents=page["documents"],
        embeddings=page["embeddings"],
        metadatas=[{**(m or {}), NAMESPACE_KEY: namespace} for m in page["metadatas"]],
    )
    kept = set(source.get(ids=page["ids"], include=[])["ids"])
    gone = [c for i, c in zip(page["ids"], copied, strict=True) if i not in kept]
    # Into an own collection only while its mark is on: once it is off, the shard is
    # emptied on purpose.
    if gone and (
        into_shard or (store._collection(target.name).metadata or {}).get(_INCOMPLETE_KEY)
    ):
        target.delete(ids=gone)


def leaving(store: ChromaStore, namespace: str) -> bool:
    """Whether the namespace's own collection is being moved into its shard, or is gone
    (moved): looked up now, after a write or delete landed in it."""
    try:
        own = store._collection(store.collection_name(namespace))
    except NotFoundError:
        return True
    return _LEAVING_KEY in (own.metadata or {})


def marked_by_me(store: ChromaStore, name: str) -> bool:
    """Whether the collection's leaving mark is still this store's (NotFoundError: gone)."""
    return (store._collection(name).metadata or {}).get(_LEAVING_KEY) == store._token


def moved_by_another(store: ChromaStore, own: Any) -> float | None:
    """How many seconds ago another store began moving this collection into its shard,
    or None when no other store is at it (a mark over :data:`_LEAVING_SECONDS` old is a
    crashed demotion's, taken over)."""
    metadata = own.metadata or {}
    mark = metadata.get(_LEAVING_KEY)
    if mark is None or mark == store._token:
        return None
    age = max(0.0, time.time() - float(metadata.get(_LEAVING_AT_KEY) or 0.0))
    return age if age < _LEAVING_SECONDS else None


def existing_shard(store: ChromaStore, namespace: str) -> Any | None:
    """The namespace's shard if it has been made, else None."""
    number = _shard_of(namespace)
    if number in store._shards:
        return store._shards[number]
    try:
        return store._collection(store._shard_name(number))
    except NotFoundError:
        return None


def other_shard_width(store: ChromaStore, shard: Any, own: Any, ids: list[str]) -> bool:
    """Whether the shard holds embeddings of another width than the collection's."""
    if not ids:
        return False
    mine = own.get(ids=ids[:1], include=["embeddings"])["embeddings"]
    theirs = shard.peek(limit=1)["embeddings"]
    if mine is None or theirs is None or len(mine) == 0 or len(theirs) == 0:
        return False
    return len(mine[0]) != len(theirs[0])


def demoted_on_open(store: ChromaStore, namespace: str, own: Any) -> bool:
    """Whether a small own collection (a store written before shards) is in the shard now.

    Moved here when it holds at most ``promote_at // 2`` documents. A failure is
    logged and leaves the namespace in its collection, to be moved at a later look.
    """
    if not store.demote_on_open or namespace in store._staying:
        return False
    limit = store.promote_at // 2
    start = time.perf_counter()
    try:
        if moved_by_another(store, own) is not None or own.count() > limit:
            return False
        with store._promoting:
            done = demote(store, namespace, limit=limit, dry_run=False)
    except NotFoundError:
        return True  # another store moved it meanwhile
    except (ChromaError, httpx.HTTPError, sqlite3.Error, OSError, ValueError) as exc:
        logger.warning(
            "Could not move namespace %r of the %s from its own collection into its shard; "
            "it stays in its collection until a later look moves it: %s",
            namespace,
            store.location,
            exc,
        )
        return False
    if done.kept == _OTHER_WIDTH:
        store._staying.put(namespace, None)
    if done.moved:
        logger.info(
            "Moved namespace %r of the %s (%d documents) from its own collection into %s "
            "in %.2f s.",
            namespace,
            store.location,
            done.documents,
            store.shard_name(namespace),
            time.perf_counter() - start,
        )
    return done.moved or done.kept == _IN_SHARD


def check_size(store: ChromaStore, namespace: str, written: int) -> None:
    """Promote the namespace if a count, made every ``promote_at // 8`` documents this object
    wrote to it, finds it past ``promote_at``.

    The first count comes after a random share of that step, so that
    short-lived processes, each writing a few documents, still count now and then.
    """
    step = max(1, store.promote_at // 8)
    with store._lock:
        since = store._written.pop(namespace)
        if since is None:
            since = _JITTER.randrange(step)
        since += written
        due = since >= step
        store._written.put(namespace, 0 if due else since)
    if not due:
        return
    with store._translate("count documents"):
        held = len(store._shard_ids(store._shard(namespace), namespace, limit=store.promote_at + 1))
    if held > store.promote_at:
        store.promote(namespace)


def promote(store: ChromaStore, namespace: str) -> None:
    shard = store._shard(namespace)
    own = own_collection_made(store, namespace, incomplete=True)
    if (own.metadata or {}).get(_INCOMPLETE_KEY):
        # Every id first: pages by offset would skip documents deleted meanwhile.
        # Documents written from here on reach the own collection from upsert.
        tagged = store._shard_ids(shard, namespace)
        for start in range(0, len(tagged), _PAGE):
            copy_page(store, shard, own, namespace, tagged[start : start + _PAGE], into_shard=False)
        own.modify(metadata={_NAMESPACE_META_KEY: namespace})
        if store._own_collection(namespace)[0] is None:
            return  # deleted meanwhile (modify does not fail then): the shard is all there is
    # Complete: what the shard still holds was copied before the mark was cleared (a
    # crash came before this delete), or is a write that failed, which its caller retries.
    store._remember(namespace, own, shard=False)
    shard.delete(where={NAMESPACE_KEY: {"$eq": namespace}})


def own_collection_made(store: ChromaStore, namespace: str, *, incomplete: bool) -> Any:
    """The namespace's own collection, made if missing (marked incomplete if asked)."""
    name = store.collection_name(namespace)
    metadata: dict[str, Any] = {_NAMESPACE_META_KEY: namespace}
    if incomplete:
        metadata[_INCOMPLETE_KEY] = True
    own = store._made(name, metadata)
    store._check_owner(name, own.metadata or {}, namespace)
    return own


def other_width(store: ChromaStore, place: _Placement, namespace: str, exc: Exception) -> bool:
    """Whether ``exc`` is a shard of another embedding width that the namespace has no part in.

    When the namespace has documents in the shard, the error is the caller's:
    it changed embedding models.
    """
    if not place.shard or "dimension" not in str(exc).lower():
        return False
    return not store._shard_ids(place.collection, namespace, limit=1)
