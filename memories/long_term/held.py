"""Which namespaces a long-term memory's store holds data in, whoever wrote them.

A memory is built on one namespace, and its store usually holds many (one per
user, from a config whose namespace is a template such as ``[users,
"{user_id}"]``). The inspector lists them, and the command line names them
when a command needs one; both read them here.
"""

from __future__ import annotations

from typing import Any

from memories.kernel.namespaces import Namespace, namespace_from_key
from memories.long_term.collection import CollectionMemory
from memories.long_term.entity_graph import EntityMemory
from memories.long_term.indexed import DocumentMemory
from memories.long_term.stored import StoredDocumentMemory
from memories.stores.entities.temporal_graph import ENTITY_PREFIX

__all__ = ["namespaces_held"]

#: Every namespace, for a listing that is not paged.
_ALL = 10**9


def namespaces_held(memory: Any, contains: str = "") -> dict[Namespace, int | None]:
    """The namespaces ``memory``'s store holds data in, each with its count (None: unknown).

    Only those whose labels, joined by ``"."``, contain ``contains``. A memory
    kept per session (a chat memory) holds no namespace: ``{}``.
    """

    def counted(prefix: str) -> dict[Namespace, int | None]:
        counts, _ = memory.ledger.key_namespaces(prefix, contains=contains, limit=_ALL)
        return {c.namespace: c.documents for c in counts}

    if isinstance(memory, CollectionMemory):
        return counted(memory.rows.prefix)
    if isinstance(memory, EntityMemory):  # a graph's count is its entities, not its head
        return {**dict.fromkeys(counted(memory.key), 0), **counted(ENTITY_PREFIX)}
    if isinstance(memory, StoredDocumentMemory):
        return counted(memory.key)
    if isinstance(memory, DocumentMemory):
        held = [(namespace_from_key(key), n) for key, n in memory.backend.namespaces().items()]
        return {namespace: n for namespace, n in held if contains in ".".join(namespace)}
    return {}
