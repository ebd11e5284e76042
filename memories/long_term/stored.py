"""One versioned document per namespace, updated by a model: store, clearing, background job.

A profile (facts about a user) and an agent's instructions are both one
document per namespace and key in a :class:`~memories.stores.documents.ProfileStore`
(compare-and-set writes, every version in the history, queued turns), updated
by a model under a policy. This part holds the fields and the plumbing they
share; a subclass says what the document is and how the model updates it
(``_refresh_steps``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import cached_property
from typing import Any, ClassVar, Literal, TypeVar

from langchain_core.messages import BaseMessage, SystemMessage
from pydantic import Field, PrivateAttr

from memories.core.parts import CountsTokens, DeferredMemory, ModelMemory
from memories.errors import BudgetExceededError
from memories.kernel.background import UPDATE_RANK, BatchResult, merged_batches
from memories.kernel.keys import turn_messages_for
from memories.kernel.namespaces import Namespace, NamespaceField, namespace_text
from memories.kernel.retention import Sweeps
from memories.kernel.steps import Steps, blocking_twin, run, step, twins
from memories.stores.compaction import compactions
from memories.stores.documents import (
    PendingTurn,
    Plan,
    ProfileStore,
    default_url,
    expecting,
    version_of,
)
from memories.stores.documents.records import Also, Change, ProfileItem, Standing
from memories.stores.documents.ttl import DocumentTTL
from memories.stores.erasure import StoreShare
from memories.stores.expiry import DOCUMENTS, Expiring, ExpiryLedger
from memories.stores.sql import Database, redacted

__all__ = ["ExpiringDocumentMemory", "StoredDocumentMemory", "TurnPolicy", "batches_until"]

logger = logging.getLogger(__name__)

#: When queued turns are folded in: every save, every ``every_n``, in the background, on call.
TurnPolicy = Literal["turn", "every_n", "background", "manual"]

#: How many times a model update is recomputed when another writer got in first.
MAX_CONFLICTS = 3

B = TypeVar("B", bound=BatchResult)


def batches_until(
    batch: Callable[[], Steps[B]],
    first: B,
    *,
    going: tuple[str, ...] = ("updated", "unchanged"),
    rank: Mapping[str, int] = UPDATE_RANK,
) -> Steps[B]:
    """Run ``batch`` while it ends in a status of ``going``; the results merged into ``first``."""
    total = first
    while True:
        result = yield from batch()
        total = merged_batches(total, result, rank)
        if result.status not in going:
            return total


class StoredDocumentMemory(ModelMemory, CountsTokens, DeferredMemory):
    """One versioned document per namespace and key, updated by a model under a policy.

    Args:
        namespace: whose document this is: a tuple of labels (``("users", "maya")``)
            or the labels joined by ``"."``.
        key: the document's name within the namespace.
        url: the SQLAlchemy URL of the store; default: ``memories.db`` in the
            data directory (:mod:`memories.kernel.paths`), opened on the first use.
        policy: when the model updates the document; ``"background"`` runs it
            on the scheduler after ``debounce`` seconds of quiet.
        every_n: the queued turns per update under ``"every_n"``.
        instructions: extra guidance for the model.
        max_retries: how many times an invalid reply is sent back to the model.
        max_turns_per_update: the most queued turns one model call sees.
        memory_key: the prompt variable the document fills.
        input_key, output_key: the chain input and output to learn from
            (default: the only one).
        return_messages: give ``[SystemMessage]`` instead of a string.

    The model's, the scheduler's and the counter's arguments (``llm``,
    ``llm_timeout``, ``debounce``, ``scheduler``, ``token_counter``) are
    :class:`~memories.core.parts.ModelMemory`'s, ``DeferredMemory``'s and
    ``CountsTokens``'.
    """

    namespace: NamespaceField = ("default",)
    key: str = Field(default="document", min_length=1)
    url: str = Field(default_factory=default_url)
    policy: str = "manual"
    every_n: int = Field(default=3, gt=0)
    instructions: str | None = None
    max_retries: int = Field(default=2, ge=0)
    max_turns_per_update: int = Field(default=10, gt=0)
    memory_key: str = Field(default="document", min_length=1)
    input_key: str | None = None
    output_key: str | None = None
    return_messages: bool = False

    _store: ProfileStore = PrivateAttr()
    #: Documents of one type in one store are told apart by their key.
    data_name_field: ClassVar[str] = "key"
    #: The store class the documents live in (a subclass may add reads of its own).
    store_class: ClassVar[type[ProfileStore]] = ProfileStore
    #: Whose rows in the store these documents are: memories of other kinds on the same
    #: database never see, write or delete them (:mod:`memories.stores.documents`).
    #: None: the class's ``config_type``; a subclass that shares its parent's rows keeps it.
    store_owner: ClassVar[str | None] = None
    #: The policies that update after every saved turn.
    each_turn: ClassVar[tuple[str, ...]] = ("turn", "background")

    def model_post_init(self, context: Any, /) -> None:
        self._counter  # noqa: B018  (resolved now: a bad counter fails here)
        self._store = self._make_store()
        self._caller  # noqa: B018  (resolved now: a missing provider package fails here)

    def _make_store(self) -> ProfileStore:
        """The store the documents live in (built once, at construction)."""
        return self.store_class(self.url, owner=self.store_owner or self.config_type)

    def _spending_database(self) -> Database | None:
        """The store's database: a budget's spending is kept beside the documents."""
        return self._store.database

    @property
    def ledger(self) -> ProfileStore:
        """The store the document (its versions, its queued turns) lives in."""
        return self._store

    def _queueing(self, turn: list[BaseMessage], *, due: bool = False) -> Steps[None]:
        """Queue a turn; update when ``due``, on every turn or every ``every_n`` (:attr:`policy`).

        In background mode the scheduler updates after the quiet period instead.
        """
        store, ns, key = self._store, self.namespace, self.key
        yield step(store.add_pending, ns, key, turn)
        if self._in_background and self._background.schedule():
            return
        if (due or self.policy in self.each_turn) or (
            self.policy == "every_n" and (yield step(store.count_pending, ns, key)) >= self.every_n
        ):
            yield from self._forming()

    def _showing(self, inputs: Mapping[str, Any]) -> Steps[str]:
        """The steps that read the text the prompt gets for ``inputs`` (the subclass's)."""
        raise NotImplementedError(f"{type(self).__name__} must define _showing()")

    def _prompt_value(self, text: str) -> str | list[BaseMessage]:
        """``text`` as the prompt gets it: a string, or one system message (none when empty)."""
        if self.return_messages:
            return [SystemMessage(text)] if text else []
        return text

    # -- LangChain's interface, written once for the three ------------------------

    @property
    def memory_variables(self) -> list[str]:
        """The prompt variables this memory fills: ``[memory_key]``."""
        return [self.memory_key]

    def check_turn(self, inputs: Any, outputs: Any) -> None:
        """Raise what :meth:`save_context` would raise for this turn, writing nothing."""
        turn_messages_for(self, inputs, outputs)

    def _save_context_steps(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> Steps[None]:
        """Queue the turn (durable when this returns), then update if the policy says so.

        A failing model never raises here: the failure is recorded (``status()``)
        and the turn stays queued for the next update.
        """
        yield from self._queueing(turn_messages_for(self, inputs, outputs))

    save_context, asave_context = twins(_save_context_steps)

    def _load_memory_variables_steps(self, inputs: dict[str, Any]) -> Steps[dict[str, Any]]:
        """``{memory_key: what the document shows for the input}``."""
        return {self.memory_key: self._prompt_value((yield from self._showing(inputs)))}

    load_memory_variables, aload_memory_variables = twins(_load_memory_variables_steps)

    def _refresh_steps(self) -> Steps[Any]:
        """The steps of one update from the queued turns (the subclass's model loop)."""
        raise NotImplementedError(f"{type(self).__name__} must define _refresh_steps()")

    def _forming(self) -> Steps[Any]:
        """The update a policy starts: none while the budget is spent (the turns stay queued).

        The budget may run out between the look here and the call (another
        process took the last one): the refused call defers the update too,
        recorded as no failure.
        """
        waits = self._deferred_reason()
        if waits is None:
            try:
                return (yield from self._refresh_steps())
            except BudgetExceededError as exc:
                waits = str(exc)
        logger.info(
            "%s %r in %r: update deferred: %s", self.config_type, self.key, self.namespace, waits
        )
        return None

    def _failing(self, turns: Sequence[PendingTurn], error: str, raw: Sequence[str]) -> Steps[None]:
        """Record a failed update in the history (its turns stay queued) and log it."""
        store, ns, key = self._store, self.namespace, self.key
        yield step(store.record_failure, ns, key, error=error, raw=raw, turns=turns)
        logger.warning(
            "%s %r in %r was not updated from %d queued item(s), kept for the next update: %s",
            *(self.config_type, key, ns, len(turns), error),
        )

    def _writing_document(self, plan: Plan, expected: int | None = None) -> Steps[int]:
        """Write the document ``plan`` makes from the stored one, if still at ``expected``."""
        plan = expecting(
            plan, expected, f"The {self.config_type} {self.key!r} in {self.namespace!r}"
        )
        return version_of((yield from self._store.writing(self.namespace, self.key, plan)))

    def _committing_many(
        self,
        commits: list[tuple[str, Change, int]],
        turns: Sequence[PendingTurn] = (),
        also: Also | None = None,
    ) -> Steps[list[ProfileItem | None] | None]:
        """Commit changes of several keys all or none, dropping the queued ``turns`` they fold in.

        Returns what was written, or None when a key moved on (a conflict: read again).
        """
        written: list[ProfileItem | None] | None = yield step(
            self._store.commit_many,
            self.namespace,
            commits,
            drop_key=self.key,
            drop_ids=[t.id for t in turns],
            also=also,
        )
        return written

    def _standing(self) -> Steps[tuple[Standing, dict[str, Any]]]:
        """The document's standing, and the fields every status of it shows."""
        standing = yield from self._store.standing(self.namespace, self.key)
        last = standing.failure
        return standing, {
            "model": self.model_usage(),
            "pending": standing.pending,
            "failures": 1 if last is not None else 0,
            "last_error": last.error if last is not None else None,
            "background": self._background_status(),
        }

    def _clear_steps(self) -> Steps[None]:
        """Empty the document and drop its queued turns, as a recorded change.

        The history keeps every version (and the dropped turns), so a
        rollback can bring one back. To erase the document and its history
        for good, use ``memory.store.delete(namespace, key)``.
        """
        if self._in_background:
            self._background.cancel()
        yield from self._store.clearing(self.namespace, self.key)

    clear, aclear = twins(_clear_steps)

    def erasure_shares(self, *, session: bool, namespace: bool) -> list[StoreShare]:
        """Every key of the namespace in the store, every version, when erasing a namespace."""
        found = super().erasure_shares(session=session, namespace=namespace)
        if namespace:
            store, labels = self._store, self.namespace
            found.append(
                StoreShare(
                    # Named by its tables, not its class: a graph's store is a profile store.
                    f"profile store {redacted(store.url)!r}, namespace {'.'.join(labels)}",
                    lambda: store.held(labels),
                    lambda: store.erase_namespace(labels),
                    compactions(store.database),
                )
            )
        return found

    # -- background policy ------------------------------------------------------

    @property
    def _in_background(self) -> bool:
        return self.policy == "background"

    def usage_namespace(self) -> str:
        """The namespace, ``"users.maya"``: its calls are counted and budgeted under it."""
        return namespace_text(self.namespace)

    def _background_key(self) -> Hashable:
        """The document, not this object: two memories on one document share one job."""
        return (self.config_type, self.url, self.namespace, self.key)

    def _background_job(self) -> None:
        result = run(self._forming())
        logger.debug(
            "%s %r in %r: background update %s", self.config_type, self.key, self.namespace, result
        )


class ExpiringDocumentMemory(StoredDocumentMemory, Sweeps):
    """A stored document that may expire: ``ttl`` minutes after its last write (or read).

    Expired, the document reads as empty at once (the schema's initial
    document; compare-and-set writes still hold, as after a clear) and
    :meth:`sweep` (``memories sweep``, and a background memory after each
    update) deletes it with every version and its queued turns. Its expiry
    row is written in the same transaction as the document
    (:class:`~memories.stores.documents.ttl.DocumentTTL`), in
    ``memories_document_expiry`` on ``url``.

    Args:
        ttl: minutes a new document lives after its last write (a stored one
            keeps its own rule: a write restarts it); None: forever.
        refresh_on_read: a read (``get``, ``load_memory_variables``, an
            update's read) starts the time again.
        clock: the time expiry is reckoned with (Unix seconds; tests inject one).
    """

    ttl: float | None = Field(default=None, gt=0)
    refresh_on_read: bool = False
    clock: Callable[[], float] = Field(default=time.time, exclude=True)

    @property
    def store(self) -> ProfileStore:
        """The store the document lives in (:attr:`ledger`)."""
        return self._store

    @cached_property
    def expiry(self) -> ExpiryLedger:
        """When documents of this store expire (one table, every namespace and key)."""
        return ExpiryLedger(self.url, table=DOCUMENTS)

    def _make_store(self) -> ProfileStore:
        if self.ttl is None:
            return super()._make_store()
        ttl = DocumentTTL(self.expiry, self.ttl, self.refresh_on_read, self.clock)
        return self.store_class(self.url, ttl=ttl, owner=self.store_owner or self.config_type)

    def expired_items(
        self, namespace: Namespace | None = None, /, *, limit: int | None = None, offset: int = 0
    ) -> list[Expiring]:
        """This memory's documents that read as cleared now: expired, not swept yet (few).

        Those of ``namespace`` (None: every namespace of the store), a page of
        ``limit`` from ``offset`` when given; none without ``ttl`` (its reads
        then show every document). Tools that read the store themselves (the
        inspector) leave these out too.
        """
        if self.ttl is None:
            return []
        return self.expiry.expired(
            now=self.clock(), namespace=namespace, key=self.key, limit=limit, offset=offset
        )

    aexpired_items: ClassVar = blocking_twin(expired_items)

    def expired_counts(self, namespace: Namespace | None = None, /) -> dict[Namespace, int]:
        """How many of :meth:`expired_items` each namespace holds (0 or 1): one aggregate query."""
        if self.ttl is None:
            return {}
        return self.expiry.expired_counts(now=self.clock(), namespace=namespace, key=self.key)

    aexpired_counts: ClassVar = blocking_twin(expired_counts)

    def sweep(
        self, *, batch: int = 500, dry_run: bool = False, own: bool = False
    ) -> dict[str, int]:
        """Delete every expired document of the store (every namespace, every version).

        With ``own``, only this memory's namespace. Returns how many went per
        namespace; with ``dry_run`` it only counts. A crash mid-way leaves the
        rest to the next sweep.
        """
        only = self.namespace if own else None
        return self.expiry.sweep(
            self._expire, now=self.clock(), batch=batch, dry_run=dry_run, namespace=only
        )

    def _expire(self, namespace: Namespace, expired: list[Expiring], now: float) -> None:
        """Delete expired documents with their history and queue, and their expiry rows.

        In one transaction, and only while its row is still expired: a
        document written since the sweep read its row is kept.
        """
        self._store.delete_expired(namespace, [e.key for e in expired], self.expiry, now=now)

    def _background_job(self) -> None:
        super()._background_job()
        # The namespace's own expired document goes after its update (bounded to it).
        now = self.clock()
        expired = self.expiry.expired(now=now, namespace=self.namespace, limit=100)
        if expired:
            self._expire(self.namespace, expired, now)
