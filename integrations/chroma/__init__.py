"""Chroma as a document store: its three client modes, small namespaces in shared shards.

:class:`ChromaStore` is the only code that talks to Chroma. It

- opens a client lazily in one of Chroma's modes: ``"persistent"``
  (``PersistentClient(path)``, embedded, the default), ``"memory"``
  (``EphemeralClient``, gone with the process) or ``"http"`` (``HttpClient``
  to a server started with ``chroma run``);
- keeps each namespace in one of two placements (:mod:`.store`), and stamps every
  document with its namespace (see :mod:`memories.stores.vector.filters`);
  every record it returns is checked to belong to the namespace asked for;
- never lets Chroma embed anything with its default embedding function (which
  downloads a model): collections get :class:`LangChainEmbeddingFunction`, and
  the store passes embeddings it was given;
- translates Chroma, HTTP and SQLite errors into :class:`~memories.errors.BackendError`
  and :class:`~memories.errors.BackendUnavailableError`, ``from`` the original.

The package: :mod:`.store` (the store and its placement rule), :mod:`.moves`
(promotion and demotion), :mod:`.parts` (settings, records, the embedding
function, client helpers).
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
