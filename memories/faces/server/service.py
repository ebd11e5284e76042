"""What the inspector shows, read from the stores a config names; the few writes it allows.

:class:`Inspector` answers in plain JSON-ready dicts: the web pages render them and the JSON
API returns them as they are. It writes only when opened with ``allow_writes=True``, through
the memories' own methods, a compare-and-set on the version the caller read. What reading
touches (queued writes, indexes): the inspector page of the docs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from memories.core.combined import leaves_of
from memories.core.config import config_templates
from memories.core.erasure import ErasureReport, erase_user
from memories.core.members import chat_memories, distinct_histories, read_only
from memories.errors import ConfigError, InvalidInputError
from memories.faces.commands.opening import made_memory, made_options, open_stores
from memories.faces.exchange import view_memory
from memories.faces.runnable import close_dropped
from memories.faces.server.counts import expired_counts, live_page, recorded_usage, shown_count
from memories.faces.server.errors import NotFound, ReadOnly
from memories.faces.server.inputs import whole_number
from memories.faces.server.rows import (
    change_row,
    collection_item,
    document_row,
    entity_page,
    graph_rows,
    hit_row,
    instructions_id,
    instructions_row,
    jsonable,
    page_of,
    store_label,
    transcript,
    when,
)
from memories.kernel.capabilities import capabilities_of
from memories.kernel.lru import Built
from memories.kernel.namespaces import (
    Namespace,
    as_namespace,
    namespace_key,
)
from memories.long_term.collection import CollectionMemory
from memories.long_term.entity_graph import EntityMemory
from memories.long_term.held import namespaces_held
from memories.long_term.indexed import DocumentMemory, IndexedMemory
from memories.long_term.instructions import InstructionsMemory
from memories.long_term.profile import ProfileMemory
from memories.long_term.stored import StoredDocumentMemory
from memories.stores.entities.temporal_graph import ENTITY_PREFIX
from memories.stores.history.base import ChatHistory

__all__ = ["DEFAULT_PAGE_SIZE", "Inspector", "NotFound", "ReadOnly", "jsonable"]

#: Rows per page of every listing.
DEFAULT_PAGE_SIZE = 50
#: The longest search text, namespace filter or id the service takes.
MAX_TEXT = 200
#: Results a search returns at most.
MAX_RESULTS = 50
#: Sessions whose id contains a memory's own read to find it exactly.
_SESSIONS_CHECKED = 1000


def _checked_text(value: str, what: str) -> str:
    if len(value) > MAX_TEXT:
        raise InvalidInputError(f"{what} is {len(value)} characters; at most {MAX_TEXT}.")
    if any(ord(c) < 32 for c in value):
        raise InvalidInputError(f"{what} holds control characters.")
    return value


#: A memory's family -> the shape of data the inspector shows of it; the first match counts.
_KINDS: tuple[tuple[type, str], ...] = (
    (CollectionMemory, "collection"),
    (EntityMemory, "entities"),
    (ProfileMemory, "profile"),
    (InstructionsMemory, "instructions"),
    (DocumentMemory, "documents"),
)


def _kind(memory: Any) -> str:
    for family, kind in _KINDS:
        if isinstance(memory, family):
            return kind
    return "chat" if capabilities_of(memory).chat_log else "other"


class Inspector:
    """The memories a config names, and everything their stores hold, read-only.

    Args:
        config: a memory config (dict or file), as :func:`memories.create_memory` reads.
        page_size: rows per page of the listings.
        allow_writes: allow :meth:`edit`, :meth:`delete`, :meth:`rollback` and
            :meth:`retry` (otherwise they raise :class:`ReadOnly`).

    Raises:
        ConfigError: a bad config, or a SQLite file or Chroma folder it names does not
            exist (opening it would create it: inspecting never writes).
    """

    def __init__(
        self,
        config: Mapping[str, Any] | str | Path,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        allow_writes: bool = False,
    ) -> None:
        self.options = made_options(config)
        self.page_size = page_size
        self.allow_writes = allow_writes
        self._templated = bool(config_templates(self.options))
        # Memories built per (namespace, session), kept for the next request.
        self._memories: Built[tuple[Namespace | None, str | None], Any] = Built(
            32, close=close_dropped
        )
        self.leaves: list[Any] = leaves_of(made_memory(self._memory(None, None)))
        self.ids: list[str] = _ids(self.leaves)

    def _memory(self, namespace: Namespace | None, session: str | None) -> Any:
        """The config's memory on ``namespace`` and ``session`` (built once, then cached)."""
        opening = partial(open_stores, self.options, session, namespace)
        return self._memories.built((namespace, session), opening)

    def _leaf(self, memory_id: str, namespace: Namespace | None, session: str | None) -> Any:
        if memory_id not in self.ids:
            raise NotFound(f"No memory {memory_id!r} in this config; it has {self.ids}.")
        return leaves_of(self._memory(namespace, session))[self.ids.index(memory_id)]

    def _kept(self, text: str, memory_id: str) -> tuple[Namespace, Any]:
        """Namespace ``text``, and memory ``memory_id`` on it; NotFound if it keeps none."""
        namespace = self._known(text)
        leaf = self._leaf(memory_id, namespace, None)
        if capabilities_of(leaf).scope != "namespace":
            raise NotFound(f"Memory {memory_id!r} keeps nothing per namespace.")
        return namespace, leaf

    def _namespaced(self) -> list[tuple[str, Any]]:
        return [
            (i, m)
            for i, m in zip(self.ids, self.leaves, strict=True)
            if capabilities_of(m).scope == "namespace"
        ]

    def overview(self) -> dict[str, Any]:
        """Every memory of the config: its type, store, scope, and what its stores hold."""
        histories = self._histories()
        totals: dict[int, Any] = {}
        # members that each pin a session of their own keep one conversation each; otherwise
        # (one session, or none pinned) every session of the table is each member's
        pinned = [m.chat_memory.session_id for m in self.leaves if capabilities_of(m).chat_log]
        own_sessions = len(pinned) > 1 and len(set(pinned)) == len(pinned)
        memories = []
        for memory_id, leaf in zip(self.ids, self.leaves, strict=True):
            caps = capabilities_of(leaf)
            row: dict[str, Any] = {
                "id": memory_id,
                "type": getattr(leaf, "config_type", type(leaf).__name__),
                "class": type(leaf).__name__,
                "kind": _kind(leaf),
                "scope": caps.scope,
                "searchable": caps.searchable,
                "store": self._store_of(leaf),
                "model_usage": recorded_usage(leaf, totals),
            }
            if caps.chat_log:
                row["sessions"] = _sessions_of(leaf.chat_memory, own=own_sessions)
                row["session"] = leaf.chat_memory.session_id if own_sessions else None
            if caps.scope == "namespace":
                row["namespaces"] = self._namespace_count(leaf)
                if not self._templated and caps.deferred:
                    row["status"] = jsonable(leaf.status())
            memories.append(row)
        return {
            "config_type": self.options.get("type"),
            "templated": self._templated,
            "read_only": not self.allow_writes,
            "memories": memories,
            "histories": [store_label(h) for h in histories],
        }

    def _store_of(self, leaf: Any) -> str:
        if capabilities_of(leaf).chat_log:
            return store_label(leaf.chat_memory)
        parts = []
        if isinstance(leaf, StoredDocumentMemory):
            parts.append(store_label(leaf.ledger))
        if isinstance(leaf, DocumentMemory | CollectionMemory):
            parts.append(leaf.backend.location)
        return "; ".join(parts) or "(none)"

    def _histories(self) -> list[ChatHistory]:
        return distinct_histories(self._memory(None, None))

    def _namespace_count(self, leaf: Any) -> int:
        if isinstance(leaf, CollectionMemory):
            return leaf.ledger.key_namespaces(leaf.rows.prefix, limit=0)[1]
        if isinstance(leaf, StoredDocumentMemory):
            return leaf.ledger.key_namespaces(leaf.key, limit=0)[1]
        if isinstance(leaf, DocumentMemory):
            return len(leaf.backend.namespaces())
        return 0

    def _has_namespace(self, leaf: Any, namespace: Namespace) -> bool:
        """Whether ``leaf``'s stores hold anything of ``namespace`` (read through the index)."""
        if isinstance(leaf, StoredDocumentMemory):
            ledger = leaf.ledger
            key = leaf.key
            if isinstance(leaf, CollectionMemory):
                if ledger.key_page(namespace, leaf.rows.prefix, limit=0)[1]:
                    return True
            elif ledger.load(namespace, key) is not None or ledger.changes(namespace, key, last=1):
                return True
            return ledger.count_pending(namespace, key) > 0
        if isinstance(leaf, DocumentMemory):
            return namespace_key(namespace) in leaf.backend.namespaces()
        return False

    def namespaces(self, *, q: str = "", page: int = 1) -> dict[str, Any]:
        """The namespaces any memory of the config holds data in, sorted, a page at a time.

        Each count is the store's less what expired and is not swept yet, for
        the page's namespaces only (the expired items counted in SQL).
        """
        q = _checked_text(q, "q")
        merged: dict[Namespace, dict[str, int | None]] = {}
        for memory_id, leaf in self._namespaced():
            for namespace, count in namespaces_held(leaf, q).items():
                merged.setdefault(namespace, {})[memory_id] = count
        names = sorted(merged, key=".".join)
        start = (page - 1) * self.page_size
        shown = names[start : start + self.page_size]
        for memory_id, leaf in self._namespaced():
            expired = expired_counts(leaf)
            for namespace in shown:
                counts = merged[namespace]
                if expired.get(namespace) and counts.get(memory_id):
                    counted = counts[memory_id]
                    counts[memory_id] = shown_count(leaf, namespace, counted, expired[namespace])
        rows = [{"namespace": ".".join(n), "memories": merged[n]} for n in shown]
        return {"q": q, "namespaces": rows, **page_of(page, self.page_size, len(names))}

    def _known(self, text: str) -> Namespace:
        """``text`` as a namespace some memory holds data in; NotFound otherwise."""
        try:
            namespace = as_namespace(_checked_text(text, "namespace"))
        except (ConfigError, InvalidInputError) as exc:
            raise InvalidInputError(f"Not a namespace: {exc}") from exc
        for _, leaf in self._namespaced():
            if self._has_namespace(leaf, namespace):
                return namespace
        raise NotFound(f"No memory of this config holds anything in namespace {text!r}.")

    def namespace(self, text: str) -> dict[str, Any]:
        """One namespace: each namespace-scoped memory with its counts and its status."""
        namespace = self._known(text)
        rows = []
        for memory_id, _ in self._namespaced():
            leaf = self._leaf(memory_id, namespace, None)
            caps = capabilities_of(leaf)
            rows.append(
                {
                    "id": memory_id,
                    "type": leaf.config_type,
                    "kind": _kind(leaf),
                    "documents": self._count(leaf),
                    "status": jsonable(leaf.status()) if caps.deferred else None,
                    "dead_letters": self._letters(leaf),
                    "model_usage": recorded_usage(leaf, {}, leaf.usage_namespace()),
                }
            )
        return {"namespace": ".".join(namespace), "memories": rows}

    def _count(self, leaf: Any) -> int:
        if isinstance(leaf, EntityMemory):  # every entity stored, merged ones too
            return leaf.ledger.key_page(leaf.namespace, ENTITY_PREFIX, limit=0)[1]
        if isinstance(leaf, CollectionMemory):  # the store's count, expired ones too
            counted = leaf.ledger.key_page(leaf.namespace, leaf.rows.prefix, limit=0)[1]
        elif isinstance(leaf, StoredDocumentMemory):
            # the store's read shows an expired document as cleared (its ttl)
            return 0 if leaf.ledger.get(leaf.namespace, leaf.key) is None else 1
        elif isinstance(leaf, DocumentMemory):
            counted = int(leaf.backend.count())
        else:
            return 0
        expired = expired_counts(leaf, leaf.namespace).get(leaf.namespace, 0) if counted else 0
        return shown_count(leaf, leaf.namespace, counted, expired)

    def _letters(self, leaf: Any) -> list[dict[str, Any]]:
        if not isinstance(leaf, DocumentMemory | CollectionMemory):
            return []
        return [
            {
                "id": letter.row.doc_id,
                "text": letter.row.text,
                "error": letter.error,
                "at": when(letter.created_at),
            }
            for letter in leaf.backend.dead_letters()
        ]

    def items(self, text: str, memory_id: str, *, q: str = "", page: int = 1) -> dict[str, Any]:
        """What one memory holds in a namespace: a document with its versions, or its items."""
        namespace, leaf = self._kept(text, memory_id)
        q = _checked_text(q, "q")
        found: dict[str, Any] = {
            "namespace": ".".join(namespace),
            "memory": memory_id,
            "type": leaf.config_type,
            "kind": _kind(leaf),
            "q": q,
        }
        start = (page - 1) * self.page_size
        if isinstance(leaf, CollectionMemory):
            hiding = expired_counts(leaf, namespace).get(namespace, 0)
            items, total = leaf.ledger.key_page(
                namespace,
                leaf.rows.prefix,
                contains=q,
                limit=self.page_size,
                offset=start,
                keep=leaf.unexpired(namespace, prefix=leaf.rows.prefix) if hiding else None,
            )
            found["items"] = [collection_item(item) for item in items]
            found.update(page_of(page, self.page_size, total))
        elif isinstance(leaf, EntityMemory):
            found["status"] = jsonable(leaf.status())
            found.update(graph_rows(leaf.store.recorded(namespace)))
        elif isinstance(leaf, ProfileMemory | InstructionsMemory):
            found["document"] = leaf.get()
            found["status"] = jsonable(leaf.status())
            rows = [
                change_row(v) if isinstance(leaf, ProfileMemory) else instructions_row(i, v)
                for i, v in enumerate(leaf.history())
            ]
            found["items"] = rows[::-1]
        elif isinstance(leaf, DocumentMemory):
            records = leaf.backend.stored()  # any backend; what is queued stays queued
            chosen = [r for r in records if q.lower() in r.text.lower() or q in r.id]
            chosen.sort(key=lambda r: -float(r.metadata.get("timestamp", 0.0) or 0.0))
            shown, total = live_page(leaf, namespace, chosen, start, self.page_size)
            found["items"] = [document_row(r) for r in shown]
            found["pending"] = leaf.backend.pending()
            found.update(page_of(page, self.page_size, total))
        return found

    def item(self, text: str, memory_id: str, item_id: str) -> dict[str, Any]:
        """One item and its history: a collection memory's versions, a change, a document."""
        namespace = self._known(text)
        leaf = self._leaf(memory_id, namespace, None)
        item_id = _checked_text(item_id, "item id")
        base = {"namespace": ".".join(namespace), "memory": memory_id, "kind": _kind(leaf)}
        if isinstance(leaf, IndexedMemory) and leaf.expired_items(namespace, keys=[item_id]):
            raise NotFound(f"No memory {item_id!r} in {memory_id!r} of {text!r}: it expired.")
        if isinstance(leaf, CollectionMemory):
            item_id = _whole_id(leaf, namespace, item_id)
            versions = self._current(leaf, item_id, text, leaf.history)
            return {
                **base,
                "id": item_id,
                "version": versions[-1].version,
                "current": jsonable(leaf.get(item_id)),
                "versions": [jsonable(v) for v in reversed(versions)],
            }
        if isinstance(leaf, EntityMemory):
            return {**base, **entity_page(leaf, namespace, item_id)}
        if isinstance(leaf, ProfileMemory | InstructionsMemory):
            recorded = leaf.store.changes(namespace, leaf.key)
            changes = {str(c.id): c for c in recorded}
            if isinstance(leaf, InstructionsMemory):  # its history's ids (instructions_row)
                changes.update(
                    (instructions_id(i, None if c.error else c.version), c)
                    for i, c in enumerate(recorded)
                )
            if item_id not in changes:
                raise NotFound(f"No change {item_id!r} in the history of {memory_id!r}.")
            return {**base, "id": item_id, "change": change_row(changes[item_id], whole=True)}
        if isinstance(leaf, DocumentMemory):
            records = leaf.backend.get([item_id])  # queued too: read, not written
            if not records:
                raise NotFound(f"No document {item_id!r} in {memory_id!r} of {text!r}.")
            return {**base, **document_row(records[0])}
        raise NotFound(f"Memory {memory_id!r} keeps no items.")

    def sessions(self, *, q: str = "", page: int = 1) -> dict[str, Any]:
        """The sessions of the config's histories, last active first, a page at a time."""
        q = _checked_text(q, "q")
        rows: dict[str, dict[str, Any]] = {}
        total = 0
        start = (page - 1) * self.page_size
        for history in self._histories():
            if not history.lists_sessions:
                continue
            found, count = history.sessions(contains=q, limit=self.page_size, offset=start)
            total = max(total, count)
            for s in found:
                times = {"first_at": when(s.first_at), "last_at": when(s.last_at)}
                rows.setdefault(s.session_id, {**jsonable(s), **times})
        return {"q": q, "sessions": list(rows.values()), **page_of(page, self.page_size, total)}

    def session(self, session_id: str) -> dict[str, Any]:
        """A session's transcript as written, edits marked, and what each chat memory shows now."""
        session_id = _checked_text(session_id, "session id")
        if not session_id or not self._holds(session_id):
            raise NotFound(f"No session {session_id!r} in this config's histories.")
        memory = self._memory(None, session_id)
        transcripts = [
            {"history": repr(h), "records": transcript(h.records())}
            for h in distinct_histories(memory)
        ]
        shown = []
        with read_only(memory):
            for member, memory_id in self._chat_ids(memory):
                view = view_memory(member, "", as_messages=True)
                shown.append(
                    {
                        "memory": memory_id,
                        "type": member.config_type,
                        "messages": [jsonable(m) for m in view.messages],
                        "sections": [{"name": n, "text": t} for n, t in view.sections],
                    }
                )
        return {"session_id": session_id, "transcripts": transcripts, "shown": shown}

    def _chat_ids(self, memory: Any) -> list[tuple[Any, str]]:
        leaves = leaves_of(memory)
        return [(m, self.ids[leaves.index(m)]) for m in chat_memories(memory)]

    def _holds(self, session_id: str) -> bool:
        return any(_held(h, session_id, 10**9) for h in self._histories() if h.lists_sessions)

    def search(self, text: str, query: str, *, memory_id: str | None = None, k: int = 10) -> dict:
        """Each searchable memory's best matches in a namespace, with why each ranked.

        ``score`` is on the calibrated scale; ``ranking`` holds its dense, lexical and
        neighbour parts (None from a backend that does not give them).
        """
        query = _checked_text(query, "query")
        k = whole_number(k, "k", lowest=1, highest=MAX_RESULTS)
        namespace = self._known(text)
        chosen = [(i, m) for i, m in self._namespaced() if capabilities_of(m).searchable]
        if memory_id is not None:
            chosen = [(i, m) for i, m in chosen if i == memory_id]
            if not chosen:
                raise NotFound(f"No searchable memory {memory_id!r}; see the overview.")
        results = []
        for found_id, _ in chosen:
            leaf = self._leaf(found_id, namespace, None)
            hits = leaf.search(query, k=k) if query.strip() else []
            results.append(
                {
                    "memory": found_id,
                    "type": leaf.config_type,
                    "results": [hit_row(hit) for hit in hits],
                }
            )
        return {"namespace": ".".join(namespace), "query": query, "k": k, "memories": results}

    # -- writes (allow_writes only): checked as the pages read them (404), then a
    # compare-and-set through the memory's own method (VersionConflictError: 409)

    def _writable(self, action: str, text: str, memory_id: str) -> tuple[Any, dict[str, Any]]:
        """The memory ``action`` writes, and the answer's first fields (what, where)."""
        if not self.allow_writes:
            raise ReadOnly()
        namespace, leaf = self._kept(text, memory_id)
        return leaf, {"action": action, "namespace": ".".join(namespace), "memory": memory_id}

    def _versioned(
        self, action: str, text: str, memory_id: str, item_id: str | None, expected: Any
    ) -> tuple[Any, dict[str, Any], int]:
        """As :meth:`_writable`, with the version read; a collection memory's item is named."""
        leaf, done = self._writable(action, text, memory_id)
        verb = "roll back" if action == "rollback" else action
        if isinstance(leaf, CollectionMemory):
            if item_id is None:
                raise InvalidInputError(f"Name the memory to {verb} (its item id).")
            done["item"] = item_id
        elif item_id is not None:
            raise NotFound(
                f"Memory {memory_id!r} is one document: {verb} it, not item {item_id!r}."
            )
        return leaf, done, _expected(expected)

    def _current(
        self, leaf: Any, item_id: str, text: str, read: Callable[[str], Any] | None = None
    ) -> Any:
        """A collection memory's ``read`` of an item (its ``get``: as it stands; ``history``:
        its versions); NotFound when the namespace holds no such memory."""
        try:
            found = (read or leaf.get)(_checked_text(item_id, "item id"))
        except (InvalidInputError, ConfigError) as exc:
            raise NotFound(f"No memory {item_id!r} in {text!r}: {exc}") from exc
        if not found:
            raise NotFound(f"No memory {item_id!r} in {text!r} (deleted, or never there).")
        return found

    def edit(
        self,
        text: str,
        memory_id: str,
        value: Any,
        *,
        item_id: str | None = None,
        expected_version: int | None,
    ) -> dict[str, Any]:
        """Give one memory new content, as a new version; returns what was written.

        Args:
            value: a collection memory's content (``item_id`` names it), a
                profile's whole document, or instructions' prompts by name.
            expected_version: the version the caller read (required).

        Raises:
            ReadOnly, NotFound, InvalidInputError, VersionConflictError.
        """
        leaf, done, expected = self._versioned("edit", text, memory_id, item_id, expected_version)
        if isinstance(leaf, CollectionMemory):
            self._current(leaf, done["item"], text)
            record = leaf.update(done["item"], value, expected_version=expected)
            return {**done, "version": record.version}
        if isinstance(leaf, ProfileMemory):
            return {**done, "version": leaf.put(value, expected_version=expected)}
        if isinstance(leaf, InstructionsMemory):
            reason = "edited in the inspector"
            return {**done, "version": leaf.put(value, reason=reason, expected_version=expected)}
        raise InvalidInputError(f"Memory {memory_id!r} ({leaf.config_type}) cannot be edited here.")

    def delete(
        self, text: str, memory_id: str, item_id: str, *, expected_version: int | None = None
    ) -> dict[str, Any]:
        """Delete one item: a collection memory (its versions stay) or a stored document.

        Args:
            expected_version: the version read; required for a collection memory.
        """
        leaf, done = self._writable("delete", text, memory_id)
        if isinstance(leaf, CollectionMemory):
            expected = _expected(expected_version)
            self._current(leaf, item_id, text)
            leaf.delete(item_id, expected_version=expected)
            return {**done, "item": item_id, "version": leaf.history(item_id)[-1].version}
        if isinstance(leaf, DocumentMemory):
            item_id = _checked_text(item_id, "item id")
            if not leaf.backend.get([item_id]):
                raise NotFound(f"No document {item_id!r} in {memory_id!r} of {text!r}.")
            leaf.delete([item_id])
            return {**done, "item": item_id}
        raise InvalidInputError(
            f"Memory {memory_id!r} ({leaf.config_type}) is one document: edit it or roll it "
            "back; it has no items to delete."
        )

    def rollback(
        self,
        text: str,
        memory_id: str,
        version: int,
        *,
        item_id: str | None = None,
        expected_version: int | None,
    ) -> dict[str, Any]:
        """Restore what a memory said at ``version``, as a new version; returns the new one."""
        leaf, done, expected = self._versioned(
            "rollback", text, memory_id, item_id, expected_version
        )
        version = _expected(version, "version")
        if isinstance(leaf, CollectionMemory):
            self._current(leaf, done["item"], text, leaf.history)
            record = leaf.rollback(done["item"], version, expected_version=expected)
            return {**done, "version": record.version}
        if isinstance(leaf, ProfileMemory | InstructionsMemory):
            return {**done, "version": leaf.rollback(version, expected_version=expected)}
        raise InvalidInputError(f"Memory {memory_id!r} ({leaf.config_type}) keeps no versions.")

    def retry(self, text: str, memory_id: str, ids: Sequence[str] | None = None) -> dict[str, Any]:
        """Queue a memory's dead letters again (all, or ``ids``) and write them now."""
        leaf, done = self._writable("retry", text, memory_id)
        if not isinstance(leaf, DocumentMemory | CollectionMemory):
            raise NotFound(f"Memory {memory_id!r} keeps no dead letters.")
        held = {letter.row.doc_id for letter in leaf.backend.dead_letters()}
        unknown = sorted(set(ids or ()) - held)
        if unknown or not held:
            what = f"{unknown[0]!r} is not" if unknown else "nothing is"
            raise NotFound(f"{what} set aside in {memory_id!r} of {text!r}.")
        retried = leaf.backend.retry_dead_letters(list(ids) if ids else None)
        return {**done, "retried": retried, "dead_letters": len(leaf.backend.dead_letters())}

    def erasure(self, text: str) -> dict[str, Any]:
        """What erasing the user of namespace ``text`` would remove, store by store (a dry
        run of :func:`~memories.erase_user`, so shown read-only too)."""
        namespace = self._known(text)
        report = erase_user(self.options, namespace=namespace, dry_run=True)
        # a chat memory's model usage is counted under its session, which is no namespace's:
        # the preview of one namespace lists that namespace's stores only
        named = f", namespace {'.'.join(namespace)}"
        mine = tuple(
            line
            for line in report.stores
            if ", namespace " not in line.store or line.store.endswith(named)
        )
        return _erasure(dataclasses.replace(report, stores=mine))

    def erase(self, text: str, confirm: str | None) -> dict[str, Any]:
        """Erase the user of namespace ``text`` from every store of every memory.

        Args:
            confirm: the namespace typed again (a slip of the mouse erases nothing).

        Returns:
            Per store, what went and what is left (0 when complete).

        Raises:
            ReadOnly, NotFound, InvalidInputError: ``confirm`` is not the namespace.
        """
        if not self.allow_writes:
            raise ReadOnly()
        namespace = self._known(text)
        named = ".".join(namespace)
        if confirm != named:
            raise InvalidInputError(
                f"To erase {named!r}, type the namespace again to confirm; got {confirm!r:.80}. "
                "Nothing was erased."
            )
        for key in self._memories:  # built before, they hold nothing true any more
            if key[0] == namespace:
                self._memories.pop(key)
        return _erasure(erase_user(self.options, namespace=namespace))


def _erasure(report: ErasureReport) -> dict[str, Any]:
    """An erasure report as the page and the API show it."""
    return {**report.to_dict(), "text": report.text()}


def _sessions_of(history: ChatHistory, *, own: bool) -> int | None:
    """How many sessions ``history``'s memory has: its own one (``own``), or its table's."""
    if not history.lists_sessions:
        return None
    if not own:
        return history.sessions(limit=1)[1]
    return _held(history, history.session_id, _SESSIONS_CHECKED)


def _held(history: ChatHistory, session_id: str, limit: int) -> int:
    """Whether (1) or not (0) ``history``'s table holds ``session_id``, among ``limit`` whose id
    contains it."""
    found, _ = history.sessions(contains=session_id, limit=limit)
    return sum(s.session_id == session_id for s in found)


def _whole_id(leaf: CollectionMemory, namespace: Namespace, given: str) -> str:
    """The id of the one memory of ``namespace`` whose id starts with ``given`` (as lists show
    ids shortened); ``given`` itself when it is whole, or when no one memory's id starts so."""
    prefix = leaf.rows.prefix
    found, total = leaf.ledger.key_page(namespace, prefix + given, limit=2)
    if total == 1:
        return found[0].key.removeprefix(prefix)
    if total > 1 and not any(f.key == prefix + given for f in found):
        raise NotFound(f"{total} memories' ids start with {given!r}: give more of the id.")
    return given


def _expected(value: Any, name: str = "expected_version") -> int:
    """A version the caller gives: a whole number from 0 (required: a write names what it read)."""
    return whole_number(value, f"{name} (the version you read)")


def _ids(leaves: Sequence[Any]) -> list[str]:
    """A stable id per memory of the config: its type, numbered when the type repeats."""
    ids: list[str] = []
    for leaf in leaves:
        name = str(getattr(leaf, "config_type", "") or type(leaf).__name__.lower())
        candidate, n = name, 2
        while candidate in ids:
            candidate, n = f"{name}-{n}", n + 1
        ids.append(candidate)
    return ids
