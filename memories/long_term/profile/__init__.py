"""Profile memory: one JSON document per user, kept current by a model through JSON patches.

A profile is read with one key lookup, so it is cheap to show in every prompt.
It changes only through RFC 6902 patches validated against the schema before
anything is stored; every accepted change is kept with its patch and the turns
that caused it. The update cycle and large profiles: docs/memories/profile.md.
"""

from __future__ import annotations

from memories.long_term.profile.memory import ProfileMemory, ProfileStatus
from memories.long_term.profile.schema import ProfileSchema
from memories.long_term.profile.update import UpdateResult
from memories.stores.documents import (
    BaseProfileStore,
    PendingTurn,
    ProfileChange,
    ProfileItem,
    ProfileStore,
)

__all__ = [
    "BaseProfileStore",
    "PendingTurn",
    "ProfileChange",
    "ProfileItem",
    "ProfileMemory",
    "ProfileSchema",
    "ProfileStatus",
    "ProfileStore",
    "UpdateResult",
]
