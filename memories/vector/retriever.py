"""LangChain's ``VectorStoreRetrieverMemory``, with its arguments and its document format.

With ``retriever=`` it does exactly what LangChain's class does: each run
becomes one ``"key: value"`` line per input (less the memory key and
``exclude_input_keys``) and per output, stored with
``retriever.add_documents``; loading returns ``retriever.invoke(input)``.
Without a retriever it is a :class:`~memories.vector.VectorMemory` (Chroma,
hybrid recall, namespaces, outbox) that writes LangChain's document format.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStoreRetriever
from pydantic import Field, PrivateAttr

from memories.errors import ConfigError, InvalidInputError
from memories.kernel.capabilities import Capabilities
from memories.kernel.steps import Steps, arun, run, step
from memories.keys import select_input_key
from memories.vector.memory import VectorMemory
from memories.vector.records import SearchResult
from memories.vector.writes import VectorStatus

__all__ = ["VectorStoreRetrieverMemory"]

logger = logging.getLogger(__name__)


class VectorStoreRetrieverMemory(VectorMemory):
    """LangChain's vector store memory: a drop-in that also works without a retriever.

    Args:
        retriever: a LangChain ``VectorStoreRetriever``. When given, storing and
            loading go through it, as in LangChain. When omitted, documents go
            to this library's Chroma store (all of :class:`VectorMemory`'s
            arguments apply).
        exclude_input_keys: inputs not to store, besides the memory key.
        memory_key, input_key, return_docs: as in LangChain.
    """

    config_type: ClassVar[str] = "vector_store_retriever"
    capabilities: ClassVar[Capabilities] = Capabilities(
        scope="namespace", searchable=True, exportable=True, deferred=True
    )

    retriever: VectorStoreRetriever | None = Field(default=None, exclude=True)
    exclude_input_keys: Sequence[str] = ()

    _written: list[str] = PrivateAttr(default_factory=list)

    def to_config(self) -> dict[str, Any]:
        """A config that rebuilds this memory; a retriever object has none.

        Raises:
            ConfigError: a ``retriever`` is set.
        """
        if self.retriever is not None:
            raise ConfigError(
                "VectorStoreRetrieverMemory.retriever is a LangChain object, which has no config "
                "form; describe the store by config instead (mode, path, host, port, collection)."
            )
        return super().to_config()

    def _turn_text(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> str:
        """LangChain's document text: ``"key: value"`` lines for the inputs, then the outputs."""
        if not isinstance(inputs, Mapping) or not isinstance(outputs, Mapping):
            raise InvalidInputError(
                f"inputs and outputs must be dicts, got {type(inputs).__name__} and "
                f"{type(outputs).__name__}."
            )
        exclude = {*self.exclude_input_keys, self.memory_key}
        kept = [(k, v) for k, v in inputs.items() if k not in exclude]
        lines = [*kept, *outputs.items()]
        for key, value in lines:
            if not isinstance(value, str):
                raise InvalidInputError(
                    f"{key!r} is {value!r:.80}; VectorStoreRetrieverMemory stores text, so pass "
                    "a string (str(value) if a number is meant)."
                )
        return "\n".join(f"{k}: {v}" for k, v in lines)

    # -- through a LangChain retriever ------------------------------------------------

    def save_context(
        self,
        inputs: dict[str, Any],
        outputs: dict[str, Any],
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Store the run: through the retriever if there is one, else as :class:`VectorMemory`."""
        if self.retriever is None:
            return super().save_context(inputs, outputs, metadata=metadata)
        return run(self._adding(self._turn_text(inputs, outputs), metadata))

    async def asave_context(
        self,
        inputs: dict[str, Any],
        outputs: dict[str, Any],
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Async :meth:`save_context`."""
        if self.retriever is None:
            return await super().asave_context(inputs, outputs, metadata=metadata)
        return await arun(self._adding(self._turn_text(inputs, outputs), metadata))

    def _adding(self, text: str, metadata: Mapping[str, Any] | None) -> Steps[None]:
        """Add one document through the retriever, keeping its id so :meth:`clear` can delete it."""
        assert self.retriever is not None
        doc_id = uuid.uuid4().hex
        document = Document(page_content=text, metadata=dict(metadata or {}), id=doc_id)
        yield step(self.retriever.add_documents, [document], ids=[doc_id])
        self._written.append(doc_id)

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The documents relevant to the input, joined by newlines (or as ``Document`` objects)."""
        if self.retriever is None:
            return super().load_memory_variables(inputs)
        documents = self.retriever.invoke(self._retriever_query(inputs))
        return self._documents(documents)

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async :meth:`load_memory_variables`."""
        if self.retriever is None:
            return await super().aload_memory_variables(inputs)
        documents = await self.retriever.ainvoke(self._retriever_query(inputs))
        return self._documents(documents)

    def clear(self) -> None:
        """Delete the documents this memory wrote.

        With a ``retriever``, the documents this object added are deleted
        through the vector store's ``delete`` (their ids are kept as they are
        written); a store that cannot delete logs a warning and keeps them.
        LangChain's own ``clear`` silently does nothing.
        """
        if self.retriever is None:
            return super().clear()
        return run(self._deleting_written())

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        if self.retriever is None:
            return await super().aclear()
        return await arun(self._deleting_written())

    def _deleting_written(self) -> Steps[None]:
        assert self.retriever is not None
        store, ids = self.retriever.vectorstore, list(self._written)
        if not ids:
            return
        try:
            yield step(store.delete, ids)
        except NotImplementedError:
            logger.warning(
                "%s cannot delete documents; the %d this memory wrote are kept.",
                type(store).__name__,
                len(ids),
            )
            return
        del self._written[: len(ids)]

    def search(
        self, query: str, /, *, k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> list[SearchResult]:
        """As :meth:`VectorMemory.search`; not available with a ``retriever``."""
        self._no_retriever("search")
        return super().search(query, k=k, filter=filter)

    async def asearch(
        self, query: str, /, *, k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> list[SearchResult]:
        """Async :meth:`search`."""
        self._no_retriever("asearch")
        return await super().asearch(query, k=k, filter=filter)

    def add(self, texts: Sequence[str], /, **kwargs: Any) -> list[str]:
        """As :meth:`VectorMemory.add`; not available with a ``retriever``."""
        self._no_retriever("add")
        return super().add(texts, **kwargs)

    def delete(
        self, ids: Sequence[str] | None = None, /, *, filter: Mapping[str, Any] | None = None
    ) -> None:
        """As :meth:`VectorMemory.delete`; not available with a ``retriever``."""
        self._no_retriever("delete")
        super().delete(ids, filter=filter)

    def flush(self, *, timeout: float | None = None) -> bool:
        """As :meth:`VectorMemory.flush`; with a ``retriever`` nothing is ever queued."""
        return self.retriever is not None or super().flush(timeout=timeout)

    def status(self) -> VectorStatus:
        """As :meth:`VectorMemory.status`; not available with a ``retriever`` (it writes itself)."""
        self._no_retriever("status")
        return super().status()

    def _retriever_query(self, inputs: Mapping[str, Any]) -> Any:
        return inputs[select_input_key(inputs, self.memory_variables, self.input_key)]

    def _documents(self, documents: list[Document]) -> dict[str, Any]:
        if self.return_docs:
            return {self.memory_key: documents}
        return {self.memory_key: "\n".join(d.page_content for d in documents)}

    def _no_retriever(self, method: str) -> None:
        if self.retriever is not None:
            raise NotImplementedError(
                f"{type(self).__name__}.{method}() is not available with retriever=: a LangChain "
                "vector store cannot tell this memory's documents apart. Use the vector store "
                "directly, or build the memory without a retriever (Chroma, namespaced)."
            )
