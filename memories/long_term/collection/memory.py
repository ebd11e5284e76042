"""``CollectionMemory``: many small memories that a model inserts, updates and deletes.

The ledger (a :class:`~memories.stores.documents.ProfileStore`: every version,
the queued turns, compare-and-set writes of several memories at once) holds
them; the vector index searches the current ones. A change is committed to the
ledger first: if a process dies before the index write, the next update touching
that memory conflicts on its stale version, and a conflict re-indexes what it read.
"""

from __future__ import annotations

import builtins
import json
import logging
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, ClassVar

from langchain_core.messages import HumanMessage
from pydantic import ConfigDict, Field, PrivateAttr

from memories.errors import ConfigError, InvalidInputError
from memories.kernel.background import MemoryStatus
from memories.kernel.capabilities import Capabilities
from memories.kernel.conversation import UpdateMethod
from memories.kernel.embeddings import embedding_batch, query_vector
from memories.kernel.keys import input_text_for
from memories.kernel.messages import check_storable
from memories.kernel.steps import Steps, step, twins
from memories.long_term.collection import folding, rules, transfer
from memories.long_term.collection.folding import CollectionUpdate
from memories.long_term.collection.records import MemoryRecord, MemoryVersion
from memories.long_term.collection.rows import Rows, claim, expire_in, lining_up, memory_id
from memories.long_term.indexed import TTL, IndexedMemory, show_progress
from memories.long_term.profile.schema import ProfileSchema, schema_config
from memories.long_term.stored import MAX_CONFLICTS, StoredDocumentMemory, TurnPolicy
from memories.stores.documents import (
    Change,
    PendingTurn,
    ProfileItem,
    check_version,
)
from memories.stores.expiry import Expiring, ExpiryLedger, Stamp
from memories.stores.recall import RecallConfig
from memories.stores.recall.config import RecallField
from memories.stores.vector.filters import check_metadata
from memories.stores.vector.outbox import OutboxRow
from memories.stores.vector.records import SearchResult
from memories.stores.vector.scoring import search_texts

__all__ = ["CollectionMemory", "CollectionStatus", "CollectionUpdate"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CollectionStatus(MemoryStatus):
    """Where a collection stands: ``pending`` counts the turns not folded in yet."""


class CollectionMemory(IndexedMemory, StoredDocumentMemory):
    """Many small memories about a user, kept current by a model: inserted, updated, deleted.

    The store's and the namespace's arguments are
    :class:`~memories.long_term.indexed.DocumentMemory`'s (``mode``, ``path``,
    ``namespace``, ``embeddings``...); the ledger's and the policy's (``url``,
    ``key``, ``policy``, ``every_n``, ``max_retries``, ``memory_key``...)
    :class:`~memories.long_term.stored.StoredDocumentMemory`'s.

    Args:
        llm: the model that proposes the changes (a LangChain model or
            ``"provider:model"``). Without one, rules keep the user's
            statements and update the memory a correction is about
            (:mod:`~memories.long_term.collection.offline`).
        schema: what a memory is: None or ``str`` (a sentence), a Pydantic
            model class, its ``"module:Class"`` path, or a JSON Schema dict.
        k: how many memories ``load_memory_variables`` and ``search`` show.
        related_k: how many current memories the model is shown per update.
        enable_inserts, enable_updates, enable_deletes: which operations
            the model may make.
        duplicate_threshold: an insert whose embedding has at least this
            cosine similarity with a current memory's (or whose text is the
            same, ignoring case, spacing and punctuation) is not stored; when
            it holds every word of that memory and more, it updates it.
        update_method: ``"auto"`` (tool calling when the model has it, else
            JSON text), ``"tool"`` or ``"json"``.
        ttl: minutes a new memory lives after it was last written (an edit
            keeps a memory's own; ``put(..., ttl=...)`` sets one's); None: forever.
            An expired memory is hidden from every read at once and deleted
            (ledger rows with its versions, index document) by :meth:`sweep`.
            ``refresh_on_read``, ``hide_expired`` and ``clock`` are as in
            :class:`~memories.long_term.indexed.IndexedMemory`.
    """

    config_type: ClassVar[str] = "collection"
    session_documents: ClassVar[bool] = False  # a memory is the namespace's, whoever said it
    capabilities: ClassVar[Capabilities] = Capabilities(
        scope="namespace", searchable=True, exportable=True, deferred=True, expires=True
    )
    model_config = ConfigDict(populate_by_name=True)

    collection: str = "collections"
    key: str = Field(default="collection", min_length=1)
    recall: RecallField = Field(default_factory=lambda: RecallConfig(neighbour_weight=0.0))
    memory_schema: Any = Field(default=None, alias="schema")
    policy: TurnPolicy = "turn"
    k: int = Field(default=5, ge=1)
    related_k: int = Field(default=10, ge=1)
    enable_inserts: bool = True
    enable_updates: bool = True
    enable_deletes: bool = True
    duplicate_threshold: float = Field(default=0.9, gt=0, le=1)
    update_method: UpdateMethod = "auto"
    memory_key: str = Field(default="memories", min_length=1)

    _schema: ProfileSchema | None = PrivateAttr(default=None)
    _in_line: bool = PrivateAttr(default=False)

    @cached_property
    def rows(self) -> Rows:
        """Where this collection's memories are: its own, not another key's (:mod:`.rows`)."""
        return Rows(self.key)

    @property
    def index_namespace(self) -> tuple[str, ...]:
        """The namespace the index keeps this collection's documents under (:mod:`.rows`)."""
        return self.rows.index_namespace(self.namespace)

    @property
    def expiry_mark(self) -> str:
        """What this collection's expiry rows' keys start with (:mod:`.rows`)."""
        return self.rows.mark

    def model_post_init(self, context: Any, /) -> None:
        text = self.memory_schema in (None, str, "str")
        self._schema = None if text else ProfileSchema(self.memory_schema)
        if self.llm is None and not text:
            raise ConfigError(
                "Without an llm a collection stores what the user says as text, so its schema "
                "must be text (None); pass llm=... to extract structured memories."
            )
        super().model_post_init(context)
        claim(self)

    def _config_value(self, name: str, value: Any) -> Any:
        if name == "memory_schema":
            return "str" if value is str else schema_config(value)
        return super()._config_value(name, value)

    # -- contents -------------------------------------------------------------------

    def check_content(self, content: Any, /) -> Any:
        """``content`` as it is stored, or InvalidInputError saying what is wrong with it."""
        if self._schema is None:
            if not isinstance(content, str) or not content.strip():
                raise InvalidInputError(
                    f"A memory of this collection is a non-empty string; got {content!r:.80}."
                )
            check_storable([HumanMessage(content)])
            return content.strip()
        problems = self._schema.errors(content)
        if problems:
            raise InvalidInputError(
                "The memory does not match the collection's schema: " + "; ".join(problems)
            )
        return content

    def _checked_metadata(self, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
        given = check_metadata(metadata, what="metadata")
        clash = sorted(rules.OWN_KEYS & given.keys())
        if clash:
            raise InvalidInputError(f"metadata sets {clash}, which the collection keeps itself.")
        return given

    def _document(self, content: Any, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
        """What the ledger stores for a memory: its checked content and metadata."""
        return {
            "content": self.check_content(content),
            "metadata": self._checked_metadata(metadata),
        }

    # -- records ------------------------------------------------------------------

    def _row(self, item: ProfileItem) -> OutboxRow:
        """The index document of a memory as the ledger holds it."""
        value = item.value or {}
        content = value.get("content")
        meta: dict[str, Any] = {
            **self.metadata,
            **self.backend.bookkeeping(turn=False),
            **(value.get("metadata") or {}),
            "created_at": item.created_at,
            "updated_at": item.updated_at,
            "version": item.version,
        }
        if not isinstance(content, str):
            meta["content_json"] = json.dumps(content, ensure_ascii=False)
        doc_id = memory_id(item.key)
        # A first version is new to the index: Chroma's add is cheaper than its upsert.
        replace = item.version > 1
        return OutboxRow(doc_id, rules.text(content), meta, needs_turn=False, replace=replace)

    # -- writing: ledger first (compare-and-set, all or none), then the index --------

    def _writing(
        self,
        commits: list[tuple[str, Change, int]],
        turns: Sequence[PendingTurn] = (),
        ttl: TTL = "default",
        anew: Collection[str] = (),
    ) -> Steps[list[ProfileItem | None] | None]:
        keys = [key for key, _, _ in commits]
        stamp = yield from self._stamp(commits, ttl, anew)
        written = yield from self._committing_many(commits, turns, stamp)
        if written is not None:
            yield from self._indexing(keys, written)
        return written

    # -- time to live (expiry times in an ExpiryLedger beside the ledger) -------------

    @cached_property
    def expiry(self) -> ExpiryLedger:
        """When memories expire: a table of the ledger's database, written in its transactions."""
        return ExpiryLedger(self.url, like=self._store.database)

    def _stamp(
        self, commits: Sequence[tuple[str, Change, int]], ttl: TTL, anew: Collection[str] = ()
    ) -> Steps[Stamp | None]:
        """The time to live of memories about to be written, for the commit's own transaction.

        The ledger and the expiry times share one database (``url``): a memory
        is never written without its time to live. One that exists keeps its own
        (:meth:`_ttls`); a deleted one keeps its row, so its versions go at its
        expiry and a rollback restores it with its rule.
        """
        written = [(memory_id(k), v) for k, c, v in commits if c.document is not None]
        existing = self.rows.expiry_keys([i for i, version in written if version and i not in anew])
        keys = self.rows.expiry_keys([i for i, _ in written])
        ttls = self._ttls(keys, ttl, existing=existing, anew=self.rows.expiry_keys(anew))
        if not ttls:
            return None
        return (yield step(self.expiry.stamping, self.namespace, ttls, now=self.clock()))

    def _expire(self, expired: Sequence[Expiring], now: float) -> None:
        """Delete expired memories of this namespace: ledger key with its history, index doc.

        Each ledger key goes with its expiry row in one transaction, and only
        while the row is still expired: a memory written since the sweep read
        the row is kept, in the ledger and in the index.
        """
        gone = []
        for i in self.rows.own(expired):
            key = self.rows.prefix + i
            still = self.expiry.forgetting(self.namespace, self.rows.mark + i, expired_at=now)
            self._store.delete(self.namespace, key, only_if=still)
            if self._store.load(self.namespace, key) is None:
                gone.append(i)
        if gone:
            self.backend.delete(gone, None)
            self.backend.flush()

    _expire_in = expire_in

    def _background_job(self) -> None:
        super()._background_job()
        # The namespace's own expired memories go after its update (bounded to it).
        now = self.clock()
        expired = self.expiry.expired(now=now, namespace=self.namespace, limit=500)
        if expired:
            self._expire(expired, now)
            logger.debug("collection %r: swept %d expired memories", self.namespace, len(expired))

    def _indexing(self, keys: Sequence[str], items: Sequence[ProfileItem | None]) -> Steps[None]:
        rows = [self._row(item) for item in items if item is not None and item.value is not None]
        gone = [
            memory_id(key)
            for key, item in zip(keys, items, strict=True)
            if item is None or item.value is None
        ]
        if rows:
            yield step(self.backend.add, rows, progress=False)
        if gone:
            yield step(self.backend.delete, gone, None)

    def _reindexing(self, ids: Sequence[str]) -> Steps[None]:
        """Bring the index back in line with the ledger for these memories (after a conflict)."""
        keys = [self.rows.prefix + i for i in ids]
        items = []
        for key in keys:
            items.append((yield step(self._store.load, self.namespace, key)))
        yield from self._indexing(keys, items)

    def _direct(
        self, memory_id: str, plan: Any, kind: str, ttl: TTL = "default"
    ) -> Steps[MemoryRecord | None]:
        """A write by hand to one memory: read its version, plan, compare-and-set, retry.

        ``plan`` sees None for a memory that expired (hidden from reads, not swept yet).
        """
        checked = rules.checked_id(memory_id)
        key = self.rows.prefix + checked
        for _ in range(MAX_CONFLICTS * 10):
            item = yield step(self._store.load, self.namespace, key)
            marked = self.rows.expiry_keys([checked])
            hidden = yield step(self.expired_items, self.namespace, keys=marked)
            gone = item is not None and bool(hidden)
            document = plan(None if gone else item)
            expected = item.version if item is not None else 0
            change = Change(document, kind, [], ())
            anew = [checked] if gone else []
            written = yield from self._writing([(key, change, expected)], ttl=ttl, anew=anew)
            if written is not None:
                (after,) = written
                return None if after is None or after.value is None else rules.record(after)
        raise InvalidInputError(f"The memory {memory_id!r} kept changing; try again.")

    def _put_steps(
        self,
        content: Any,
        *,
        metadata: Mapping[str, Any] | None = None,
        memory_id: str | None = None,
        ttl: TTL = "default",
    ) -> Steps[str]:
        """Store a memory now (durable when this returns); returns its id.

        Args:
            memory_id: the id to store it under (letters, digits, ``-``, ``_``);
                an existing memory with that id gets this as a new version.
                Default: a new id.
            ttl: minutes it lives from now; None: forever; default: the
                collection's ``ttl``.

        Raises:
            InvalidInputError: the content or the metadata is invalid; nothing is stored.
        """
        document = self._document(content, metadata)
        chosen = uuid.uuid4().hex if memory_id is None else rules.checked_id(memory_id)
        yield from self._direct(chosen, lambda item: document, "put", ttl)
        return chosen

    put, aput = twins(_put_steps)

    def _put_many_steps(
        self,
        contents: Sequence[Any],
        *,
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        progress: bool | None = None,
    ) -> Steps[builtins.list[str]]:
        """Store many new memories at once (one transaction, then the index in batches).

        Every content and metadata is checked before anything is written.
        ``progress`` shows a bar while the index embeds them (by default for
        more than 1,000).
        """
        if isinstance(contents, str) or not isinstance(contents, Sequence):
            raise InvalidInputError(f"contents must be a list, got {contents!r:.80}.")
        if metadatas is not None and len(metadatas) != len(contents):
            raise InvalidInputError(f"Got {len(metadatas)} metadatas for {len(contents)} contents.")
        commits = []
        for i, content in enumerate(contents):
            document = self._document(content, metadatas[i] if metadatas else None)
            key = self.rows.prefix + uuid.uuid4().hex
            commits.append((key, Change(document, "put", [], ()), 0))
        stamp = yield from self._stamp(commits, "default")
        written = yield from self._committing_many(commits, also=stamp)
        assert written is not None  # new ids: nothing to conflict with
        rows = [self._row(item) for item in written if item is not None]
        yield step(self.backend.add, rows, progress=show_progress(progress, rows))
        return [memory_id(key) for key, _, _ in commits]

    put_many, aput_many = twins(_put_many_steps)

    def _update_steps(
        self,
        memory_id: str,
        content: Any,
        *,
        metadata: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
    ) -> Steps[MemoryRecord]:
        """Give a memory new content (its old version stays in :meth:`history`).

        Args:
            expected_version: write only if the memory is still at this version
                (from ``get(id).version``): a compare-and-set for callers that
                computed the content from what they read.

        Raises:
            InvalidInputError: no such memory in this namespace, or the content is invalid.
            VersionConflictError: it moved past ``expected_version``.
        """
        checked = self.check_content(content)
        given = None if metadata is None else self._checked_metadata(metadata)

        def plan(item: ProfileItem | None) -> dict[str, Any]:
            if item is None or item.value is None:
                raise InvalidInputError(rules.missing(memory_id, self.namespace))
            check_version(item, expected_version, f"The memory {memory_id!r}")
            return {
                "content": checked,
                "metadata": given if given is not None else item.value["metadata"],
            }

        record = yield from self._direct(memory_id, plan, "update")
        assert record is not None
        return record

    update, aupdate = twins(_update_steps)

    def _delete_steps(self, memory_id: str, *, expected_version: int | None = None) -> Steps[None]:
        """Delete a memory (its versions stay in :meth:`history`; :meth:`rollback` restores one).

        Raises:
            InvalidInputError: no such memory in this namespace.
            VersionConflictError: it moved past ``expected_version`` (as in :meth:`update`).
        """

        def plan(item: ProfileItem | None) -> None:
            if item is None or item.value is None:
                raise InvalidInputError(rules.missing(memory_id, self.namespace))
            check_version(item, expected_version, f"The memory {memory_id!r}")

        yield from self._direct(memory_id, plan, "delete")

    delete, adelete = twins(_delete_steps)

    def _rollback_steps(
        self, memory_id: str, version: int, *, expected_version: int | None = None
    ) -> Steps[MemoryRecord]:
        """Make a memory say what it said at ``version`` again, as a new version.

        Raises:
            InvalidInputError: no such memory or version, or that version was a delete.
            VersionConflictError: it moved past ``expected_version`` (as in :meth:`update`).
        """
        key = self.rows.prefix + rules.checked_id(memory_id)
        found = yield step(self._store.changes, self.namespace, key, version=version)
        if not found or found[0].document is None:
            raise InvalidInputError(
                f"The memory {memory_id!r} has no version {version} with content; "
                "history(id) lists its versions."
            )
        document = found[0].document

        def plan(item: ProfileItem | None) -> dict[str, Any]:
            if item is None:
                raise InvalidInputError(rules.missing(memory_id, self.namespace))
            check_version(item, expected_version, f"The memory {memory_id!r}")
            return document

        record = yield from self._direct(memory_id, plan, "rollback")
        assert record is not None
        return record

    rollback, arollback = twins(_rollback_steps)

    # -- reading --------------------------------------------------------------------

    def _get_steps(self, memory_id: str) -> Steps[MemoryRecord | None]:
        """The memory with this id in this namespace, or None (also once it expired)."""
        checked = rules.checked_id(memory_id)
        item = yield step(self._store.load, self.namespace, self.rows.prefix + checked)
        if item is None or item.value is None:
            return None
        if checked in (yield from self._expired_ids()):
            return None
        yield from self._touching([checked])
        return rules.record(item)

    get, aget = twins(_get_steps)

    def _history_steps(self, memory_id: str) -> Steps[list[MemoryVersion]]:
        """Every version of a memory, oldest first, each with when it held and what caused it."""
        key = self.rows.prefix + rules.checked_id(memory_id)
        return rules.versions((yield step(self._store.changes, self.namespace, key)))

    history, ahistory = twins(_history_steps)

    def _search_steps(
        self,
        query: str,
        /,
        *,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        as_of: datetime | None = None,
    ) -> Steps[list[MemoryRecord]]:
        """The memories that best match ``query``, best first (current ones, or those of ``as_of``).

        Args:
            filter: a Chroma ``where`` clause on metadata; with ``as_of``, only
                ``{"key": value}`` equalities.
            as_of: answer with the memories that were current then (a
                timezone-aware datetime); ranked by the memory's recall as current
                ones are, embedded now, so it costs an embedding per version.
        """
        request = self._request(query, k, filter if as_of is None else None)
        if as_of is None:
            yield from lining_up(self)
            found = yield from self._live_search(request)
            return [rules.found(r) for r in found]
        when = rules.timestamp(as_of)
        wanted = rules.equality(filter)
        changes = yield step(self._store.key_changes, self.namespace, self.rows.prefix)
        then = [r for r in rules.current_at(changes, when) if rules.matches(r.metadata, wanted)]
        if not then:
            return []
        target = yield from query_vector(self.embedder, request.text)
        with embedding_batch(self.embedder, len(then)):
            vectors = yield step(
                self.embedder.embed_documents, [rules.text(r.content) for r in then]
            )
        # Ranked and scored as a search of the current memories is (the memory's recall).
        held = {r.id: (rules.text(r.content), v) for r, v in zip(then, vectors, strict=True)}
        found = search_texts(self.recall, request.text, target, held, k=request.k or self.k)
        by_id = {r.id: r for r in then}
        return [rules.with_score(by_id[f.id], f.score) for f in found]

    search, asearch = twins(_search_steps)

    # -- LangChain's interface ------------------------------------------------------

    def _showing(self, inputs: Mapping[str, Any]) -> Steps[str]:
        found = yield from self._search_steps(input_text_for(self, inputs))
        return "\n".join(f"- {rules.text(r.content)}" for r in found)

    def _clear_steps(self) -> Steps[None]:
        """Delete every memory (each kept in its history) and drop the queued turns."""
        if self._in_background:
            self._background.cancel()
        for _ in range(MAX_CONFLICTS * 10):
            items = yield step(self._store.keys, self.namespace, self.rows.prefix)
            turns = yield step(self._store.pending, self.namespace, self.key)
            commits = [(i.key, Change(None, "clear", [], ()), i.version) for i in items]
            written = yield from self._writing(commits, turns)
            if written is not None:
                return
        raise InvalidInputError("The collection kept changing while it was cleared; try again.")

    clear, aclear = twins(_clear_steps)

    def _status_steps(self) -> Steps[CollectionStatus]:
        """The queued turns, and the last failed update if none succeeded since."""
        _, shown = yield from self._standing()
        return CollectionStatus(**shown)

    status, astatus = twins(_status_steps)

    def flush(self, *, timeout: float | None = None) -> bool:
        """Run a pending background update now, then write what the index has queued."""
        done = super().flush(timeout=timeout)
        return self.backend.flush(timeout=timeout) and done

    def close(self, *, timeout: float | None = None) -> bool:
        """:meth:`flush`; later turns of this object update inline."""
        done = super().close(timeout=timeout)
        return self.backend.close(timeout=timeout) and done

    # -- updating from conversation ---------------------------------------------------

    def _refresh_steps(self) -> Steps[CollectionUpdate]:
        """Fold the queued turns in now (at most ``max_turns_per_update`` per model call)."""
        return (yield from folding.refreshing(self))

    refresh, arefresh = twins(_refresh_steps)

    def _duplicate_of_steps(self, content: Any) -> Steps[MemoryRecord | None]:
        """The current memory that already says ``content`` (``duplicate_threshold``), or None."""
        found, _ = yield from folding.matching(self, rules.text(self.check_content(content)), ())
        return None if found is None else rules.found(found)

    duplicate_of, aduplicate_of = twins(_duplicate_of_steps)

    # -- export and import (the command line's) -------------------------------------

    def export_documents(self) -> builtins.list[SearchResult]:
        """Every memory of the namespace, deleted ones too, with its versions in ``metadata``.

        ``metadata["versions"]`` lists each version's kind, content, metadata
        and time, oldest first; :meth:`import_documents` replays them.
        """
        return transfer.exported(self)

    def import_documents(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]],
    ) -> None:
        """Replay exported memories' versions under their ids (new times, same contents).

        A memory whose history already ends with those contents is left alone,
        so importing twice changes nothing.

        Raises:
            InvalidInputError: a line has no versions, or a version's content
                does not fit this collection (checked before anything is written).
        """
        transfer.imported(self, ids, texts, metadatas)

    def erase_namespace(self) -> None:
        """Delete every memory (kept in the history, as :meth:`clear`)."""
        self.clear()

    # -- listing (last: the name ``list`` shadows the builtin in the class body) -------

    def _list_steps(
        self, *, filter: Mapping[str, Any] | None = None
    ) -> Steps[builtins.list[MemoryRecord]]:
        """Every current memory of the namespace (whose metadata equals ``filter``'s values)."""
        wanted = rules.equality(filter)
        items = yield step(self._store.keys, self.namespace, self.rows.prefix)
        expired = yield from self._expired_ids()
        records = [rules.record(i) for i in items]
        return [r for r in records if r.id not in expired and rules.matches(r.metadata, wanted)]

    list, alist = twins(_list_steps)
