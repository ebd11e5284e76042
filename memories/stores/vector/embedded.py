"""What a document is embedded as: its text, and a turn's input part beside it.

A turn ``save_context`` stores is ``"input: ...\\noutput: ..."``, and an
embedder reads a bounded window (MiniLM: 256 word pieces): a turn with a long
reply was embedded from its first sentences, the user's words a small part of
them. A turn's vector is the mean of its whole text's and its input part's
(the text before ``output_at``, which the turn's metadata keeps), both from
the one batch call that embeds the write. On LongMemEval_S dev filled with
``save_context`` (``benchmarks/recall_datasets.py``), hit@3 86.7 -> 90.0; the
input part alone also gives 90.0, but drops the reply from the dense side,
and MiniLM's windows pooled give 83.3.

The decision reads only what an outbox row holds (text and metadata): a row
queued before a crash, by an older version, or re-imported, is embedded as it
would have been when saved, and no second text is stored anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

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
    """The embeddings of ``(text, metadata)`` documents, from one batch call of ``embedder``."""
    parts = [embedded_texts(text, metadata) for text, metadata in documents]
    texts = [text for texts in parts for text in texts]
    with embedding_batch(embedder, len(texts)):
        vectors = yield step(embedder.embed_documents, texts)
    if len(vectors) != len(texts):
        raise BackendError(f"The embedder gave {len(vectors)} embeddings for {len(texts)} texts.")
    found = iter(vectors)
    return [list(next(found)) if len(p) == 1 else _mean([next(found) for _ in p]) for p in parts]


def _mean(vectors: Sequence[Sequence[float]]) -> list[float]:
    """The mean direction of ``vectors``, unit length (each counts alike, whatever its norm)."""
    total = [0.0] * len(vectors[0])
    for vector in vectors:
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        total = [t + x / norm for t, x in zip(total, vector, strict=True)]
    norm = math.sqrt(sum(t * t for t in total)) or 1.0
    return [t / norm for t in total]
