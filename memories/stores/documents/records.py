"""The versioned document store's records: documents, changes, queued turns, operations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jsonpatch
from langchain_core.messages import BaseMessage
from sqlalchemy import Connection

from memories.errors import VersionConflictError
from memories.kernel.namespaces import Namespace, as_namespace
from memories.kernel.patching import apply_operations
from memories.stores.history.sql import default_sqlite_url

#: The default store: the SQLite histories' default file, in the data directory.
default_url = default_sqlite_url


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
    """Changes to several keys of one namespace, all or none (:meth:`BaseProfileStore.commit_many`).

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
    """See :meth:`BaseProfileStore.keys`. Result: ``list[ProfileItem]``."""

    namespace: Namespace
    prefix: str


class KeyNamespaces(NamedTuple):
    """See :meth:`BaseProfileStore.key_namespaces`. Result: ``tuple[list[KeyCount], int]``."""

    prefix: str
    contains: str = ""
    limit: int = 50
    offset: int = 0


class KeyPage(NamedTuple):
    """See :meth:`BaseProfileStore.key_page`. Result: ``tuple[list[ProfileItem], int]``."""

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
    """See :meth:`BaseProfileStore.key_changes`. Result: ``list[tuple[str, ProfileChange]]``."""

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
