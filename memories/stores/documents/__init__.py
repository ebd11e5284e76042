"""The versioned document store: profiles, instructions, a collection's ledger, entity graphs.

:class:`BaseProfileStore` (:mod:`.base`, in the shape of LangGraph's ``BaseStore``)
writes every method and the compare-and-set write loop once over one abstract
``batch``, so two processes updating one document never lose each other's work.
:class:`ProfileStore` (:mod:`.sql`) keeps the documents in any SQL database; its
tables and who owns each row are in :mod:`.tables`, the records in :mod:`.records`,
the documents' expiry in :mod:`.ttl`.
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
