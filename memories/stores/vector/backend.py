"""The vector backend protocol: where a vector memory's documents live and how they are found.

A memory turns chain runs into documents and results into prompt text; everything
between is its backend's (Chroma's, pgvector's, a LangChain ``VectorStore``'s), one per
memory. Each async twin runs its sync method on a worker thread unless overridden.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from memories.kernel.steps import blocking_twin
from memories.stores.compaction import Compaction
from memories.stores.expiry import ExpiryLedger
from memories.stores.vector.outbox import DeadLetter, OutboxRow
from memories.stores.vector.records import SearchResult
from memories.stores.vector.writes import VectorStatus

__all__ = ["VectorBackend", "VectorQuery"]


@dataclass(frozen=True)
class VectorQuery:
    """A validated search request."""

    text: str
    """The text to match."""
    k: int | None
    """How many results; None: the backend's default (the memory's ``k``, or the retriever's)."""
    where: dict[str, Any] | None
    """A metadata filter in the backend's syntax (:meth:`VectorBackend.check_filter`)."""


class VectorBackend(ABC):
    """The documents of one namespace of one store, as one memory (and session) sees them."""

    #: Where the documents are, for messages (``"Chroma at ./memories-chroma"``).
    location: str
    #: Whether search scores are calibrated (:mod:`memories.stores.recall.scores`): comparable
    #: across queries and namespaces, so that a ``min_score`` means something.
    calibrated_scores: ClassVar[bool] = False
    #: The expiry rows of the memory's documents (a vector or example memory sets it):
    #: a deletion discards the rows of what it deleted. None: no rows to keep in step.
    expiry: ExpiryLedger | None = None

    @abstractmethod
    def save(self, row: OutboxRow) -> None:
        """Store one conversation turn (the backend may number it in its session and queue it)."""

    asave = blocking_twin(save)

    @abstractmethod
    def add(self, rows: Sequence[OutboxRow], *, progress: bool) -> None:
        """Store many documents (bulk import), showing a progress bar if asked."""

    aadd = blocking_twin(add)

    @abstractmethod
    def search(self, query: VectorQuery) -> list[SearchResult]:
        """The documents that best match ``query``, best first."""

    asearch = blocking_twin(search)

    @abstractmethod
    def delete(self, ids: Sequence[str] | None, where: Mapping[str, Any] | None) -> None:
        """Delete documents by id, by filter, or both (AND); never all of them at once."""

    adelete = blocking_twin(delete)

    def delete_expired(
        self, namespace: tuple[str, ...], ids: Sequence[str], expiry: ExpiryLedger, *, now: float
    ) -> list[str]:
        """Delete those of ``ids`` still expired at ``now`` with their expiry rows; return them.

        A document written again since the sweep read it is kept
        (:meth:`ExpiryLedger.sweeping`). A backend whose writes or :meth:`delete` touch
        the expiry rows' database overrides this to delete in the sweep's transaction.
        """
        with expiry.sweeping(namespace, ids, expired_at=now) as held:
            if held:
                self.delete(held, None)
        return held

    def _discard_expiry(self, namespace: tuple[str, ...], ids: Sequence[str] | None) -> None:
        """Discard the expiry rows of documents just deleted (``ids``; None: the namespace's).

        After the deletion: a crash between leaves rows the sweep drops, deleting nothing.
        """
        if self.expiry is not None and (ids is None or ids):
            self.expiry.discard(namespace, ids)

    @abstractmethod
    def forget_session(self) -> None:
        """Delete what this memory's session wrote (a memory's ``clear()``)."""

    aforget_session = blocking_twin(forget_session)

    @abstractmethod
    def erase_namespace(self) -> None:
        """Delete every document of the namespace, every session's."""

    aerase_namespace = blocking_twin(erase_namespace)

    def held(self, *, session: bool) -> dict[str, int]:
        """What :meth:`erase_namespace` (or, with ``session``, :meth:`erase_session`) deletes,
        by kind, for erasing a person (:func:`memories.erase_user`)."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot count what it holds of one person, so it cannot "
            "be erased by erase_user; delete its documents in the store itself."
        )

    def erase_session(self) -> None:
        """Delete every trace of this memory's session (queued and set-aside copies too)."""
        self.forget_session()

    def compactions(self) -> tuple[Compaction, ...]:
        """The files or databases :meth:`erase_namespace` and :meth:`erase_session` delete
        from, rewritten after an erasure (:mod:`memories.stores.compaction`); none here."""
        return ()

    aerase_session = blocking_twin(erase_session)

    def get(self, ids: Sequence[str]) -> list[SearchResult]:
        """The documents with these ids, in that order (unknown ids left out)."""
        raise NotImplementedError(f"{type(self).__name__} cannot read documents by id.")

    aget = blocking_twin(get)

    def find(self, where: Mapping[str, Any]) -> list[SearchResult]:
        """The documents whose metadata matches ``where``, queued ones included."""
        raise NotImplementedError(f"{type(self).__name__} cannot read documents by filter.")

    afind = blocking_twin(find)

    def documents(self) -> list[SearchResult]:
        """Every document of the namespace, queued ones written first (export)."""
        raise NotImplementedError(f"{type(self).__name__} cannot list its documents.")

    adocuments = blocking_twin(documents)

    def stored(self) -> list[SearchResult]:
        """Every document written to the store, writing nothing (the inspector): as
        :meth:`documents` for a backend that never queues."""
        return self.documents()

    astored = blocking_twin(stored)

    def count(self) -> int:
        """How many documents the namespace holds, queued ones included."""
        raise NotImplementedError(f"{type(self).__name__} cannot count its documents.")

    acount = blocking_twin(count)

    def namespaces(self) -> dict[str, int | None]:
        """Every namespace key of the store (not only the memory's) holding documents, with
        its count (None: unknown)."""
        raise NotImplementedError(f"{type(self).__name__} cannot list its namespaces.")

    def vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The embeddings of the documents with these ids (for diversity ranking)."""
        raise NotImplementedError(f"{type(self).__name__} does not give out embeddings.")

    avectors = blocking_twin(vectors)

    def dead_letters(self) -> list[DeadLetter]:
        """Documents set aside because the store refused them (a backend that never does: none)."""
        return []

    def retry_dead_letters(self, ids: Sequence[str] | None = None) -> int:
        """Queue set-aside documents again and write them; return how many."""
        return 0

    def bookkeeping(self, *, turn: bool) -> dict[str, Any]:
        """Metadata the backend keeps on each new document (a turn, or a bulk one) for its recall.

        The memory's own metadata goes under it and the caller's over it.
        """
        return {}

    def check_filter(self, where: Mapping[str, Any]) -> None:  # noqa: B027  (optional hook)
        """Raise :class:`~memories.errors.InvalidInputError` for a filter this backend refuses.

        By default every filter goes to the store as it is, in the store's syntax.
        """

    def flush(self, *, timeout: float | None = None) -> bool:
        """Write what is queued; True once nothing waits (a backend that never queues: at once)."""
        return True

    aflush = blocking_twin(flush)

    def close(self, *, timeout: float | None = None) -> bool:
        """:meth:`flush`, and write synchronously from now on."""
        return self.flush(timeout=timeout)

    def pending(self) -> int:
        """How many documents wait to be written."""
        return 0

    def status(self) -> VectorStatus:
        """Where the writes stand; a backend that never queues has nothing pending."""
        return VectorStatus(write="sync")
