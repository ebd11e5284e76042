"""One versioned document per namespace, updated by a model: store, clearing, background job.

A profile (facts about a user) and an agent's instructions are both one
document per namespace and key in a :class:`~memories.profile.store.ProfileStore`
(compare-and-set writes, every version in the history, queued turns), updated
by a model under a policy. This part holds the fields and the plumbing they
share; a subclass says what the document is and how the model updates it
(``_refreshing``).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any

from pydantic import Field, PrivateAttr

from memories.kernel.parts import CountsTokens, DeferredMemory, ModelMemory
from memories.kernel.steps import Steps, arun, run
from memories.namespaces import NamespaceField
from memories.profile.store import ProfileStore, default_url

__all__ = ["StoredDocumentMemory"]

logger = logging.getLogger(__name__)


class StoredDocumentMemory(ModelMemory, CountsTokens, DeferredMemory):
    """One versioned document per namespace and key, updated by a model under a policy.

    Args:
        namespace: whose document this is: a tuple of labels (``("users", "maya")``)
            or the labels joined by ``"."``.
        key: the document's name within the namespace.
        url: the SQLAlchemy URL of the store; default: ``memories.db`` in the
            data directory (:mod:`memories.paths`), opened on the first use.
        policy: when the model updates the document; ``"background"`` runs it
            on the scheduler after ``debounce`` seconds of quiet.
    """

    namespace: NamespaceField = ("default",)
    key: str = Field(default="document", min_length=1)
    url: str = Field(default_factory=default_url)
    policy: str = "manual"

    _store: ProfileStore = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._counter  # noqa: B018  (resolved now: a bad counter fails here)
        self._store = ProfileStore(self.url)
        self._caller  # noqa: B018  (resolved now: a missing provider package fails here)

    @property
    def ledger(self) -> ProfileStore:
        """The store the document (its versions, its queued turns) lives in."""
        return self._store

    def _refreshing(self) -> Steps[Any]:
        """The steps of one update from the queued turns (the subclass's model loop)."""
        raise NotImplementedError(f"{type(self).__name__} must define _refreshing()")

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

    # -- background policy ------------------------------------------------------

    @property
    def _in_background(self) -> bool:
        return self.policy == "background"

    def _background_key(self) -> Hashable:
        """The document, not this object: two memories on one document share one job."""
        return (self.config_type, self.url, self.namespace, self.key)

    def _background_job(self) -> None:
        result = run(self._refreshing())
        logger.debug(
            "%s %r in %r: background update %s", self.config_type, self.key, self.namespace, result
        )
