"""The library's exceptions, one tree.

Each class subclasses the closest builtin so that existing ``except ValueError``
or ``except KeyError`` clauses in user code keep working::

    MemoriesError                      (Exception)
    ├── ConfigError                    (+ ValueError)   a config names a bad type or option
    ├── MissingDependencyError         (+ ImportError)  an optional extra is not installed
    ├── InvalidInputError              (+ ValueError)   a turn's inputs or outputs are unusable
    │   ├── MissingKeyError            (+ KeyError)     an input/output key is absent
    │   ├── InvalidProfileError                         a document or patch would break a profile
    │   └── VersionConflictError                        a write expected a version since replaced
    ├── ModelFileError                 (+ RuntimeError) a bundled model file is missing or corrupt
    ├── BackendError                   (+ RuntimeError) a history / vector / profile store failed
    │   └── BackendUnavailableError                     the store cannot be reached at all
    └── LLMError                       (+ RuntimeError) an LLM call failed or gave junk
        └── BudgetExceededError                         a namespace's model budget is spent

Backend and LLM errors are raised ``from`` the original exception, so the
cause is always in the traceback.
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "BackendUnavailableError",
    "BudgetExceededError",
    "ConfigError",
    "InvalidInputError",
    "InvalidProfileError",
    "LLMError",
    "MemoriesError",
    "MissingDependencyError",
    "MissingKeyError",
    "ModelFileError",
    "VersionConflictError",
]


class MemoriesError(Exception):
    """Base class of every error raised by this library."""


class ConfigError(MemoriesError, ValueError):
    """A configuration names an unknown type, a bad option or a bad value."""


class MissingDependencyError(MemoriesError, ImportError):
    """An optional dependency is not installed; the message names the pip command."""

    def __init__(self, feature: str, pip_command: str) -> None:
        super().__init__(f"{feature} needs an optional dependency: run `{pip_command}`.")
        self.feature = feature
        self.pip_command = pip_command


class InvalidInputError(MemoriesError, ValueError):
    """The inputs or outputs of a turn cannot be stored (wrong type, None, ambiguous keys)."""


class MissingKeyError(InvalidInputError, KeyError):
    """An input or output key that the memory needs is absent."""

    def __str__(self) -> str:
        # KeyError.__str__ would wrap the message in quotes.
        return str(self.args[0]) if self.args else ""


class InvalidProfileError(InvalidInputError):
    """A document or JSON patch would make a profile invalid, or cannot be applied to it."""


class VersionConflictError(InvalidInputError):
    """A write expected an item at a version it has moved past: read it again, then decide."""


class ModelFileError(MemoriesError, RuntimeError):
    """A bundled model or tokenizer file is missing, or its hash does not match."""


class BackendError(MemoriesError, RuntimeError):
    """A storage backend (SQL database, Chroma) failed."""


class BackendUnavailableError(BackendError):
    """A storage backend cannot be reached at all (server down, file not writable)."""


class LLMError(MemoriesError, RuntimeError):
    """A language model call raised, timed out, or returned unusable output."""


class BudgetExceededError(LLMError):
    """A namespace has spent its model budget this period; no call is made (formation waits)."""
