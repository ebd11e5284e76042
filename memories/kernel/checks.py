"""Argument checks written once: a whole number, a positive number, a non-empty string.

Each returns the value it was given, or raises ``error`` (``ConfigError`` for a
constructor's argument, ``InvalidInputError`` for a call's) naming the argument,
what it must be (``hint``: its unit or what else it may be) and the bad value. A
bool is never a number here, though Python counts ``True`` as an ``int``.
"""

from __future__ import annotations

from typing import Any

from memories.errors import ConfigError, MemoriesError

__all__ = ["non_empty_text", "positive_number", "whole_number"]


def whole_number(
    value: Any,
    name: str,
    /,
    *,
    least: int = 0,
    hint: str = "",
    error: type[MemoriesError] = ConfigError,
) -> int:
    """``value`` if it is an int of at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        hint = f" ({hint})" if hint else ""
        raise error(f"{name} must be a whole number >= {least}{hint}, got {value!r:.80}.")
    return value


def positive_number(
    value: Any,
    name: str,
    /,
    *,
    hint: str = "",
    error: type[MemoriesError] = ConfigError,
) -> float:
    """``value`` if it is an int or a float above 0 (not NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        hint = f" ({hint})" if hint else ""
        raise error(f"{name} must be a number > 0{hint}, got {value!r:.80}.")
    return value


def non_empty_text(value: Any, name: str, /, *, error: type[MemoriesError] = ConfigError) -> str:
    """``value`` if it is a string with at least one character."""
    if not isinstance(value, str) or not value:
        raise error(f"{name} must be a non-empty string, got {value!r:.80}.")
    return value
