"""What a request may send the inspector: whole numbers in ASCII digits, JSON bounded.

``str.isdigit`` takes ``"²"`` (which ``int`` refuses) and ``"٣"`` (which ``int`` reads as 3):
a page, a ``k`` or a version is read here, from ASCII digits only.
"""

from __future__ import annotations

from typing import Any

from memories.errors import InvalidInputError
from memories.kernel.bounded_json import read_json

__all__ = ["MAX_NESTING", "json_value", "whole_number"]

#: How deep a JSON body or document sent to the inspector may nest.
MAX_NESTING = 64


def whole_number(value: Any, name: str, *, lowest: int = 0, highest: int | None = None) -> int:
    """``value`` (an int, or text of ASCII digits) as a whole number from ``lowest`` to ``highest``.

    Raises:
        InvalidInputError: anything else, naming ``name`` and the value given.
    """
    if isinstance(value, str) and value.isascii() and value.isdigit():
        number: int | None = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        number = None
    if number is None or number < lowest or (highest is not None and number > highest):
        bounds = f"from {lowest} to {highest}" if highest is not None else f"from {lowest} up"
        raise InvalidInputError(
            f"{name} must be a whole number {bounds} (digits 0-9), got {value!r:.40}."
        )
    return number


def json_value(text: str | bytes, what: str) -> Any:
    """``text`` parsed as JSON, at most :data:`MAX_NESTING` deep, with no lone surrogate."""
    return read_json(text, what=what, max_nesting=MAX_NESTING)
