"""Chroma as a document store: its three client modes, small namespaces in shared shards.

:class:`ChromaStore` is the only code that talks to Chroma: it opens a client
lazily (``"persistent"``, embedded and the default, ``"memory"`` or ``"http"`` to
``chroma run``), never lets Chroma embed with its default embedding function
(which downloads a model) and translates Chroma's, HTTP's and SQLite's errors into
:class:`~memories.errors.BackendError` and :class:`~memories.errors.BackendUnavailableError`.
"""

from __future__ import annotations

from memories.integrations.chroma.parts import (
    CHROMA_MODES,
    SHARDS,
    STORE_ID_FILE,
    ChromaMode,
    Demotion,
    LangChainEmbeddingFunction,
    StoredRecord,
    import_client_code,
)
from memories.integrations.chroma.store import ChromaStore

__all__ = [
    "CHROMA_MODES",
    "SHARDS",
    "STORE_ID_FILE",
    "ChromaMode",
    "ChromaStore",
    "Demotion",
    "LangChainEmbeddingFunction",
    "StoredRecord",
    "import_client_code",
]
