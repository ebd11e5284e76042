"""Bytes slow to derive, kept in :func:`~memories.kernel.paths.cache_dir` whole or not at all.

A file is the bytes then their sha256, written under a temporary name and renamed, so a
process starting beside the writer reads all of it or none; one failing its check is
derived again; a folder that cannot be written only means deriving in every process.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable

from memories.kernel.paths import cache_dir

__all__ = ["cached_bytes"]

logger = logging.getLogger(__name__)
_DIGEST = hashlib.sha256().digest_size


def cached_bytes(name: str, derive: Callable[[], bytes], /) -> bytes:
    """The bytes cached under ``name`` if a whole, unaltered copy is there, else ``derive()``'s,
    then cached. ``name`` must change whenever what ``derive`` would return does."""
    folder = cache_dir()
    if folder is None:
        return derive()
    path = folder / name
    try:
        stored = memoryview(path.read_bytes())
    except OSError:  # not cached yet, or unreadable: derive it
        stored = memoryview(b"")
    body = stored[:-_DIGEST]
    if len(stored) > _DIGEST and hashlib.sha256(body).digest() == stored[-_DIGEST:]:
        return bytes(body)
    if stored:
        logger.warning("cache file %s failed its sha256 check; deriving it again", path)
    data = derive()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
                out.write(hashlib.sha256(data).digest())
            os.replace(temporary, path)
        finally:
            with contextlib.suppress(FileNotFoundError):  # left only when the write failed
                os.unlink(temporary)
    except OSError as exc:
        logger.info("cannot cache %s in %s (%s); it is derived in every process", name, folder, exc)
    return data
