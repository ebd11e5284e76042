"""What a document is embedded as: its text, and a turn's input part beside it.

An embedder reads a bounded window (MiniLM: 256 word pieces), so a turn's vector is
the mean direction of its whole text's and its input part's, decided from an outbox
row alone (a replayed or imported row embeds as when saved): docs/performance.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from memories.errors import BackendError
from memories.kernel.embeddings import embedding_batch
from memories.kernel.steps import Steps, step

__all__ = ["OUTPUT_AT_KEY", "Embeddable", "document_vectors", "embedded_texts"]

#: Metadata of a turn: where its output part starts in the document text.
OUTPUT_AT_KEY = "output_at"
#: A document as it is embedded: its text and its metadata.
Embeddable = tuple[str, Mapping[str, Any]]


def embedded_texts(text: str, metadata: Mapping[str, Any], /) -> tuple[str, ...]:
    """The texts whose embeddings make a document's: its text, and a turn's input part."""
    at = metadata.get(OUTPUT_AT_KEY)
    if type(at) is int and 1 < at < len(text) and text[at - 1] == "\n":
        return (text, text[: at - 1])
    return (text,)


def document_vectors(
    embedder: Embeddings, documents: Sequence[Embeddable], /
) -> Steps[list[list[float]]]:
    """The documents' embeddings (``list[list[float]]``), from one batch call of ``embedder``."""
    parts = [embedded_texts(text, metadata) for text, metadata in documents]
    texts = [text for texts in parts for text in texts]
    with embedding_batch(embedder, len(texts)):
        vectors = yield step(embedder.embed_documents, texts)
    widths = sorted({len(v) for v in vectors})
    if len(vectors) != len(texts) or len(widths) > 1:
        raise BackendError(
            f"The embedder gave {len(vectors)} embeddings of widths {widths} for {len(texts)} "
            "texts; nothing was stored."
        )
    found = iter(vectors)
    return [list(next(found)) if len(p) == 1 else _mean([next(found) for _ in p]) for p in parts]


def _mean(vectors: list[Sequence[float]]) -> list[float]:
    """The mean direction of ``vectors``, unit length: each counts alike, whatever its norm."""
    units = np.asarray(vectors, dtype=np.float64)
    mean = (units / np.maximum(np.linalg.norm(units, axis=1, keepdims=True), 1e-12)).sum(axis=0)
    return list((mean / max(float(np.linalg.norm(mean)), 1e-12)).tolist())
