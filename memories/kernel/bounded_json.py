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

__all__ = ["lone_surrogate", "nesting", "read_json"]


def nesting(value: Any) -> int:
    """How deep ``value`` nests (a scalar: 0; ``[]``: 1), walked without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, level + 1)
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, level + 1) for child in children)
    return deepest


def lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate in ``value``'s strings (keys too), if any."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str):
            found = next((c for c in node if "\ud800" <= c <= "\udfff"), None)
            if found is not None:
                return found
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
        value, deep = None, True
    except ValueError as exc:
        raise InvalidInputError(f"{what} is not JSON: {exc}.") from None
    else:
        deep = nesting(value) > max_nesting
    if deep:
        raise InvalidInputError(f"{what} nests deeper than {max_nesting} levels; send it flatter.")
    surrogate = lone_surrogate(value)
    if surrogate is not None:
        raise InvalidInputError(
            f"{what} holds a lone surrogate (U+{ord(surrogate):04X}), which is not text: send "
            "UTF-8, or a character outside the BMP as a surrogate pair."
        )
    return value
