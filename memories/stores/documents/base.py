"""The store base, shaped as LangGraph's ``BaseStore``: one abstract ``batch``, the rest once."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from memories.errors import BackendError, InvalidInputError
from memories.kernel.namespaces import Namespace, as_namespace
from memories.kernel.steps import Steps, blocking_twin, step, twins
from memories.stores.documents.records import (
    MAX_WRITE_TRIES,
    AddPending,
    Also,
    Change,
    Changes,
    Commit,
    CommitMany,
    CountPending,
    Delete,
    DropPending,
    Guard,
    KeyChanges,
    KeyCount,
    KeyNamespaces,
    KeyPage,
    Keys,
    ListNamespaces,
    Load,
    Op,
    Pending,
    PendingTurn,
    Plan,
    ProfileChange,
    ProfileItem,
    RecordFailure,
    Search,
    Standing,
    _clearing,
    _prefix,
    _visible,
    expecting,
    replacing,
    version_of,
)
from memories.stores.expiry import ExpiryLedger
from memories.stores.sql import Database


class BaseProfileStore(ABC):
    """Where profiles live, in the shape of LangGraph's ``BaseStore``.

    Implementing a subclass
    -----------------------
    Implement :meth:`batch`: perform each operation (:class:`Load`, :class:`Commit`,
    ...: each one's docstring says what it returns) and return the results in order.
    A :class:`Commit` is atomic: it writes only if the profile is still at
    ``expected_version``, recording the change and dropping the turns it folded in.
    The rest is written once here; a backend with a native async client overrides
    :meth:`abatch` (by default :meth:`batch` on a worker thread).
    """

    @abstractmethod
    def batch(self, ops: Sequence[Op], /) -> list[Any]:
        """Perform ``ops`` in order; their results, in the same order."""

    abatch = blocking_twin(batch)

    def _one(self, op: Op) -> Any:
        return self.batch([op])[0]

    async def _aone(self, op: Op) -> Any:
        return (await self.abatch([op]))[0]

    # -- LangGraph-shaped access ------------------------------------------------

    def _get_steps(self, namespace: Namespace, key: str, /) -> Steps[ProfileItem | None]:
        """The document stored under ``namespace`` / ``key``, or None (never stored, or cleared)."""
        return _visible((yield step(self.load, namespace, key)))

    get, aget = twins(_get_steps)

    def _put_steps(
        self, namespace: Namespace, key: str, value: dict[str, Any], /
    ) -> Steps[ProfileItem]:
        """Store ``value`` whatever the current version, and record it as a ``put`` change."""
        written = yield from self.writing(namespace, key, replacing(value))
        return _written(written, self, namespace, key)

    put, aput = twins(_put_steps)

    def _delete_steps(
        self, namespace: Namespace, key: str, /, *, only_if: Guard | None = None
    ) -> Steps[None]:
        """Erase a profile completely: its document, its history and its pending turns.

        With ``only_if``, only when it returns True in the same transaction.
        """
        yield step(self._one, Delete(as_namespace(namespace), key, only_if))

    delete, adelete = twins(_delete_steps)

    def delete_expired(
        self, namespace: Namespace, keys: Sequence[str], ledger: ExpiryLedger, /, *, now: float
    ) -> list[str]:
        """Erase those of ``keys`` whose row in ``ledger`` is still expired at ``now``; return them.

        A document written since the sweep read its row is kept: the rows are held
        while the documents go (:meth:`ExpiryLedger.sweeping
        <memories.stores.expiry.ExpiryLedger.sweeping>`), so such a write waits.
        """
        joined = self._joined(ledger)
        with ledger.sweeping(namespace, keys, expired_at=now, database=joined) as held:
            for key in held:
                self.delete(namespace, key)
        return held

    adelete_expired = blocking_twin(delete_expired)

    def _joined(self, ledger: ExpiryLedger) -> Database | None:
        """This store's database when ``ledger``'s table is in it (None: elsewhere, or not SQL)."""
        return None

    def _search_steps(
        self, namespace_prefix: Namespace, /, *, limit: int = 10, offset: int = 0
    ) -> Steps[list[ProfileItem]]:
        """The documents in ``namespace_prefix`` and the namespaces below it, sorted."""
        return (yield step(self._one, Search(_prefix(namespace_prefix), limit, offset)))

    search, asearch = twins(_search_steps)

    def _list_namespaces_steps(
        self,
        *,
        prefix: Namespace | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> Steps[list[Namespace]]:
        """The namespaces that hold documents, sorted, optionally cut to ``max_depth`` labels."""
        return (yield step(self._one, ListNamespaces(_prefix(prefix), max_depth, limit, offset)))

    list_namespaces, alist_namespaces = twins(_list_namespaces_steps)

    def _load_steps(self, namespace: Namespace, key: str, /) -> Steps[ProfileItem | None]:
        """The stored row, cleared profiles included (with ``value`` None)."""
        return (yield step(self._one, Load(as_namespace(namespace), key)))

    load, aload = twins(_load_steps)

    def _commit_steps(
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
    ) -> Steps[ProfileItem | None]:
        """Write a change if the profile is still at ``expected_version``; None if it moved on.

        The same transaction records the change and drops ``turns`` from the queue.

        Args:
            document: the new document, or None to clear the profile.
            expected_version: the version the change was computed from (0: none stored).
            kind: the change's kind in the history.
            patch: the operations from the old document to the new one.
            turns: the pending turns that caused the change (folded in, so dropped).
        """
        change = Change(document, kind, list(patch), tuple(turns))
        return (
            yield step(self._one, Commit(as_namespace(namespace), key, change, expected_version))
        )

    commit, acommit = twins(_commit_steps)

    def writing(self, namespace: Namespace, key: str, plan: Plan, /) -> Steps[ProfileItem | None]:
        """Compare-and-set as steps: read, plan on what was read, commit if nobody wrote since.

        Returns the written item, or the item as read when ``plan`` returns None.

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

    def _record_failure_steps(
        self,
        namespace: Namespace,
        key: str,
        /,
        *,
        error: str,
        raw: Sequence[str] = (),
        turns: Sequence[PendingTurn] = (),
    ) -> Steps[None]:
        """Add a failed update to the history, with its error, replies and turns."""
        failure = RecordFailure(as_namespace(namespace), key, error, tuple(raw), tuple(turns))
        yield step(self._one, failure)

    record_failure, arecord_failure = twins(_record_failure_steps)

    def _changes_steps(
        self,
        namespace: Namespace,
        key: str,
        /,
        *,
        version: int | None = None,
        failed: bool | None = None,
        last: int | None = None,
    ) -> Steps[list[ProfileChange]]:
        """A profile's history, oldest first.

        Args:
            version: only the change that created this version (none once expired).
            failed: only failed updates (True) or only accepted changes (False).
            last: only the last ``last`` of those.
        """
        return (yield step(self._one, Changes(as_namespace(namespace), key, version, failed, last)))

    changes, achanges = twins(_changes_steps)

    def _commit_many_steps(
        self,
        namespace: Namespace,
        commits: Sequence[tuple[str, Change, int]],
        /,
        *,
        drop_key: str,
        drop_ids: Sequence[int] = (),
        also: Also | None = None,
    ) -> Steps[list[ProfileItem | None] | None]:
        """Write several changes of one namespace, all or none; None when any key moved on.

        In the same transaction, drops the queued turns ``drop_ids`` of ``drop_key``
        and runs ``also`` (see :data:`Also`).
        """
        ns, many = as_namespace(namespace), tuple(commits)
        return (yield step(self._one, CommitMany(ns, many, drop_key, tuple(drop_ids), also)))

    commit_many, acommit_many = twins(_commit_many_steps)

    def _keys_steps(self, namespace: Namespace, prefix: str, /) -> Steps[list[ProfileItem]]:
        """The documents of exactly ``namespace`` whose key starts with ``prefix``, by key."""
        return (yield step(self._one, Keys(as_namespace(namespace), prefix)))

    keys, akeys = twins(_keys_steps)

    def _key_changes_steps(
        self, namespace: Namespace, prefix: str, /
    ) -> Steps[list[tuple[str, ProfileChange]]]:
        """Every accepted change of the keys under ``prefix`` in ``namespace``, oldest first."""
        return (yield step(self._one, KeyChanges(as_namespace(namespace), prefix)))

    key_changes, akey_changes = twins(_key_changes_steps)

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

        Only those whose key (after ``prefix``) or string ``field`` contains
        ``contains``, ignoring case, and whose key column meets ``keep`` (a SQL condition).
        """
        page = KeyPage(as_namespace(namespace), prefix, contains, limit, offset, field, keep)
        return self._one(page)

    def standing(self, namespace: Namespace, key: str, /) -> Steps[Standing]:
        """Steps reading the document, its queued turns and its last unresolved failure.

        A failure is resolved by a later accepted change of the document, or once no
        turn queued before it is left (batches fold the oldest first: its turns went).
        """
        item = yield step(self.load, namespace, key)
        pending = yield step(self.count_pending, namespace, key)
        failures = yield step(self.changes, namespace, key, failed=True, last=1)
        last = failures[-1] if failures else None
        if last is not None and item is not None and item.updated_at > last.created_at:
            last = None  # a later accepted change resolved it
        if last is not None:  # else resolved once no turn queued before it is left
            oldest = (yield step(self.pending, namespace, key, limit=1)) if pending else []
            if not (oldest and oldest[0].created_at <= last.created_at):
                last = None
        return Standing(item, pending, last)

    def _add_pending_steps(
        self, namespace: Namespace, key: str, messages: Sequence[BaseMessage], /
    ) -> Steps[int]:
        """Queue a turn to fold in later; returns its id."""
        return (yield step(self._one, AddPending(as_namespace(namespace), key, tuple(messages))))

    add_pending, aadd_pending = twins(_add_pending_steps)

    def _pending_steps(
        self, namespace: Namespace, key: str, /, *, limit: int | None = None
    ) -> Steps[list[PendingTurn]]:
        """The queued turns, oldest first (at most ``limit``)."""
        return (yield step(self._one, Pending(as_namespace(namespace), key, limit)))

    pending, apending = twins(_pending_steps)

    def _count_pending_steps(self, namespace: Namespace, key: str, /) -> Steps[int]:
        """How many turns are queued."""
        return (yield step(self._one, CountPending(as_namespace(namespace), key)))

    count_pending, acount_pending = twins(_count_pending_steps)

    def _drop_pending_steps(
        self, namespace: Namespace, key: str, ids: Sequence[int], /
    ) -> Steps[None]:
        """Remove these queued turns (the model saw them and changed nothing)."""
        yield step(self._one, DropPending(as_namespace(namespace), key, tuple(ids)))

    drop_pending, adrop_pending = twins(_drop_pending_steps)


def _written(
    item: ProfileItem | None, store: BaseProfileStore, namespace: Namespace, key: str
) -> ProfileItem:
    if item is None:
        raise BackendError(
            f"The profile {namespace!r}/{key!r} vanished from {store!r} right after it was "
            "written (deleted by another process)."
        )
    return item
