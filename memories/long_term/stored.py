"""One versioned document per namespace, updated by a model: store, clearing, background job.

A profile (facts about a user) and an agent's instructions are both one
document per namespace and key in a :class:`~memories.stores.profile_store.ProfileStore`
(compare-and-set writes, every version in the history, queued turns), updated
by a model under a policy. This part holds the fields and the plumbing they
share; a subclass says what the document is and how the model updates it
(``_refreshing``).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

from langchain_core.messages import BaseMessage
from pydantic import Field, PrivateAttr

from memories.core.parts import CountsTokens, DeferredMemory, ModelMemory
from memories.kernel.keys import turn_messages_for
from memories.kernel.namespaces import NamespaceField, namespace_text
from memories.kernel.steps import Steps, arun, run
from memories.stores.erasure import StoreShare
from memories.stores.profile_store import ProfileStore, default_url
from memories.stores.sql import redacted

__all__ = ["StoredDocumentMemory"]

logger = logging.getLogger(__name__)


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
    """

    namespace: NamespaceField = ("default",)
    key: str = Field(default="document", min_length=1)
    url: str = Field(default_factory=default_url)
    policy: str = "manual"
    memory_key: str = Field(default="document", min_length=1)
    input_key: str | None = None
    output_key: str | None = None
    return_messages: bool = False

    _store: ProfileStore = PrivateAttr()
    #: The store class the documents live in (a subclass may add reads of its own).
    store_class: ClassVar[type[ProfileStore]] = ProfileStore

    def model_post_init(self, context: Any, /) -> None:
        self._counter  # noqa: B018  (resolved now: a bad counter fails here)
        self._store = self.store_class(self.url)
        self._caller  # noqa: B018  (resolved now: a missing provider package fails here)

    @property
    def ledger(self) -> ProfileStore:
        """The store the document (its versions, its queued turns) lives in."""
        return self._store

    def _queueing(self, turn: list[BaseMessage]) -> Steps[None]:
        """The steps that queue a turn and update if the policy says so (the subclass's)."""
        raise NotImplementedError(f"{type(self).__name__} must define _queueing()")

    def _showing(self, inputs: Mapping[str, Any]) -> Steps[Any]:
        """The steps that read what the prompt gets for ``inputs`` (the subclass's)."""
        raise NotImplementedError(f"{type(self).__name__} must define _showing()")

    # -- LangChain's interface, written once for the three ------------------------

    @property
    def memory_variables(self) -> list[str]:
        """The prompt variables this memory fills: ``[memory_key]``."""
        return [self.memory_key]

    def check_turn(self, inputs: Any, outputs: Any) -> None:
        """Raise what :meth:`save_context` would raise for this turn, writing nothing."""
        turn_messages_for(self, inputs, outputs)

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Queue the turn (durable when this returns), then update if the policy says so.

        A failing model never raises here: the failure is recorded (``status()``)
        and the turn stays queued for the next update.
        """
        run(self._queueing(turn_messages_for(self, inputs, outputs)))

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Async :meth:`save_context`: the same steps, awaited."""
        await arun(self._queueing(turn_messages_for(self, inputs, outputs)))

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """``{memory_key: what the document shows for the input}``."""
        return {self.memory_key: run(self._showing(inputs))}

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async :meth:`load_memory_variables`: the same steps, awaited."""
        return {self.memory_key: await arun(self._showing(inputs))}

    def _refreshing(self) -> Steps[Any]:
        """The steps of one update from the queued turns (the subclass's model loop)."""
        raise NotImplementedError(f"{type(self).__name__} must define _refreshing()")

    def _forming(self) -> Steps[Any]:
        """The update a policy starts: none while the budget is spent (the turns stay queued)."""
        waits = self._deferred_reason()
        if waits is not None:
            logger.info(
                "%s %r in %r: update deferred: %s",
                self.config_type,
                self.key,
                self.namespace,
                waits,
            )
            return None
        return (yield from self._refreshing())

    def _clearing(self) -> Steps[None]:
        if self._in_background:
            self._background.cancel()
        yield from self._store.clearing(self.namespace, self.key)

    def clear(self) -> None:
        """Empty the document and drop its queued turns, as a recorded change.

        The history keeps every version (and the dropped turns), so a
        rollback can bring one back. To erase the document and its history
        for good, use ``memory.store.delete(namespace, key)``.
        """
        run(self._clearing())

    async def aclear(self) -> None:
        """Async :meth:`clear`: the same steps, awaited."""
        await arun(self._clearing())

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
