"""Profile memory: one JSON document per user, kept current by a model through JSON patches.

A profile is read with one key lookup, so it is cheap to show in every prompt.
It changes only through RFC 6902 patches that are applied to a copy and
validated against the schema before anything is stored; every accepted change
is kept with the patch and the turns that caused it, and can be rolled back.

The update cycle
----------------
``save_context`` queues the turn in the store (so a crash or a failing model
loses nothing), then the policy decides when the queued turns are folded in:
every turn, every ``every_n`` turns, in the background after a quiet period,
on demand with :meth:`ProfileMemory.refresh`, or ``once`` (the first accepted
document is frozen). An update shows the model the schema, the document and
the queued turns, and asks for patch operations (through a tool when the
model has tool calling, else as a bare JSON array). An invalid reply is sent
back with the error, up to ``max_retries`` times; if it is still invalid the
profile is kept, the failure is recorded with the model's replies, and the
turns stay queued for the next update.

Large profiles
--------------
When the document is over ``max_document_tokens``, it is split into sections
(top-level fields, and fields of objects that are themselves too large),
packed into as few groups as fit the budget. Each group gets its own model
call showing only that part, and may change only paths inside it. All groups
apply to one working copy that is validated as a whole; the update is kept
only if every group succeeds. A single value over budget (a long list) still
gets a call of its own, shown whole. For documents that keep growing, prefer
several named profiles (``key=``) in one namespace, each with its own schema.

Storage
-------
:class:`BaseProfileStore` (:mod:`memories.stores.documents`) is the store's
contract, in the shape of LangGraph's ``BaseStore``: a backend implements
``batch`` (and ``abatch`` when it has native async); :class:`ProfileStore`
is the SQL one.
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
