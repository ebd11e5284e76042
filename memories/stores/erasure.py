"""What one store holds of one person, and how to count and erase it.

A memory names its stores as :class:`StoreShare` records (its history for a
session, a vector namespace, a ledger); :func:`memories.core.erasure.erase_user`
counts, erases and counts again through them. Each store module gives the two
primitives a share calls: one that counts what the store holds of a session
or a namespace, by kind, and one that erases exactly that; and it names the
files or databases those rows were in, to be compacted after.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memories.stores.compaction import Compaction

__all__ = ["Counts", "StoreShare"]

#: Rows (or documents) a store holds of one person, by kind (``{"chat log rows": 12}``).
Counts = dict[str, int]


@dataclass(frozen=True)
class StoreShare:
    """One store's part of a person's data: where it is, how to count it, how to erase it."""

    store: str
    """The store and the part of it, for a report (two equal ones are one share)."""
    count: Callable[[], Counts]
    """What the store holds of the person now, by kind (reads only)."""
    erase: Callable[[], None]
    """Erase it; running it again, or after a crash half-way, finishes the job."""
    files: tuple[Compaction, ...] = ()
    """The files or databases it deletes from, rewritten after the erasure
    (:mod:`memories.stores.compaction`) so that no byte of what went stays."""
