"""JSON read from outside, bounded: how deep it nests, and no lone surrogate in its text.

Python's parser reads a 64 KiB body nested 30,000 deep into a RecursionError,
and a ``"\\ud800"`` escape into a string no database or page can encode. The
faces that read JSON from a client (the inspector's API, the MCP frames) check
both here, in one place, and refuse with a message naming the problem.
"""

from __future__ import annotations

import json
from typing import Any

from memories.errors import InvalidInputError

__all__ = ["lone_surrogate", "read_json"]


def _scan(value: Any) -> tuple[int, str | None]:
    """How deep ``value`` nests (a scalar: 0; ``[]``: 1) and its first lone surrogate (keys
    too), in one walk without recursion: only containers go on the stack."""
    if not isinstance(value, dict | list):
        at = lone_surrogate(value)
        return 0, None if at is None else value[at]
    deepest, surrogate, stack = 0, None, [(value, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        for child in (*node, *node.values()) if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                stack.append((child, level + 1))
            elif surrogate is None and (at := lone_surrogate(child)) is not None:
                surrogate = child[at]
    return deepest, surrogate


def lone_surrogate(text: Any, /) -> int | None:
    """Where ``text``'s first lone surrogate is, a character no store or page can encode
    (None: a string without one, or not a string)."""
    if not isinstance(text, str) or text.isascii():
        return None
    try:
        text.encode("utf-8")  # in C: a lone surrogate is the one thing it refuses
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def read_json(text: str | bytes, *, what: str, max_nesting: int) -> Any:
    """``text`` parsed, nesting at most ``max_nesting`` levels, its strings real text.

    Raises:
        InvalidInputError: not JSON, nested deeper, or holding a lone surrogate;
            the message names ``what`` and the problem.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        value, deep, surrogate = None, True, None
    except ValueError as exc:
        raise InvalidInputError(f"{what} is not JSON: {exc}.") from None
    else:
        depth, surrogate = _scan(value)
        deep = depth > max_nesting
    if deep:
        raise InvalidInputError(f"{what} nests deeper than {max_nesting} levels; send it flatter.")
    if surrogate is not None:
        raise InvalidInputError(
            f"{what} holds a lone surrogate (U+{ord(surrogate):04X}), which is not text: send "
            "UTF-8, or a character outside the BMP as a surrogate pair."
        )
    return value
