"""LangChain's ``VectorStoreRetrieverMemory``, with its arguments and its document format.

Each run becomes one ``"key: value"`` line per input (less the memory key and
``exclude_input_keys``) and per output. With ``retriever=`` the backend is
:class:`~memories.stores.vector.langchain_backend.VectorStoreBackend`, doing what
LangChain's class does (``add_documents``, then ``retriever.invoke(input)``); without,
a :class:`~memories.long_term.vector.VectorMemory` writing LangChain's document format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from langchain_core.vectorstores import VectorStoreRetriever
from pydantic import Field, PrivateAttr

from memories.core.base import BaseMemory
from memories.errors import ConfigError, InvalidInputError
from memories.kernel.capabilities import Capabilities
from memories.long_term.vector.memory import VectorMemory
from memories.long_term.vector.turns import TurnParts
from memories.stores.vector.backend import VectorBackend
from memories.stores.vector.langchain_backend import VectorStoreBackend

__all__ = ["VectorStoreRetrieverMemory"]


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

    def _turn_parts(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> TurnParts:
        """LangChain's document text: ``"key: value"`` lines for the inputs, then the outputs."""
        BaseMemory.check_turn(self, inputs, outputs)  # two dicts, as any memory takes
        exclude = {*self.exclude_input_keys, self.memory_key}
        kept = [(k, v) for k, v in inputs.items() if k not in exclude]
        for key, value in [*kept, *outputs.items()]:
            if not isinstance(value, str):
                raise InvalidInputError(
                    f"{key!r} is {value!r:.80}; VectorStoreRetrieverMemory stores text, so pass "
                    "a string (str(value) if a number is meant)."
                )
        return TurnParts(
            "\n".join(f"{k}: {v}" for k, v in kept),
            "\n".join(f"{k}: {v}" for k, v in outputs.items()),
        )

    def _import_backend(self) -> None:
        if self.retriever is None:
            super()._import_backend()

    def _make_backend(self) -> VectorBackend:
        if self.retriever is None:
            return super()._make_backend()
        return VectorStoreBackend(self.retriever, written=self._written)
