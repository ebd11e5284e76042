"""Where memories keep files when the user gives no path: the data directory.

Constructing a memory writes nothing; files a memory creates with no path
given go to :func:`data_dir` (``$MEMORIES_DATA_DIR``, else the platform's user
data folder), never the working directory.
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
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local", "memories")
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "memories"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share") / "memories"


def default_file(name: str) -> str:
    """The path of a default file (or folder) in :func:`data_dir`, as a string."""
    return str(data_dir() / name)
