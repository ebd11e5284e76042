"""Where memories keep files when the user gives no path: a data and a cache directory.

Constructing a memory writes nothing; files a memory creates with no path
given go to :func:`data_dir` (``$MEMORIES_DATA_DIR``, else the platform's user
data folder), never the working directory; what can be rebuilt (a rewritten
model) goes to :func:`cache_dir`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["CACHE_DIR_ENV", "DATA_DIR_ENV", "cache_dir", "data_dir", "default_file"]

#: The environment variable that moves the data directory.
DATA_DIR_ENV = "MEMORIES_DATA_DIR"
#: The environment variable that moves the cache directory (``off``: keep no cache).
CACHE_DIR_ENV = "MEMORIES_CACHE_DIR"


def data_dir() -> Path:
    """The folder default files live in (not created here: the first write creates it)."""
    return _user_folder(DATA_DIR_ENV, "XDG_DATA_HOME", (".local", "share"), "Application Support")


def cache_dir() -> Path | None:
    """The folder of files that can be rebuilt: ``$MEMORIES_CACHE_DIR``, else the platform's
    user cache folder (``~/.cache/memories`` on Linux); None when the variable is ``off``."""
    chosen = _user_folder(CACHE_DIR_ENV, "XDG_CACHE_HOME", (".cache",), "Caches", "Cache")
    return None if str(chosen) == "off" else chosen


def _user_folder(env: str, xdg: str, linux: tuple[str, ...], macos: str, windows: str = "") -> Path:
    chosen = os.environ.get(env)
    if chosen:
        return Path(chosen).expanduser()
    home = Path.home()
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local"
        return Path(local, "memories", windows)
    if sys.platform == "darwin":
        return home / "Library" / macos / "memories"
    return Path(os.environ.get(xdg) or home.joinpath(*linux)) / "memories"


def default_file(name: str) -> str:
    """The path of a default file (or folder) in :func:`data_dir`, as a string."""
    return str(data_dir() / name)
