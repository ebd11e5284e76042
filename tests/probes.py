"""A fresh Python process run from a test: bounded in time, and its failure shows why.

``python("-c", CODE, *args)`` or ``python("-m", "memories.faces.cli", ...)``
runs this interpreter to its end with its output captured as text. Nothing
waits forever: past ``timeout`` seconds the child is killed and
``subprocess.TimeoutExpired`` is raised, noting what the child had written to
stderr. With ``check`` (the default) a non-zero exit fails the test with the
tail of the child's stderr and stdout (a ``CalledProcessError`` shows
neither). A test that expects a failing exit passes ``check=False``.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from os import PathLike
from typing import Any

#: How much of a child's stderr and stdout a failure shows (the end: where tracebacks are).
TAIL = 4000


def python(
    *argv: str,
    interpreter: str | PathLike[str] = sys.executable,
    cwd: str | PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float = 120,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``interpreter *argv`` (this test's Python unless told) and return what it did.

    Args:
        argv: what follows the interpreter: ``"-c", CODE, *args`` or ``"-m", MODULE, *args``.
        interpreter: another Python, such as a venv's.
        timeout: seconds before the child is killed and ``TimeoutExpired`` is raised.
        check: assert the exit status is 0, showing the child's stderr and stdout.
    """
    command = [str(interpreter), *argv]
    try:
        done = subprocess.run(
            command, cwd=cwd, env=env, input=input, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        exc.add_note(f"its stderr until then:\n{_tail(exc.stderr)}")
        raise
    if check:
        assert done.returncode == 0, (
            f"{_shown(command)} exited {done.returncode}\n"
            f"--- stderr ---\n{_tail(done.stderr)}\n--- stdout ---\n{_tail(done.stdout)}"
        )
    return done


@contextmanager
def killed_after(process: subprocess.Popen[Any], timeout: float = 120) -> Iterator[None]:
    """Kill ``process`` if it still runs ``timeout`` seconds on: a read of its pipes then ends.

    For a test that reads a ``Popen``'s pipes line by line (which no
    ``timeout=`` bounds): a hung child fails the test instead of holding it.
    """
    killer = threading.Timer(timeout, process.kill)
    killer.daemon = True
    killer.start()
    try:
        yield
    finally:
        killer.cancel()


def _tail(text: str | bytes | None) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text or ""
    return text if len(text) <= TAIL else "..." + text[-TAIL:]


def _shown(command: list[str]) -> str:
    """The command on one line, a long part (a ``-c`` program) cut to 80 characters."""
    parts = (part.replace("\n", "; ") for part in command)
    return " ".join(part if len(part) <= 80 else part[:77] + "..." for part in parts)
