"""A LangChain ``VectorStore`` as a vector backend, through its retriever.

As LangChain's ``VectorStoreRetrieverMemory``: a turn is one ``add_documents``, a search
``retriever.invoke``. The store is the user's: nothing is namespaced, numbered or queued.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStoreRetriever

from memories.errors import InvalidInputError
from memories.kernel.steps import Steps, step, twins
from memories.stores.vector.backend import VectorBackend, VectorQuery
from memories.stores.vector.embedded import OUTPUT_AT_KEY
from memories.stores.vector.outbox import OutboxRow
from memories.stores.vector.records import SearchResult

__all__ = ["VectorStoreBackend"]

logger = logging.getLogger(__name__)


class VectorStoreBackend(VectorBackend):
    """Documents in a LangChain vector store, found by its retriever.

    Args:
        retriever: the store's retriever (``store.as_retriever(...)``).
        written: the ids this memory added, appended to as it adds; what
            :meth:`forget_session` deletes.
    """

    def __init__(self, retriever: VectorStoreRetriever, *, written: list[str]) -> None:
        self.retriever = retriever
        self.written = written
        self.location = f"{type(retriever.vectorstore).__name__} (a LangChain vector store)"

    def _save_steps(self, row: OutboxRow) -> Steps[None]:
        """Add the turn with ``add_documents``, as LangChain's memory does."""
        yield from self._add_steps([row], progress=False)

    save, asave = twins(_save_steps)

    def _add_steps(self, rows: Sequence[OutboxRow], *, progress: bool) -> Steps[None]:
        """Add the documents in one ``add_documents`` call (the store batches as it does)."""
        documents = [Document(r.text, metadata=_kept(r.metadata), id=r.doc_id) for r in rows]
        ids = [r.doc_id for r in rows]
        yield step(self.retriever.vectorstore.add_documents, documents, ids=ids)
        self.written.extend(ids)

    add, aadd = twins(_add_steps)

    def _search_steps(self, query: VectorQuery) -> Steps[list[SearchResult]]:
        """``retriever.invoke(text)``, with ``k`` and ``filter`` only when the query gives them."""
        options: dict[str, Any] = {}
        if query.k is not None:
            options["k"] = query.k
        if query.where is not None:
            options["filter"] = query.where
        documents: list[Document] = yield step(self.retriever.invoke, query.text, **options)
        return [SearchResult(d.page_content, dict(d.metadata), 0.0, d.id or "") for d in documents]

    search, asearch = twins(_search_steps)

    def _delete_steps(
        self, ids: Sequence[str] | None, where: Mapping[str, Any] | None
    ) -> Steps[None]:
        """Delete by id with the store's ``delete``; a LangChain store has no delete by filter."""
        yield from self._deleting(ids, where, quiet=False)

    delete, adelete = twins(_delete_steps)

    def _forget_session_steps(self) -> Steps[None]:
        """Delete the documents this memory added (a store that cannot delete: warn, keep them)."""
        yield from self._deleting(list(self.written), None, quiet=True)

    forget_session, aforget_session = twins(_forget_session_steps)

    def _deleting(
        self, ids: Sequence[str] | None, where: Mapping[str, Any] | None, *, quiet: bool
    ) -> Steps[None]:
        if where is not None:
            raise InvalidInputError(
                "A LangChain vector store deletes by id only; give ids, not a filter."
            )
        if not ids:
            return
        store = self.retriever.vectorstore
        try:
            yield step(store.delete, list(ids))
        except NotImplementedError:
            if not quiet:
                raise
            logger.warning(
                "%s cannot delete documents; the %d this memory wrote are kept.",
                type(store).__name__,
                len(ids),
            )
            return
        gone = set(ids)
        self.written[:] = [i for i in self.written if i not in gone]

    def erase_namespace(self) -> None:
        """Not possible: a LangChain vector store does not know whose its documents are."""
        raise NotImplementedError(
            "A LangChain vector store has no namespaces: erase its documents through the store "
            "itself, or use the memory without a retriever (Chroma, namespaced)."
        )


def _kept(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """What the user's store keeps of a document's metadata: all but where its output starts.

    That mark is for our embedding; the store embeds the whole text itself, as LangChain's.
    """
    return {key: value for key, value in metadata.items() if key != OUTPUT_AT_KEY}
