"""A stored time (Unix seconds) as the timezone-aware datetime the records give out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memories.errors import InvalidInputError

__all__ = ["aware", "utc"]


def utc(timestamp: float) -> datetime:
    """``timestamp`` (seconds since the epoch) as an aware datetime in UTC."""
    return datetime.fromtimestamp(timestamp, tz=UTC)


def aware(as_of: Any) -> datetime:
    """``as_of`` if it is a timezone-aware datetime, else InvalidInputError (naive is ambiguous)."""
    if not isinstance(as_of, datetime) or as_of.tzinfo is None:
        raise InvalidInputError(
            f"as_of must be a timezone-aware datetime (datetime.now(UTC)), got {as_of!r:.80}."
        )
    return as_of
