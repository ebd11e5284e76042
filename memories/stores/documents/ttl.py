"""How long a profile store's documents live: the ``ttl`` of a profile, of instructions."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from memories.kernel.namespaces import Namespace
from memories.stores.expiry import OWN, ExpiryLedger, Rule, Stamp

if TYPE_CHECKING:
    from memories.stores.documents import ProfileItem

__all__ = ["DocumentTTL"]


@dataclass(frozen=True)
class DocumentTTL:
    """How long a store's documents live after their last write (a profile's ``ttl``).

    A store given one writes each expiry row in its commit's transaction, and shows
    an expired document as cleared (its version kept, so compare-and-set holds)
    until a sweep deletes it. A document's time to live is its own: a commit gives
    :attr:`minutes` to a new document (or one expired) and restarts an existing
    one's own rule (:data:`~memories.stores.expiry.OWN`), so one saved without a
    time to live stays permanent whatever a later writer's ``ttl``.
    """

    ledger: ExpiryLedger
    """Where the expiry times are (:data:`~memories.stores.expiry.DOCUMENTS`)."""
    minutes: float
    """How long a new document lives after its last write."""
    refresh_on_read: bool
    """Whether a load of a live document starts its time again."""
    clock: Callable[[], float]
    """The time expiry is reckoned with (Unix seconds)."""

    def stamping(self, namespace: Namespace, keys: Sequence[str], anew: Collection[str]) -> Stamp:
        """The expiry rows of a commit of ``keys``, for its transaction (``anew``: the new
        or expired documents, which get :attr:`minutes`)."""
        ttls: dict[str, Rule] = {key: self.minutes if key in anew else OWN for key in keys}
        return self.ledger.stamping(namespace, ttls, now=self.clock())

    def expired(self, namespace: Namespace, keys: Sequence[str]) -> list[str]:
        """Those of ``keys`` whose document has expired (and was not swept yet)."""
        found = self.ledger.expired(now=self.clock(), namespace=namespace, keys=keys)
        return [e.key for e in found]

    def shown(self, item: ProfileItem | None) -> ProfileItem | None:
        """``item`` as a load shows it: cleared once expired; its time refreshed if asked."""
        if item is None or item.value is None:
            return item
        expired = self.ledger.expired_on_read(
            item.namespace, item.key, now=self.clock(), refresh=self.refresh_on_read
        )
        return replace(item, value=None) if expired else item
