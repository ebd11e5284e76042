"""A stored time (Unix seconds) as the timezone-aware datetime the records give out."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["utc"]


def utc(timestamp: float) -> datetime:
    """``timestamp`` (seconds since the epoch) as an aware datetime in UTC."""
    return datetime.fromtimestamp(timestamp, tz=UTC)
