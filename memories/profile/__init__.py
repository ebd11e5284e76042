"""Profile memory: one JSON document per user, kept current by a model through JSON patches.

See :mod:`memories.profile.memory` for the update cycle and how large
profiles are handled, and :mod:`memories.profile.store` for the storage.
"""

from __future__ import annotations

from memories.profile.memory import ProfileMemory, ProfileStatus, UpdateResult
from memories.profile.schema import ProfileSchema
from memories.profile.store import PendingTurn, ProfileChange, ProfileItem, ProfileStore

__all__ = [
    "PendingTurn",
    "ProfileChange",
    "ProfileItem",
    "ProfileMemory",
    "ProfileSchema",
    "ProfileStatus",
    "ProfileStore",
    "UpdateResult",
]
