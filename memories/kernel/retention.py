"""How long raw history is kept: the one retention policy value (:class:`Retention`).

A memory over a chat history takes ``retention={"keep_days": 7}`` or
``{"keep_messages": 200}`` (or both: whichever expires more). Messages past it
are invisible to every read at once and deleted by a sweep; what was derived
from them (a running summary, a profile, a collection) stays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memories.errors import ConfigError
from memories.kernel.checks import positive_number, whole_number
from memories.kernel.steps import blocking_twin

__all__ = ["DAY", "Retention", "Sweeps"]

#: Seconds in a day: ``keep_days`` is counted in these.
DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class Retention:
    """How much raw history a memory keeps (at least one of the two is set)."""

    keep_days: float | None = None
    """Messages written more than this many days ago expire (fractions allowed)."""
    keep_messages: int | None = None
    """Only the newest this many messages of a session are kept (edit records not counted)."""

    def __post_init__(self) -> None:
        days, count = self.keep_days, self.keep_messages
        if days is None and count is None:
            raise ConfigError(
                "A retention needs keep_days or keep_messages (or both), e.g. {'keep_days': 7}."
            )
        if days is not None:
            positive_number(days, "retention keep_days", hint="days")
        if count is not None:
            whole_number(count, "retention keep_messages", least=1)

    @classmethod
    def of(cls, value: Any, /) -> Retention | None:
        """A retention from its config form (a dict), itself, or None (keep everything).

        Raises:
            ConfigError: ``value`` is not one of those, or names an unknown key.
        """
        if value is None or isinstance(value, Retention):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"retention must be a dict such as {{'keep_days': 7}} or {{'keep_messages': 100}}, "
                f"got {value!r:.80}."
            )
        unknown = set(value) - {"keep_days", "keep_messages"}
        if unknown:
            raise ConfigError(
                f"retention takes keep_days and keep_messages, not {', '.join(sorted(unknown))}."
            )
        return cls(**value)

    def cutoff(self, now: float, /) -> float | None:
        """The time before which messages expire (None: no time limit)."""
        return None if self.keep_days is None else now - self.keep_days * DAY

    def to_config(self) -> dict[str, Any]:
        """The dict :meth:`of` reads back."""
        options = {"keep_days": self.keep_days, "keep_messages": self.keep_messages}
        return {name: value for name, value in options.items() if value is not None}


class Sweeps:
    """Keeps data that expires: :meth:`sweep` deletes it, :meth:`asweep` on a worker thread."""

    def sweep(
        self, *, batch: int = 500, dry_run: bool = False, own: bool = False
    ) -> dict[str, int]:
        """Delete what has expired (``own``: only this memory's); how many went, per owner."""
        raise NotImplementedError(f"{type(self).__name__} must define sweep()")

    asweep = blocking_twin(sweep)
