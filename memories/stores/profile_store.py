"""Where profiles live: a store base in the shape of LangGraph's ``BaseStore``, and SQL under it.

:class:`BaseProfileStore` has one abstract method, :meth:`~BaseProfileStore.batch`,
which performs operations (:class:`Load`, :class:`Commit`, ...); every public
method (``get``, ``put``, ``delete``, ``search``, ``list_namespaces`` as in
LangGraph, and the profile's own: ``commit``, ``changes``, the pending queue)
and the compare-and-set write loop are written once on top of it. The async
side is :meth:`~BaseProfileStore.abatch`: ``batch`` on a worker thread unless a
backend overrides it.

Writes are compare-and-set on ``version``: a :class:`Commit` writes only if
the profile is still at the version the change was computed from, and in the
same transaction records the change and drops the pending turns it folded in.
Two processes updating one profile never lose each other's work.

:class:`ProfileStore` keeps profiles in any SQL database (SQLite by default),
in three tables beside the histories' and on the same engine
(:mod:`memories.stores.documents`: the current documents, every change, the
queued turns). Memories that share the database own their rows there: a
store sees, writes and deletes only its ``owner``'s.

A namespace is a tuple of labels (:mod:`memories.kernel.namespaces`), stored joined
by ``"."``.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jsonpatch
from langchain_core.messages import BaseMessage
from sqlalchemy import Connection, delete, func, insert, literal_column, select, union, update
from sqlalchemy.exc import IntegrityError

from memories.errors import BackendError, ConfigError, InvalidInputError, VersionConflictError
from memories.kernel.messages import dump_message, load_message
from memories.kernel.namespaces import Namespace, as_namespace, namespace_text
from memories.kernel.patching import apply_operations
from memories.kernel.steps import Steps, arun, run, step, to_thread
from memories.stores.document_ttl import DocumentTTL
from memories.stores.documents import (
    HELD,
    OWNER,
    changes_table,
    keyed,
    matching,
    metadata,
    owned,
    pending_table,
    refuse_others,
    sqlite_page,
    store_table,
    under,
)
from memories.stores.expiry import ExpiryLedger
from memories.stores.history.sql import default_sqlite_url
from memories.stores.sql import Database, redacted

__all__ = [
    "MAX_WRITE_TRIES",
    "BaseProfileStore",
    "Change",
    "KeyCount",
    "Namespace",
    "Op",
    "PendingTurn",
    "Plan",
    "ProfileChange",
    "ProfileItem",
    "ProfileStore",
    "check_version",
    "current",
    "default_url",
    "expecting",
    "patching",
    "replacing",
    "version_of",
]


def default_url() -> str:
    """The default store: the SQLite histories' default file, in the data directory."""
    return default_sqlite_url()


@dataclass(frozen=True)
class ProfileItem:
    """A stored document and where it lives."""

    namespace: Namespace
    """The namespace it belongs to, such as ``("user-42",)``."""
    key: str
    """Its name within the namespace (the profile's name)."""
    value: dict[str, Any] | None
    """The document; None only from :meth:`ProfileStore.load` for a cleared profile."""
    version: int
    """How many accepted changes it has had (clears included); the last change's version."""
    created_at: float
    """When it was first written (Unix time)."""
    updated_at: float
    """When it was last written (Unix time)."""


@dataclass(frozen=True)
class PendingTurn:
    """A conversation turn saved but not yet folded into the profile."""

    id: int
    """Position in the pending queue; grows, never reused."""
    messages: tuple[BaseMessage, ...]
    """The turn's messages (the human input and the AI output)."""
    created_at: float
    """When it was saved (Unix time)."""


@dataclass(frozen=True)
class ProfileChange:
    """One entry of a profile's history: an accepted change or a failed update."""

    id: int
    """Position in the change log."""
    version: int | None
    """The version this change created; None for a failed update."""
    kind: str
    """``update`` (from the model), ``put``, ``patch``, ``rollback``, ``clear`` or ``failed``."""
    created_at: float
    """When it happened (Unix time)."""
    document: dict[str, Any] | None
    """The whole document after the change (None after a clear or a failure)."""
    patch: tuple[dict[str, Any], ...]
    """The RFC 6902 operations that turned the previous document into this one."""
    turns: tuple[tuple[BaseMessage, ...], ...]
    """The conversation turns that caused it (for a failure: the turns it could not fold in)."""
    error: str | None = None
    """Why an update failed."""
    raw: tuple[str, ...] = ()
    """A failed update's model replies, as text, in order."""

    @property
    def ok(self) -> bool:
        """Whether this is an accepted change."""
        return self.version is not None


@dataclass(frozen=True)
class KeyCount:
    """A namespace, and how many documents under a key prefix it holds now."""

    namespace: Namespace
    """The namespace."""
    documents: int
    """Its documents under the prefix (cleared ones left out)."""


@dataclass(frozen=True)
class Change:
    """A change planned on a read of the profile, ready for a compare-and-set commit."""

    document: dict[str, Any] | None
    """The new document, or None to clear the profile."""
    kind: str
    """The change's kind in the history (see :attr:`ProfileChange.kind`)."""
    patch: Sequence[dict[str, Any]]
    """The RFC 6902 operations from the read document to the new one."""
    turns: Sequence[PendingTurn] = ()
    """The pending turns it folds in (dropped from the queue with the commit)."""


#: A change planned on what was read (None: nothing to write).
Plan = Callable[[ProfileItem | None], Change | None]


# -- the operations a backend performs ---------------------------------------------


class Load(NamedTuple):
    """Read one profile's row, a cleared one included. Result: ``ProfileItem | None``."""

    namespace: Namespace
    key: str


#: More writes for a commit's own transaction, on its connection (another table of the
#: same database, such as an item's time to live: :meth:`ExpiryLedger.stamping
#: <memories.stores.expiry.ExpiryLedger.stamping>`), so that both land or neither.
Also = Callable[[Connection], None]

#: A check in a write's own transaction, on its connection: the write happens only if True
#: (a sweep's "the expiry row was still expired, and is gone": :meth:`ExpiryLedger.forgetting
#: <memories.stores.expiry.ExpiryLedger.forgetting>`).
Guard = Callable[[Connection], bool]


class Commit(NamedTuple):
    """A compare-and-set write (:meth:`BaseProfileStore.commit`). Result: ``ProfileItem | None``."""

    namespace: Namespace
    key: str
    change: Change
    expected_version: int
    also: Also | None = None
    """More writes of the same transaction."""


class RecordFailure(NamedTuple):
    """Append a failed update to the history. Result: None."""

    namespace: Namespace
    key: str
    error: str
    raw: tuple[str, ...]
    turns: tuple[PendingTurn, ...]


class Changes(NamedTuple):
    """Read the history (see :meth:`BaseProfileStore.changes`). Result: ``list[ProfileChange]``."""

    namespace: Namespace
    key: str
    version: int | None = None
    failed: bool | None = None
    last: int | None = None


class AddPending(NamedTuple):
    """Queue a turn. Result: its id (``int``)."""

    namespace: Namespace
    key: str
    messages: tuple[BaseMessage, ...]


class Pending(NamedTuple):
    """Read the queued turns, oldest first. Result: ``list[PendingTurn]``."""

    namespace: Namespace
    key: str
    limit: int | None


class CountPending(NamedTuple):
    """Count the queued turns. Result: ``int``."""

    namespace: Namespace
    key: str


class DropPending(NamedTuple):
    """Remove exactly these queued turns. Result: None."""

    namespace: Namespace
    key: str
    ids: tuple[int, ...]


class Delete(NamedTuple):
    """Erase a profile with its history and queue. Result: None."""

    namespace: Namespace
    key: str
    only_if: Guard | None = None
    """Run first in the same transaction; nothing is erased unless it returns True."""


class Search(NamedTuple):
    """Documents under a namespace prefix, sorted. Result: ``list[ProfileItem]``."""

    namespace_prefix: Namespace
    limit: int = 10
    offset: int = 0


class ListNamespaces(NamedTuple):
    """Namespaces holding documents, sorted, cut to ``max_depth``. Result: ``list[Namespace]``."""

    prefix: Namespace | None
    max_depth: int | None = None
    limit: int = 100
    offset: int = 0


class CommitMany(NamedTuple):
    """Changes to several keys of one namespace, all or none, and queued turns dropped with them.

    Result: ``list[ProfileItem | None]`` in order (None where a change cleared
    its key), or None when any key had moved on (nothing written).
    """

    namespace: Namespace
    commits: tuple[tuple[str, Change, int], ...]
    """(key, change, expected version) per change."""
    drop_key: str
    """The key whose queued turns ``drop_ids`` name."""
    drop_ids: tuple[int, ...]
    also: Also | None = None
    """More writes of the same transaction."""


class Keys(NamedTuple):
    """The stored documents of exactly this namespace whose key starts with ``prefix``.

    Result: ``list[ProfileItem]`` by key (cleared ones left out).
    """

    namespace: Namespace
    prefix: str


class KeyNamespaces(NamedTuple):
    """The namespaces with keys starting with ``prefix`` (held, changed or queued), sorted.

    Only namespaces whose text contains ``contains``. Result: ``tuple[list[KeyCount], int]``,
    the page and how many namespaces match in all.
    """

    prefix: str
    contains: str = ""
    limit: int = 50
    offset: int = 0


class KeyPage(NamedTuple):
    """A page of exactly this namespace's documents under ``prefix``, by key.

    Only those whose key (after ``prefix``) or top-level ``field`` contains
    ``contains``, ignoring case. Result: ``tuple[list[ProfileItem], int]``,
    the page and how many match in all.
    """

    namespace: Namespace
    prefix: str
    contains: str = ""
    limit: int = 50
    offset: int = 0
    field: str = "content"
    keep: Callable[[Any], Any] | None = None
    """A condition on the key column a document must meet, in SQL (the inspector's: not
    expired, :meth:`~memories.stores.expiry.ExpiryLedger.unexpired`); None: every document."""


class KeyChanges(NamedTuple):
    """Every accepted change of the keys starting with ``prefix`` in exactly this namespace.

    Result: ``list[tuple[str, ProfileChange]]``, oldest first.
    """

    namespace: Namespace
    prefix: str


Op = (
    Load
    | Commit
    | CommitMany
    | Keys
    | KeyChanges
    | KeyNamespaces
    | KeyPage
    | RecordFailure
    | Changes
    | AddPending
    | Pending
    | CountPending
    | DropPending
    | Delete
    | Search
    | ListNamespaces
)

# How many times a write is recomputed when another writer got in first.
MAX_WRITE_TRIES = 100
# Keys per IN (...) list: under every SQL engine's limit on bound parameters.
_KEYS_PER_QUERY = 500


class BaseProfileStore(ABC):
    """Where profiles live, in the shape of LangGraph's ``BaseStore``.

    Implementing a subclass
    -----------------------
    Implement :meth:`batch`: perform each operation (:class:`Load`,
    :class:`Commit`, ... ; each one's docstring says what it returns) and
    return the results in order. A :class:`Commit` must be atomic: it writes
    only if the profile is still at ``expected_version``, and in the same
    transaction records the change and drops the turns it folded in. Every
    other method is written once here on top of :meth:`batch`. The async
    side is :meth:`abatch`, which runs :meth:`batch` on a worker thread; a
    backend with a native async client overrides it.
    """

    @abstractmethod
    def batch(self, ops: Sequence[Op], /) -> list[Any]:
        """Perform ``ops`` in order; their results, in the same order."""

    async def abatch(self, ops: Sequence[Op], /) -> list[Any]:
        """Async :meth:`batch`: by default the same call on a worker thread."""
        return await to_thread(self.batch, ops)

    def _one(self, op: Op) -> Any:
        return self.batch([op])[0]

    async def _aone(self, op: Op) -> Any:
        return (await self.abatch([op]))[0]

    # -- LangGraph-shaped access ------------------------------------------------

    def get(self, namespace: Namespace, key: str, /) -> ProfileItem | None:
        """The document stored under ``namespace`` / ``key``, or None (never stored, or cleared)."""
        return _visible(self.load(namespace, key))

    async def aget(self, namespace: Namespace, key: str, /) -> ProfileItem | None:
        """Async :meth:`get`."""
        return _visible(await self.aload(namespace, key))

    def put(self, namespace: Namespace, key: str, value: dict[str, Any], /) -> ProfileItem:
        """Store ``value`` whatever the current version, and record it as a ``put`` change."""
        return _written(run(self.writing(namespace, key, replacing(value))), self, namespace, key)

    async def aput(self, namespace: Namespace, key: str, value: dict[str, Any], /) -> ProfileItem:
        """Async :meth:`put`."""
        written = await arun(self.writing(namespace, key, replacing(value)))
        return _written(written, self, namespace, key)

    def delete(self, namespace: Namespace, key: str, /, *, only_if: Guard | None = None) -> None:
        """Erase a profile completely: its document, its history and its pending turns.

        With ``only_if``, only when it returns True in the same transaction.
        """
        self._one(Delete(as_namespace(namespace), key, only_if))

    async def adelete(
        self, namespace: Namespace, key: str, /, *, only_if: Guard | None = None
    ) -> None:
        """Async :meth:`delete`."""
        await self._aone(Delete(as_namespace(namespace), key, only_if))

    def delete_expired(
        self, namespace: Namespace, keys: Sequence[str], ledger: ExpiryLedger, /, *, now: float
    ) -> list[str]:
        """Erase those of ``keys`` whose row in ``ledger`` is still expired at ``now``; return them.

        A sweep read the expired rows earlier: a document written again since
        (its row first, a new time to live) is kept. The rows are held while
        the documents go and forgotten in the same transaction
        (:meth:`ExpiryLedger.sweeping <memories.stores.expiry.ExpiryLedger.sweeping>`),
        so a write of one of them waits; on the store's own database the
        erasures join that transaction.
        """
        joined = self._joined(ledger)
        with ledger.sweeping(namespace, keys, expired_at=now, database=joined) as held:
            for key in held:
                self.delete(namespace, key)
        return held

    async def adelete_expired(
        self, namespace: Namespace, keys: Sequence[str], ledger: ExpiryLedger, /, *, now: float
    ) -> list[str]:
        """Async :meth:`delete_expired`."""
        return await to_thread(self.delete_expired, namespace, keys, ledger, now=now)

    def _joined(self, ledger: ExpiryLedger) -> Database | None:
        """This store's database when ``ledger``'s table is in it (None: elsewhere, or not SQL)."""
        return None

    def search(
        self, namespace_prefix: Namespace, /, *, limit: int = 10, offset: int = 0
    ) -> list[ProfileItem]:
        """The documents in ``namespace_prefix`` and the namespaces below it, sorted."""
        return self._one(Search(_prefix(namespace_prefix), limit, offset))

    async def asearch(self, namespace_prefix: Namespace, /, **page: Any) -> list[ProfileItem]:
        """Async :meth:`search` (the same arguments)."""
        return await self._aone(Search(_prefix(namespace_prefix), **page))

    def list_namespaces(
        self,
        *,
        prefix: Namespace | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """The namespaces that hold documents, sorted, optionally cut to ``max_depth`` labels."""
        return self._one(ListNamespaces(_prefix(prefix), max_depth, limit, offset))

    async def alist_namespaces(
        self, *, prefix: Namespace | None = None, **page: Any
    ) -> list[Namespace]:
        """Async :meth:`list_namespaces` (the same arguments)."""
        return await self._aone(ListNamespaces(_prefix(prefix), **page))

    def load(self, namespace: Namespace, key: str, /) -> ProfileItem | None:
        """The stored row, cleared profiles included (with ``value`` None)."""
        return self._one(Load(as_namespace(namespace), key))

    async def aload(self, namespace: Namespace, key: str, /) -> ProfileItem | None:
        """Async :meth:`load`."""
        return await self._aone(Load(as_namespace(namespace), key))

    def commit(
        self,
        namespace: Namespace,
        key: str,
        document: dict[str, Any] | None,
        /,
        *,
        expected_version: int,
        kind: str,
        patch: Sequence[dict[str, Any]],
        turns: Sequence[PendingTurn] = (),
    ) -> ProfileItem | None:
        """Write a change if the profile is still at ``expected_version``; None if it moved on.

        In the same transaction, records the change in the history and drops
        ``turns`` from the pending queue.

        Args:
            document: the new document, or None to clear the profile.
            expected_version: the version the change was computed from (0: none stored).
            kind: the change's kind in the history.
            patch: the operations from the old document to the new one.
            turns: the pending turns that caused the change (folded in, so dropped).
        """
        change = Change(document, kind, list(patch), tuple(turns))
        return self._one(Commit(as_namespace(namespace), key, change, expected_version))

    async def acommit(
        self, namespace: Namespace, key: str, document: dict[str, Any] | None, /, **change: Any
    ) -> ProfileItem | None:
        """Async :meth:`commit` (the same arguments)."""
        parts = Change(
            document, change["kind"], list(change["patch"]), tuple(change.get("turns", ()))
        )
        op = Commit(as_namespace(namespace), key, parts, change["expected_version"])
        return await self._aone(op)

    def writing(self, namespace: Namespace, key: str, plan: Plan, /) -> Steps[ProfileItem | None]:
        """Compare-and-set as steps: read, plan on what was read, commit if nobody wrote since.

        Returns the written item, or the item as read when ``plan`` returns
        None (nothing to write). Run it with :func:`~memories.kernel.steps.run`
        or :func:`~memories.kernel.steps.arun`, or ``yield from`` it in a loop.

        Raises:
            BackendError: other writers got in first :data:`MAX_WRITE_TRIES` times.
        """
        for _ in range(MAX_WRITE_TRIES):
            item = yield step(self.load, namespace, key)
            change = plan(item)
            if change is None:
                return item
            written = yield step(
                self.commit,
                namespace,
                key,
                change.document,
                expected_version=version_of(item),
                kind=change.kind,
                patch=change.patch,
                turns=change.turns,
            )
            if written is not None:
                return written
        raise BackendError(
            f"The profile {key!r} in {namespace!r} changed {MAX_WRITE_TRIES} times "
            "while this write was being made; try again."
        )

    def rolling_back(
        self,
        namespace: Namespace,
        key: str,
        version: int,
        /,
        *,
        check: Callable[[Any, str], Any],
        initial: dict[str, Any] | None = None,
        expected_version: int | None = None,
    ) -> Steps[ProfileItem | None]:
        """Steps restoring the document of ``version`` as a new ``rollback`` change.

        ``expected_version``: write only while the profile is at it (None: any).

        Raises:
            InvalidInputError: there is no such version, or it was a clear.
            Exception: whatever ``check(document, what)`` raises for that document.
        """
        found = yield step(self.changes, namespace, key, version=version)
        if not found:
            hint = " (0 is the empty profile: call clear())" if version == 0 else ""
            raise InvalidInputError(
                f"The profile {key!r} in {namespace!r} has no version {version}"
                f"{hint}; history() lists its versions."
            )
        target = found[0].document
        if target is None:
            raise InvalidInputError(
                f"Version {version} is a clear of the profile; call clear() to clear it again."
            )
        check(target, f"Version {version}")
        plan = expecting(
            replacing(target, "rollback", initial), expected_version, f"The profile {key!r}"
        )
        return (yield from self.writing(namespace, key, plan))

    def clearing(self, namespace: Namespace, key: str, /) -> Steps[ProfileItem | None]:
        """Steps emptying the profile and dropping its queued turns, as a ``clear`` change."""
        pending = yield step(self.pending, namespace, key)
        return (yield from self.writing(namespace, key, _clearing(pending)))

    def record_failure(
        self,
        namespace: Namespace,
        key: str,
        /,
        *,
        error: str,
        raw: Sequence[str] = (),
        turns: Sequence[PendingTurn] = (),
    ) -> None:
        """Add a failed update to the history, with its error, replies and turns."""
        self._one(RecordFailure(as_namespace(namespace), key, error, tuple(raw), tuple(turns)))

    async def arecord_failure(self, namespace: Namespace, key: str, /, **failure: Any) -> None:
        """Async :meth:`record_failure` (the same arguments)."""
        raw, turns = tuple(failure.get("raw", ())), tuple(failure.get("turns", ()))
        await self._aone(RecordFailure(as_namespace(namespace), key, failure["error"], raw, turns))

    def changes(
        self,
        namespace: Namespace,
        key: str,
        /,
        *,
        version: int | None = None,
        failed: bool | None = None,
        last: int | None = None,
    ) -> list[ProfileChange]:
        """A profile's history, oldest first.

        Args:
            version: only the change that created this version.
            failed: only failed updates (True) or only accepted changes (False).
            last: only the last ``last`` of those.
        """
        return self._one(Changes(as_namespace(namespace), key, version, failed, last))

    async def achanges(
        self, namespace: Namespace, key: str, /, **filters: Any
    ) -> list[ProfileChange]:
        """Async :meth:`changes` (the same arguments)."""
        return await self._aone(Changes(as_namespace(namespace), key, **filters))

    def commit_many(
        self,
        namespace: Namespace,
        commits: Sequence[tuple[str, Change, int]],
        /,
        *,
        drop_key: str,
        drop_ids: Sequence[int] = (),
        also: Also | None = None,
    ) -> list[ProfileItem | None] | None:
        """Write several changes of one namespace, all or none; None when any key moved on.

        In the same transaction, drops the queued turns ``drop_ids`` of ``drop_key``
        and runs ``also`` (see :data:`Also`).
        """
        op = CommitMany(as_namespace(namespace), tuple(commits), drop_key, tuple(drop_ids), also)
        return self._one(op)

    async def acommit_many(
        self,
        namespace: Namespace,
        commits: Sequence[tuple[str, Change, int]],
        /,
        *,
        drop_key: str,
        drop_ids: Sequence[int] = (),
        also: Also | None = None,
    ) -> list[ProfileItem | None] | None:
        """Async :meth:`commit_many`."""
        op = CommitMany(as_namespace(namespace), tuple(commits), drop_key, tuple(drop_ids), also)
        return await self._aone(op)

    def keys(self, namespace: Namespace, prefix: str, /) -> list[ProfileItem]:
        """The documents of exactly ``namespace`` whose key starts with ``prefix``, by key."""
        return self._one(Keys(as_namespace(namespace), prefix))

    async def akeys(self, namespace: Namespace, prefix: str, /) -> list[ProfileItem]:
        """Async :meth:`keys`."""
        return await self._aone(Keys(as_namespace(namespace), prefix))

    def key_changes(self, namespace: Namespace, prefix: str, /) -> list[tuple[str, ProfileChange]]:
        """Every accepted change of the keys under ``prefix`` in ``namespace``, oldest first."""
        return self._one(KeyChanges(as_namespace(namespace), prefix))

    async def akey_changes(
        self, namespace: Namespace, prefix: str, /
    ) -> list[tuple[str, ProfileChange]]:
        """Async :meth:`key_changes`."""
        return await self._aone(KeyChanges(as_namespace(namespace), prefix))

    def key_namespaces(
        self, prefix: str, /, *, contains: str = "", limit: int = 50, offset: int = 0
    ) -> tuple[list[KeyCount], int]:
        """The namespaces with keys under ``prefix`` (whose text contains ``contains``), sorted.

        A namespace counts when it holds such a key now, or had one changed or
        queued (a profile whose only update failed); returns a page and the total.
        """
        return self._one(KeyNamespaces(prefix, contains, limit, offset))

    def key_page(
        self,
        namespace: Namespace,
        prefix: str,
        /,
        *,
        contains: str = "",
        limit: int = 50,
        offset: int = 0,
        field: str = "content",
        keep: Callable[[Any], Any] | None = None,
    ) -> tuple[list[ProfileItem], int]:
        """A page of ``namespace``'s documents under ``prefix`` by key, and the total.

        Only the documents whose key (after ``prefix``) or top-level ``field``
        (a string) contains ``contains``, ignoring case: the text in other
        fields, in field names or in the JSON's syntax is not a match. The
        documents whose key column fails ``keep`` (a SQL condition made from it)
        are left out of both.
        """
        page = KeyPage(as_namespace(namespace), prefix, contains, limit, offset, field, keep)
        return self._one(page)

    def standing(self, namespace: Namespace, key: str, /) -> Steps[Standing]:
        """Steps reading the document, its queued turns and its last unresolved failure."""
        item = yield step(self.load, namespace, key)
        pending = yield step(self.count_pending, namespace, key)
        failures = yield step(self.changes, namespace, key, failed=True, last=1)
        last = failures[-1] if failures else None
        if last is not None and item is not None and item.updated_at > last.created_at:
            last = None  # a later accepted change resolved it
        return Standing(item, pending, last)

    def add_pending(
        self, namespace: Namespace, key: str, messages: Sequence[BaseMessage], /
    ) -> int:
        """Queue a turn to fold in later; returns its id."""
        return self._one(AddPending(as_namespace(namespace), key, tuple(messages)))

    async def aadd_pending(
        self, namespace: Namespace, key: str, messages: Sequence[BaseMessage], /
    ) -> int:
        """Async :meth:`add_pending`."""
        return await self._aone(AddPending(as_namespace(namespace), key, tuple(messages)))

    def pending(
        self, namespace: Namespace, key: str, /, *, limit: int | None = None
    ) -> list[PendingTurn]:
        """The queued turns, oldest first (at most ``limit``)."""
        return self._one(Pending(as_namespace(namespace), key, limit))

    async def apending(
        self, namespace: Namespace, key: str, /, *, limit: int | None = None
    ) -> list[PendingTurn]:
        """Async :meth:`pending`."""
        return await self._aone(Pending(as_namespace(namespace), key, limit))

    def count_pending(self, namespace: Namespace, key: str, /) -> int:
        """How many turns are queued."""
        return self._one(CountPending(as_namespace(namespace), key))

    async def acount_pending(self, namespace: Namespace, key: str, /) -> int:
        """Async :meth:`count_pending`."""
        return await self._aone(CountPending(as_namespace(namespace), key))

    def drop_pending(self, namespace: Namespace, key: str, ids: Sequence[int], /) -> None:
        """Remove these queued turns (the model saw them and changed nothing)."""
        self._one(DropPending(as_namespace(namespace), key, tuple(ids)))

    async def adrop_pending(self, namespace: Namespace, key: str, ids: Sequence[int], /) -> None:
        """Async :meth:`drop_pending`."""
        await self._aone(DropPending(as_namespace(namespace), key, tuple(ids)))


class Standing(NamedTuple):
    """Where a document stands, as :meth:`BaseProfileStore.standing` reads it."""

    item: ProfileItem | None
    """The stored row (None: never written)."""
    pending: int
    """How many turns wait to be folded in."""
    failure: ProfileChange | None
    """The last failed update, when nothing was accepted after it."""


def version_of(item: ProfileItem | None) -> int:
    """A profile's version as read (0: never written)."""
    return item.version if item is not None else 0


def check_version(item: ProfileItem | None, expected: int | None, what: str) -> None:
    """Refuse a write computed from ``expected`` when ``item`` has moved on (None: any version).

    Raises:
        VersionConflictError: ``item`` is at another version, naming both.
    """
    if expected is not None and version_of(item) != expected:
        raise VersionConflictError(
            f"{what} is at version {version_of(item)}, not {expected}: read it again and recompute."
        )


def expecting(plan: Plan, expected: int | None, what: str) -> Plan:
    """``plan``, planned only while the item read is at ``expected`` (None: any version)."""
    if expected is None:
        return plan

    def checked(item: ProfileItem | None) -> Change | None:
        check_version(item, expected, what)
        return plan(item)

    return checked


def _visible(item: ProfileItem | None) -> ProfileItem | None:
    return item if item is not None and item.value is not None else None


def _prefix(prefix: Namespace | None) -> Namespace:
    return as_namespace(prefix) if prefix else ()


def current(item: ProfileItem | None, initial: dict[str, Any] | None = None) -> dict[str, Any]:
    """The document as read: the stored one, else ``initial`` (a schema's defaults), else {}."""
    if item is not None and item.value is not None:
        return item.value
    return initial if initial is not None else {}


def replacing(
    target: dict[str, Any], kind: str = "put", initial: dict[str, Any] | None = None
) -> Plan:
    """A plan writing ``target`` whatever was read, recorded as ``kind`` with its patch."""

    def plan(item: ProfileItem | None) -> Change:
        return Change(target, kind, jsonpatch.make_patch(current(item, initial), target).patch)

    return plan


def patching(
    operations: list[dict[str, Any]],
    check: Callable[[Any, str], Any],
    initial: dict[str, Any] | None = None,
) -> Plan:
    """A plan applying RFC 6902 ``operations`` to what was read; ``check`` validates the result."""

    def plan(item: ProfileItem | None) -> Change:
        new = apply_operations(current(item, initial), operations)
        return Change(check(new, "The patched document"), "patch", operations)

    return plan


def _clearing(pending: Sequence[PendingTurn]) -> Plan:
    def plan(item: ProfileItem | None) -> Change | None:
        if (item is None or item.value is None) and not pending:
            return None  # nothing stored, nothing queued: nothing to record
        return Change(None, "clear", jsonpatch.make_patch(current(item), {}).patch, pending)

    return plan


def _written(
    item: ProfileItem | None, store: BaseProfileStore, namespace: Namespace, key: str
) -> ProfileItem:
    if item is None:
        raise BackendError(
            f"The profile {namespace!r}/{key!r} vanished from {store!r} right after it was "
            "written (deleted by another process)."
        )
    return item


class _Conflict(Exception):
    """The profile moved past the expected version; the transaction rolls back."""


class ProfileStore(BaseProfileStore):
    """Profiles in a SQL database: a SQLite file by default, or any SQLAlchemy URL.

    Args:
        url: a SQLAlchemy URL, such as ``"sqlite:///memories.db"`` (the
            default, shared with the SQLite histories) or
            ``"postgresql+psycopg://user:pw@host/db"``.
        ttl: how long the documents written through this object live (its
            ledger on ``url``); None: until deleted.
        owner: whose rows these are (the kind of memory: ``"profile"``,
            ``"instructions"``...): the store reads, writes and deletes no other's.
    """

    def __init__(
        self, url: str | None = None, *, ttl: DocumentTTL | None = None, owner: str = OWNER
    ) -> None:
        url = default_url() if url is None else url
        if not isinstance(url, str) or not url:
            raise ConfigError(f"url must be a SQLAlchemy database URL string; got {url!r:.80}")
        if ttl is not None and ttl.ledger.url != url:
            raise ConfigError(f"A document's time to live is kept on its store's database {url!r}.")
        if not isinstance(owner, str) or not 0 < len(owner) <= 32:
            raise ConfigError(f"owner must be a name of 1 to 32 characters; got {owner!r:.80}")
        self.url = url
        self.ttl = ttl
        self.owner = owner
        self._db = Database(url, metadata, like=None if ttl is None else ttl.ledger.database)

    @property
    def database(self) -> Database:
        """The database the documents are kept in."""
        return self._db

    def _joined(self, ledger: ExpiryLedger) -> Database | None:
        return self._db if ledger.database.shares(self._db) else None

    def _also(
        self, namespace: Namespace, commits: Sequence[tuple[str, int]], also: Also | None
    ) -> Also | None:
        """A commit's other writes: ``also``, and with a ``ttl`` the documents' expiry rows.

        Both are made now, before the commit's transaction opens. A document
        written again after it expired starts anew (the ``ttl`` is for new
        ones; others keep their own): its earlier versions (what expired) go
        in the same transaction. ``commits``: each key with its expected version.
        """
        if self.ttl is None:
            return also
        keys = [key for key, _ in commits]
        expired = self.ttl.expired(namespace, keys)
        stamp = self.ttl.stamping(namespace, keys, {*expired, *(k for k, v in commits if not v)})
        ns = namespace_text(namespace)

        def both(connection: Connection) -> None:
            stamp(connection)
            if expired:
                self._drop_versions(connection, ns, expired)
            if also is not None:
                also(connection)

        return both

    def _drop_versions(self, connection: Connection, ns: str, keys: Sequence[str]) -> None:
        """Remove the history of these keys before their current version (just written)."""
        t, current = changes_table, store_table
        version = (
            select(current.c.version)
            .where(current.c.namespace == ns, current.c.key == t.c.key)
            .scalar_subquery()
        )
        connection.execute(
            delete(t).where(
                t.c.namespace == ns,
                t.c.key.in_(list(keys)),
                t.c.version < version,
                owned(t, self.owner),
            )
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redacted(self.url)!r})"

    def batch(self, ops: Sequence[Op], /) -> list[Any]:
        """Perform ``ops`` in order, each in its own transaction."""
        results = []
        for op in ops:
            handler = _HANDLERS.get(type(op))
            if handler is None:
                raise TypeError(f"{type(self).__name__} cannot perform {op!r:.80}")
            results.append(handler(self, op))
        return results

    def _load(self, op: Load) -> ProfileItem | None:
        t = store_table
        query = select(t).where(
            t.c.namespace == namespace_text(op.namespace), t.c.key == op.key, owned(t, self.owner)
        )
        with self._db.transaction() as connection:
            row = connection.execute(query).first()
        item = _item(row) if row is not None else None
        return item if self.ttl is None else self.ttl.shown(item)

    def _commit(self, op: Commit) -> ProfileItem | None:
        ns, key, change = namespace_text(op.namespace), op.key, op.change
        also = self._also(op.namespace, [(key, op.expected_version)], op.also)
        try:
            with self._db.transaction() as connection:
                self._write_change(connection, ns, key, change, op.expected_version, time.time())
                self._drop(connection, ns, key, [turn.id for turn in change.turns])
                if also is not None:
                    also(connection)
        except _Conflict:
            return None
        return self._load(Load(op.namespace, key))

    def _commit_many(self, op: CommitMany) -> list[ProfileItem | None] | None:
        ns, now = namespace_text(op.namespace), time.time()
        also = self._also(op.namespace, [(key, v) for key, _, v in op.commits], op.also)
        try:
            with self._db.transaction() as connection:
                if op.drop_ids:
                    # The turns are this writer's claim, taken first (the delete locks them):
                    # if another writer folded them in already, this change was computed
                    # from stale input and would repeat it.
                    t = pending_table
                    ids = sorted(set(op.drop_ids))
                    dropped = connection.execute(
                        delete(t).where(
                            t.c.namespace == ns,
                            t.c.key == op.drop_key,
                            t.c.id.in_(ids),
                            owned(t, self.owner),
                        )
                    ).rowcount
                    if dropped != len(ids):
                        raise _Conflict
                fresh = [(key, change) for key, change, expected in op.commits if expected == 0]
                self._insert_fresh(connection, ns, fresh, now)
                for key, change, expected in op.commits:
                    if expected:
                        self._write_change(connection, ns, key, change, expected, now)
                if also is not None:
                    also(connection)
        except _Conflict:
            return None
        return self._load_many(op.namespace, [key for key, _, _ in op.commits])

    def _insert_fresh(
        self, connection: Connection, ns: str, fresh: Sequence[tuple[str, Change]], now: float
    ) -> None:
        """New keys and their first changes, two statements for all of them (a bulk put)."""
        if not fresh:
            return
        texts = [_dump(c.document) if c.document is not None else None for _, c in fresh]
        refuse_others(connection, ns, [key for key, _ in fresh], self.owner)
        try:
            connection.execute(
                insert(store_table),
                [
                    {
                        "namespace": ns,
                        "key": key,
                        "value": text,
                        "version": 1,
                        "created_at": now,
                        "updated_at": now,
                        "owner": self.owner,
                    }
                    for (key, _), text in zip(fresh, texts, strict=True)
                ],
            )
        except IntegrityError as exc:
            raise _Conflict from exc  # another writer created one of them first
        connection.execute(
            insert(changes_table),
            [
                {
                    "namespace": ns,
                    "key": key,
                    "version": 1,
                    "kind": change.kind,
                    "document": text,
                    "patch": _dump(list(change.patch)),
                    "turns": _dump_turns(change.turns),
                    "created_at": now,
                    "owner": self.owner,
                }
                for (key, change), text in zip(fresh, texts, strict=True)
            ],
        )

    def _load_many(self, namespace: Namespace, keys: Sequence[str]) -> list[ProfileItem | None]:
        """The rows of these keys, in order (None where absent), read in a few queries."""
        t, ns = store_table, namespace_text(namespace)
        found: dict[str, ProfileItem] = {}
        with self._db.transaction() as connection:
            for start in range(0, len(keys), _KEYS_PER_QUERY):
                chunk = list(keys[start : start + _KEYS_PER_QUERY])
                query = select(t).where(
                    t.c.namespace == ns, t.c.key.in_(chunk), owned(t, self.owner)
                )
                found.update((row.key, _item(row)) for row in connection.execute(query))
        return [found.get(key) for key in keys]

    def _write_change(
        self, connection: Connection, ns: str, key: str, change: Change, expected: int, now: float
    ) -> None:
        """Compare-and-set one key and record the change (raises _Conflict if it moved on)."""
        text = _dump(change.document) if change.document is not None else None
        if expected == 0:
            self._insert(connection, ns, key, text, now)
        else:
            t = store_table  # an unowned row (an older version's) is claimed here
            moved = connection.execute(
                update(t)
                .where(
                    t.c.namespace == ns,
                    t.c.key == key,
                    t.c.version == expected,
                    owned(t, self.owner),
                )
                .values(value=text, version=expected + 1, updated_at=now, owner=self.owner)
            ).rowcount
            if moved != 1:
                raise _Conflict
        row = {
            "namespace": ns,
            "key": key,
            "version": expected + 1,
            "kind": change.kind,
            "document": text,
            "patch": _dump(list(change.patch)),
            "turns": _dump_turns(change.turns),
            "created_at": now,
            "owner": self.owner,
        }
        connection.execute(insert(changes_table).values(**row))

    def _keys(self, op: Keys) -> list[ProfileItem]:
        t = store_table
        query = select(t).where(*self._keyed(t, op.namespace, op.prefix), t.c.value.is_not(None))
        query = query.order_by(t.c.key)
        with self._db.transaction() as connection:
            return [_item(row) for row in connection.execute(query)]

    def _key_namespaces(self, op: KeyNamespaces) -> tuple[list[KeyCount], int]:
        # Each part DISTINCT on its own: SQLite reads (namespace, key) from the
        # tables' indexes in namespace order, and the union meets few rows.
        named = union(
            *(
                select(t.c.namespace)
                .distinct()
                .where(
                    t.c.key.startswith(op.prefix, autoescape=True),
                    t.c.namespace.contains(op.contains, autoescape=True),
                    owned(t, self.owner),
                )
                for t in (store_table, changes_table, pending_table)
            )
        ).subquery()
        with self._db.transaction() as connection:
            if op.limit == 0:  # the total alone (the overview's count)
                total = connection.execute(select(func.count()).select_from(named)).scalar_one()
                return [], int(total)
            # The union once (it scans every key under the prefix: 100,000 at a time), the
            # page cut here, then the page's counts by a range of the namespace index.
            every = list(
                connection.execute(select(named.c.namespace).order_by(named.c.namespace)).scalars()
            )
            names = every[op.offset : op.offset + op.limit]
            counted: dict[str, int] = {}
            if names:
                t = store_table
                counts = (
                    select(t.c.namespace, func.count().label("documents"))
                    .where(
                        t.c.namespace.between(names[0], names[-1]),
                        t.c.key.startswith(op.prefix, autoescape=True),
                        t.c.value.is_not(None),
                        owned(t, self.owner),
                    )
                    .group_by(t.c.namespace)
                )
                counted = {row[0]: int(row[1]) for row in connection.execute(counts)}
        found = [KeyCount(tuple(name.split(".")), counted.get(name, 0)) for name in names]
        return found, len(every)

    def _key_page(self, op: KeyPage) -> tuple[list[ProfileItem], int]:
        t = store_table
        where = [*self._keyed(t, op.namespace, op.prefix), t.c.value.is_not(None)]
        if op.keep is not None:
            where.append(op.keep(t.c.key))
        # By key: the primary key's order, read from its index without a sort
        # (a sort on updated_at read every row's document: 0.7 s at 100,000).
        query = select(t).where(*where).order_by(t.c.key)
        counting = select(func.count()).where(*where)
        with self._db.transaction() as connection:
            if op.contains and op.limit:
                matched = matching(op, sqlite=connection.dialect.name == "sqlite")
                if connection.dialect.name == "sqlite" and self._mostly(connection, op):
                    # The namespace is much of the table: reading the table in its own
                    # order (20 ms at 100,000 documents) beats a lookup per index entry
                    # (120 ms). Conditions written through || '' keep the indexes out.
                    where[0] = t.c.namespace.concat("") == namespace_text(op.namespace)
                    where[2] = t.c.value.concat("").is_not(None)
                # The total comes with the page instead of from a second scan of the
                # documents: a window over the matches, or on SQLite a count of the
                # matches' keys, whose sort then carries keys, not documents (a text in
                # all 100,000: 135 to 80 ms).
                if connection.dialect.name == "sqlite":
                    query = sqlite_page(where, matched, op.limit, op.offset)
                else:
                    query = select(t).where(*where, matched).order_by(t.c.key)
                    query = query.add_columns(func.count().over().label("total"))
                    query = query.limit(op.limit).offset(op.offset)
                rows = connection.execute(query).all()
                if rows:
                    return [_item(row) for row in rows], int(rows[0].total)
                if op.offset == 0:
                    return [], 0
                counting = select(func.count()).where(*where, matched)
                return [], int(connection.execute(counting).scalar_one())
            if op.contains:
                counting = counting.where(matching(op, sqlite=connection.dialect.name == "sqlite"))
            total = connection.execute(counting).scalar_one()
            rows = connection.execute(query.limit(op.limit).offset(op.offset)).all()
        return [_item(row) for row in rows], int(total)

    @staticmethod
    def _mostly(connection: Connection, op: KeyPage) -> bool:
        """Whether ``op``'s namespace holds an eighth of the table or more (SQLite)."""
        t = store_table
        held = select(func.count()).where(*keyed(t, op.namespace, op.prefix))
        rows = connection.execute(held).scalar_one()  # from the key index alone
        # max(rowid) is one descent of the table, and at least the number of its rows.
        last: Any = select(func.max(literal_column("rowid"))).select_from(t)
        return int(rows) * 8 >= int(connection.execute(last).scalar_one() or 0)

    def _key_changes(self, op: KeyChanges) -> list[tuple[str, ProfileChange]]:
        t = changes_table
        query = select(t).where(*self._keyed(t, op.namespace, op.prefix), t.c.version.is_not(None))
        query = query.order_by(t.c.id)
        with self._db.transaction() as connection:
            return [(row.key, _change(row)) for row in connection.execute(query)]

    def _record_failure(self, op: RecordFailure) -> None:
        row = {
            "namespace": namespace_text(op.namespace),
            "key": op.key,
            "version": None,
            "kind": "failed",
            "turns": _dump_turns(op.turns),
            "error": op.error,
            "raw": _dump(list(op.raw)),
            "created_at": time.time(),
            "owner": self.owner,
        }
        with self._db.transaction() as connection:
            connection.execute(insert(changes_table).values(**row))

    def _changes(self, op: Changes) -> list[ProfileChange]:
        t = changes_table
        query = select(t).where(
            t.c.namespace == namespace_text(op.namespace), t.c.key == op.key, owned(t, self.owner)
        )
        if op.version is not None:
            query = query.where(t.c.version == op.version)
        if op.failed is not None:
            query = query.where(t.c.version.is_(None) if op.failed else t.c.version.is_not(None))
        if op.last is not None:
            query = query.order_by(t.c.id.desc()).limit(op.last)
        else:
            query = query.order_by(t.c.id)
        with self._db.transaction() as connection:
            rows = list(connection.execute(query).all())
        if op.last is not None:
            rows.reverse()
        return [_change(row) for row in rows]

    def _add_pending(self, op: AddPending) -> int:
        row = {
            "namespace": namespace_text(op.namespace),
            "key": op.key,
            "messages": _dump([json.loads(dump_message(m)) for m in op.messages]),
            "created_at": time.time(),
            "owner": self.owner,
        }
        with self._db.transaction() as connection:
            inserted = connection.execute(insert(pending_table).values(**row)).inserted_primary_key
        assert inserted is not None  # an INSERT into a table with a primary key has one
        return int(inserted[0])

    def _pending(self, op: Pending) -> list[PendingTurn]:
        t = pending_table
        query = (
            select(t)
            .where(
                t.c.namespace == namespace_text(op.namespace),
                t.c.key == op.key,
                owned(t, self.owner),
            )
            .order_by(t.c.id)
            .limit(op.limit)
        )
        with self._db.transaction() as connection:
            rows = connection.execute(query).all()
        return [
            PendingTurn(
                int(row.id),
                tuple(load_message(json.dumps(m)) for m in json.loads(row.messages)),
                float(row.created_at),
            )
            for row in rows
        ]

    def _count_pending(self, op: CountPending) -> int:
        t = pending_table
        query = select(func.count()).where(
            t.c.namespace == namespace_text(op.namespace), t.c.key == op.key, owned(t, self.owner)
        )
        with self._db.transaction() as connection:
            return int(connection.execute(query).scalar_one())

    def _drop_pending(self, op: DropPending) -> None:
        with self._db.transaction() as connection:
            self._drop(connection, namespace_text(op.namespace), op.key, op.ids)

    def _delete(self, op: Delete) -> None:
        ns = namespace_text(op.namespace)
        with self._db.transaction() as connection:
            if op.only_if is not None and not op.only_if(connection):
                return
            for t in (store_table, changes_table, pending_table):
                connection.execute(
                    delete(t).where(t.c.namespace == ns, t.c.key == op.key, owned(t, self.owner))
                )

    # -- one person's data (for erasure) -------------------------------------------

    def held(self, namespace: Namespace, /) -> dict[str, int]:
        """What the store holds under ``namespace`` exactly (every key), by kind."""
        ns = namespace_text(as_namespace(namespace))
        with self._db.transaction() as connection:
            return {
                kind: int(
                    connection.execute(
                        select(func.count()).where(table.c.namespace == ns)
                    ).scalar_one()
                )
                for kind, table in HELD.items()
            }

    def erase_namespace(self, namespace: Namespace, /) -> None:
        """Delete every key of ``namespace`` exactly, every version and queued turn, for good.

        Unlike :meth:`~BaseProfileStore.delete` of one key, or a memory's
        ``clear()`` (a recorded change that a rollback undoes), nothing stays.
        A namespace under it (``users.maya.work`` for ``users.maya``) is another's.
        """
        ns = namespace_text(as_namespace(namespace))
        with self._db.transaction(write=True) as connection:
            for table in HELD.values():
                connection.execute(delete(table).where(table.c.namespace == ns))

    def _search(self, op: Search) -> list[ProfileItem]:
        t = store_table
        query = (
            select(t)
            .where(t.c.value.is_not(None), under(op.namespace_prefix), owned(t, self.owner))
            .order_by(t.c.namespace, t.c.key)
            .limit(op.limit)
            .offset(op.offset)
        )
        with self._db.transaction() as connection:
            rows = connection.execute(query).all()
        return [_item(row) for row in rows]

    def _list_namespaces(self, op: ListNamespaces) -> list[Namespace]:
        t = store_table
        query = select(t.c.namespace).distinct().where(t.c.value.is_not(None), owned(t, self.owner))
        if op.prefix:
            query = query.where(under(op.prefix))
        with self._db.transaction() as connection:
            found = {tuple(ns.split(".")) for ns in connection.execute(query).scalars()}
        if op.max_depth is not None:
            found = {ns[: op.max_depth] for ns in found}
        return sorted(found)[op.offset : op.offset + op.limit]

    # -- statements -------------------------------------------------------------

    def _keyed(self, table: Any, namespace: Namespace, prefix: str) -> tuple[Any, ...]:
        """The conditions "this store's row of exactly this namespace, its key after ``prefix``"."""
        return (*keyed(table, namespace, prefix), owned(table, self.owner))

    def _insert(
        self, connection: Connection, ns: str, key: str, text: str | None, now: float
    ) -> None:
        refuse_others(connection, ns, [key], self.owner)
        row = {
            "namespace": ns,
            "key": key,
            "value": text,
            "version": 1,
            "created_at": now,
            "updated_at": now,
            "owner": self.owner,
        }
        try:
            connection.execute(insert(store_table).values(**row))
        except IntegrityError as exc:
            # Another writer created the row first; the whole transaction rolls back.
            raise _Conflict from exc

    def _drop(self, connection: Connection, ns: str, key: str, ids: Sequence[int]) -> None:
        # Exactly these ids, never "up to": on a server database a turn with a
        # smaller id can commit after a larger one and must not be dropped unseen.
        if ids:
            t = pending_table
            connection.execute(
                delete(t).where(
                    t.c.namespace == ns,
                    t.c.key == key,
                    t.c.id.in_(list(ids)),
                    owned(t, self.owner),
                )
            )


_HANDLERS: dict[type, Callable[[ProfileStore, Any], Any]] = {
    Load: ProfileStore._load,
    Commit: ProfileStore._commit,
    CommitMany: ProfileStore._commit_many,
    Keys: ProfileStore._keys,
    KeyChanges: ProfileStore._key_changes,
    KeyNamespaces: ProfileStore._key_namespaces,
    KeyPage: ProfileStore._key_page,
    RecordFailure: ProfileStore._record_failure,
    Changes: ProfileStore._changes,
    AddPending: ProfileStore._add_pending,
    Pending: ProfileStore._pending,
    CountPending: ProfileStore._count_pending,
    DropPending: ProfileStore._drop_pending,
    Delete: ProfileStore._delete,
    Search: ProfileStore._search,
    ListNamespaces: ProfileStore._list_namespaces,
}


def _item(row: Any) -> ProfileItem:
    return ProfileItem(
        namespace=tuple(row.namespace.split(".")),
        key=row.key,
        value=json.loads(row.value) if row.value is not None else None,
        version=int(row.version),
        created_at=float(row.created_at),
        updated_at=float(row.updated_at),
    )


def _change(row: Any) -> ProfileChange:
    return ProfileChange(
        id=int(row.id),
        version=int(row.version) if row.version is not None else None,
        kind=row.kind,
        created_at=float(row.created_at),
        document=json.loads(row.document) if row.document is not None else None,
        patch=tuple(json.loads(row.patch)) if row.patch else (),
        turns=_load_turns(row.turns),
        error=row.error,
        raw=tuple(json.loads(row.raw)) if row.raw else (),
    )


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _dump_turns(turns: Sequence[PendingTurn]) -> str:
    return _dump([[json.loads(dump_message(m)) for m in turn.messages] for turn in turns])


def _load_turns(text: str | None) -> tuple[tuple[BaseMessage, ...], ...]:
    if not text:
        return ()
    return tuple(tuple(load_message(json.dumps(m)) for m in turn) for turn in json.loads(text))
