"""The inspector's own refusals: what it does not hold, and writes asked of it read-only."""

from __future__ import annotations

__all__ = ["NotFound", "ReadOnly"]


class NotFound(KeyError):
    """An id, a namespace or a session the config's stores do not hold."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


class ReadOnly(PermissionError):
    """A write asked of an inspector opened read-only."""

    def __str__(self) -> str:
        return (
            "This inspector is read-only: start it with --allow-writes (Inspector(..., "
            "allow_writes=True)) to edit, delete, roll back or retry."
        )
