"""For runnable scripts (``examples/``): a missing extra ends them with one line, not a traceback.

``with needs("agents"): from langchain.agents import create_agent``, or around the call that
builds a memory whose extra the library imports late: without the extra the script stops
with one line on stderr naming the command that installs it from the checkout (the
distribution is not on the package registry yet), status 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from memories.errors import MissingDependencyError
from memories.kernel.imports import missing_requirements

__all__ = ["checkout_install_command", "needs"]


def checkout_install_command(extras: tuple[str, ...], /) -> str:
    """The command that installs ``extras`` from a checkout of the repository."""
    return f"pip install -e '.[{','.join(extras)}]'"


def _missing(extras: tuple[str, ...], why: str) -> SystemExit:
    named = " and ".join(extras)
    plural = "s" if len(extras) > 1 else ""
    return SystemExit(
        f"This script needs the {named} extra{plural} ({why}): run "
        f"`{checkout_install_command(extras)}` in the repository's checkout."
    )


@contextmanager
def needs(*extras: str) -> Iterator[None]:
    """Exit with one line naming the install command when an extra is missing.

    Checked on entry (the library's metadata) and for any import that fails inside.

    Raises:
        SystemExit: an extra is missing; its message is the one line.
        ConfigError: the library has no extra of that name.
    """
    absent = [name for extra in extras for name in missing_requirements(extra)]
    if absent:
        raise _missing(extras, f"{', '.join(absent)} not installed")
    try:
        yield
    except MissingDependencyError as exc:
        raise _missing(extras, f"{exc.feature} could not import its dependencies") from None
    except ImportError as exc:
        raise _missing(extras, str(exc)) from None
