"""Where profiles live: a store base in the shape of LangGraph's ``BaseStore``, and SQL under it.

:class:`BaseProfileStore` writes every public method (``get``, ``put``,
``delete``, ``search``, ``list_namespaces`` as in LangGraph, and the profile's
own: ``commit``, ``changes``, the pending queue) and the compare-and-set write
loop once, on top of one abstract :meth:`~BaseProfileStore.batch`. Two
processes updating one profile never lose each other's work.

:class:`ProfileStore` keeps profiles in any SQL database (SQLite by default),
in three tables beside the histories' and on the same engine: the current
documents, every change, the queued turns. Memories that share the database
own their rows there: a store sees, writes and deletes only its ``owner``'s.
A namespace is a tuple of labels (:mod:`memories.kernel.namespaces`), stored
joined by ``"."``.

The package: :mod:`.records` (documents, changes, operations), :mod:`.base`
(the store base), :mod:`.sql` (``ProfileStore``), :mod:`.tables` (the SQL
tables and who owns each row), :mod:`.ttl` (items' expiry).
"""

from __future__ import annotations

from memories.kernel.namespaces import Namespace
from memories.stores.documents.base import BaseProfileStore
from memories.stores.documents.records import (
    MAX_WRITE_TRIES,
    Change,
    KeyCount,
    Op,
    PendingTurn,
    Plan,
    ProfileChange,
    ProfileItem,
    check_version,
    current,
    default_url,
    expecting,
    patching,
    replacing,
    version_of,
)
from memories.stores.documents.sql import ProfileStore

__all__ = [
    "MAX_WRITE_TRIES",
    "BaseProfileStore",
    "Change",
    "KeyCount",
    "Namespace",
    "Op",
    "PendingTurn",
    "Plan",
    "ProfileChange",
    "ProfileItem",
    "ProfileStore",
    "check_version",
    "current",
    "default_url",
    "expecting",
    "patching",
    "replacing",
    "version_of",
]
