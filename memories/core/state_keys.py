"""Where a memory keeps its derived state: a key named by what the memory is.

The key is ``"{type}:{digest of _state_parameters()}"`` in the session's state
table, never the prompt variable (``memory_key``): renaming it keeps the
summary and the cursor. Releases up to 0.2 saved under
``"summary:history:<digest>"``; a memory whose key holds nothing looks once
for such a key and keeps using it, writing nothing to find it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from memories.stores.history.base import ChatHistory

__all__ = ["StateKeys", "earlier_key", "resolved_key", "state_key_of"]


def state_key_of(kind: str, parameters: Mapping[str, Any], /) -> str:
    """The key of the state of a memory of type ``kind`` shaped by ``parameters``."""
    shape = json.dumps(dict(parameters), sort_keys=True, default=str)
    digest = hashlib.sha1(shape.encode(), usedforsecurity=False).hexdigest()[:12]
    return f"{kind}:{digest}"


def earlier_key(keys: Sequence[str], key: str, memory_key: str, /) -> str | None:
    """The key among ``keys`` that an earlier release gave the state now under ``key``.

    That was ``"{type}:{memory_key}:{digest}"``, with any ``memory_key``: the
    one this memory has now is taken first, else the first in sorted order.
    """
    kind, _, digest = key.rpartition(":")
    earlier = [
        k
        for k in keys
        if k.startswith(f"{kind}:") and k.endswith(f":{digest}") and len(k) > len(key) + 1
    ]
    if not earlier:
        return None
    own = f"{kind}:{memory_key}:{digest}"
    return own if own in earlier else sorted(earlier)[0]


def resolved_key(history: ChatHistory, key: str, memory_key: str, /) -> str:
    """``key``, or the earlier key under which ``history`` keeps this memory's state."""
    try:
        keys = history.state_keys(key.rpartition(":")[0] + ":")
    except NotImplementedError:
        return key  # a backend that cannot list its states: the current key only
    if key in keys:
        return key
    return earlier_key(keys, key, memory_key) or key


class StateKeys:
    """A memory's state key, and where the history it uses now keeps its state."""

    def __init__(self, key: str, memory_key: str) -> None:
        self.key = key
        self.memory_key = memory_key
        self._found: tuple[ChatHistory | None, str | None, str] = (None, None, key)

    def of(self, history: ChatHistory, /) -> str:
        """The key of this memory's state in ``history`` (looked up once per history, session)."""
        found = self._found
        if found[0] is not history or found[1] != history.session_id:
            key = resolved_key(history, self.key, self.memory_key)
            found = self._found = (history, history.session_id, key)
        return found[2]
