"""The embedding layer in the core: which ``Embeddings`` a memory uses, resolved in one place.

A memory that embeds (vector recall today; example selection and memory
collections next) takes ``embeddings=`` as a LangChain ``Embeddings`` object,
as ``"module:attr"`` naming a class (or object) to build, or None for the
default: MiniLM, bundled and offline (:mod:`memories.integrations.minilm`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from langchain_core.embeddings import Embeddings

from memories.errors import ConfigError
from memories.kernel.accounting import Call, measured
from memories.kernel.imports import import_path
from memories.kernel.lru import LRU
from memories.kernel.steps import Steps, step

__all__ = [
    "cosine",
    "default_embeddings",
    "embedding_batch",
    "resolve_embeddings",
]


def default_embeddings() -> Embeddings:
    """The default embeddings: MiniLM, int8 weights and activations (docs/performance.md)."""
    from memories.integrations.minilm import MiniLMEmbeddings

    return MiniLMEmbeddings(int8_activations=True)


def resolve_embeddings(spec: Embeddings | str | None, /) -> Embeddings:
    """The ``Embeddings`` that ``spec`` names: itself, ``"module:attr"`` built, or the default.

    Raises:
        ConfigError: the import path cannot be imported, or does not give an ``Embeddings``.
        MissingDependencyError: it names a module of ours whose extra is not installed.
    """
    if spec is None:
        return default_embeddings()
    if isinstance(spec, Embeddings):
        return spec
    target: Any = import_path(spec, what="embeddings")
    built = target() if callable(target) else target
    if not isinstance(built, Embeddings):
        raise ConfigError(f"embeddings {spec!r} gave {built!r:.80}, not a LangChain Embeddings.")
    return built


def embedding_batch(embedder: Embeddings, size: int, /) -> AbstractContextManager[Call]:
    """One embedding call of ``size`` texts, counted and traced (GenAI ``embeddings``)."""
    names = (getattr(embedder, attribute, None) for attribute in ("model_name", "model", "name"))
    name = next((n for n in names if isinstance(n, str) and n), type(embedder).__name__)
    attributes = {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.request.model": name,
        "memories.batch_size": size,
    }
    return measured("embedding", f"embeddings {name}", attributes)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors (0.0 when either is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


# The process's last query embeddings (a few hundred KB at 384 floats each): a chain's input
# is often embedded more than once (the memory's load, a tool's search, the LangGraph
# store's search of several namespaces with one query, a collection's duplicate check after
# its search, an example selector's diversity pass). Keyed by the embedder object itself,
# which an entry holds, so that another embedder never gets its vectors.
_query_vectors: LRU[tuple[int, str], tuple[Embeddings, list[float]]] = LRU(256, locked=True)


def query_vector(embedder: Embeddings, text: str, /) -> Steps[list[float]]:
    """``text`` embedded as a query by ``embedder``: a step on first use, then from the cache."""
    found = _query_vectors.get((id(embedder), text))
    if found is not None and found[0] is embedder:
        return found[1]
    with embedding_batch(embedder, 1):
        vector = yield step(embedder.embed_query, text)
    _query_vectors.put((id(embedder), text), (embedder, vector))
    return vector
