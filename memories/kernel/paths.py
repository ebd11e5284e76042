"""Where memories keep data when the user gives no path: one data directory.

Constructing a memory writes nothing; a memory's first write creates its
files, and, unless a path, URL or folder is given, they live in
:func:`data_dir`: ``$MEMORIES_DATA_DIR`` when set, else the platform's user
data folder (``~/.local/share/memories`` on Linux, ``~/Library/Application
Support/memories`` on macOS, ``%LOCALAPPDATA%\\memories`` on Windows). The
working directory is never written to by default.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["DATA_DIR_ENV", "data_dir", "default_file"]

#: The environment variable that moves the data directory.
DATA_DIR_ENV = "MEMORIES_DATA_DIR"


def data_dir() -> Path:
    """The folder default files live in (not created here: the first write creates it)."""
    chosen = os.environ.get(DATA_DIR_ENV)
    if chosen:
        return Path(chosen).expanduser()
    home = Path.home()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    return base / "memories"


def default_file(name: str) -> str:
    """The path of a default file (or folder) in :func:`data_dir`, as a string."""
    return str(data_dir() / name)
