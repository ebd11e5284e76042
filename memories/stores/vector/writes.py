"""Writing queued documents to the vector store: one lane per namespace, one background writer.

A *drain* embeds what waits in the outbox and writes it to Chroma, holding its
namespace's :class:`WriteLane`; the process's :func:`background_writer` drains for
background saves (a burst in one drain), and is flushed at exit (:data:`EXIT_FLUSH_SECONDS`).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

from memories.errors import ConfigError
from memories.kernel.background import Debouncer, MemoryStatus, describe_error
from memories.stores.vector.pending import PendingDocuments

__all__ = [
    "EXIT_FLUSH_SECONDS",
    "VectorStatus",
    "WriteLane",
    "WriteMode",
    "WriteModeField",
    "background_writer",
    "progress_bar",
    "write_lane",
]

logger = logging.getLogger(__name__)

WriteMode = Literal["sync", "background"]


def _check_write_mode(value: Any) -> Any:
    if value not in ("sync", "background"):
        raise ConfigError(f"write must be 'sync' or 'background', got {value!r}.")
    return value


#: A model field holding a write mode, refused with a ConfigError naming the bad value.
WriteModeField = Annotated[WriteMode, BeforeValidator(_check_write_mode)]
#: How long interpreter exit, and ``close()`` when not told, wait for background writes.
EXIT_FLUSH_SECONDS = 10.0


@dataclass(frozen=True)
class VectorStatus(MemoryStatus):
    """Where a vector memory's writes stand.

    ``pending`` counts the documents of the namespace waiting in the outbox
    (queued or failed); ``last_error`` is the last failed write of the
    namespace, until one works (``failures`` is then 1).
    """

    write: WriteMode = "background"
    """The memory's write mode."""
    failed_at: float | None = None
    """When the last write failed (seconds since the epoch), else None."""
    dead_letters: int = 0
    """Documents set aside: the store or the embedder refused them (``dead_letters()``)."""


class WriteLane:
    """The writes of one namespace of one store: serialised, with their last failure."""

    def __init__(self, outbox: str) -> None:
        self.outbox = outbox
        """Where the namespace's documents wait (:attr:`SQLOutbox.where`), for messages."""
        self.lock = threading.Lock()
        """Held by a drain for its whole run."""
        self.error: BaseException | None = None
        """The last drain's failure, until a drain succeeds."""
        self.failed_at: float | None = None
        """When it failed."""
        self.wrote_at = float("-inf")
        """When a drain last wrote documents to the store (``time.monotonic()``)."""
        self.proven = False
        """Whether a drain has written documents in this process (background saves wait for it)."""
        self.pending = PendingDocuments()
        """Its documents this process queued and the store does not have yet."""

    def failed(self, error: BaseException) -> None:
        """Record a failed drain."""
        self.error, self.failed_at = error, time.time()

    def succeeded(self, *, wrote: bool = False) -> None:
        """Record a drain that wrote everything it found (``wrote``: and found something)."""
        self.error, self.failed_at = None, None
        if wrote:
            self.wrote_at = time.monotonic()
            self.proven = True

    @property
    def last_error(self) -> str | None:
        """The last failure as ``"ExceptionType: message"``, or None."""
        return None if self.error is None else describe_error(self.error)


# Weak: a lane lives while a memory holds it (a queued write holds its memory), no longer.
_lanes: weakref.WeakValueDictionary[tuple[str, str, str], WriteLane] = weakref.WeakValueDictionary()
_lanes_lock = threading.Lock()


def write_lane(target: str, namespace: str, outbox: str) -> WriteLane:
    """The process's lane for a namespace of a store (see :attr:`ChromaStore.target`).

    ``outbox`` is in the key: copies of a store's folder share a target, not a queue.
    A namespace used again after its memories were dropped gets a new lane; its pending
    documents left then wait in the outbox until a write takes them.
    """
    with _lanes_lock:
        lane = _lanes.get((target, namespace, outbox))
        if lane is None:
            lane = _lanes[(target, namespace, outbox)] = WriteLane(outbox)
        return lane


_writer: Debouncer | None = None
_writer_lock = threading.Lock()


def background_writer() -> Debouncer:
    """The process's background writer of vector documents.

    Its own thread (a summary's LLM call on the shared one would hold writes up for
    seconds); when 1,000 namespaces wait already, a new one drains in the caller's.
    """
    global _writer
    with _writer_lock:
        if _writer is None or _writer.closed:
            _writer = Debouncer(
                delay=0.0,
                max_wait=0.0,
                max_pending=1000,
                when_full="run_inline",
                name="memories-vector-writes",
            )
        return _writer


def _flush_at_exit() -> None:
    """Write what the background writer has queued; say once where what it could not write waits."""
    writer = _writer
    if writer is None or writer.closed or writer.flush(timeout=EXIT_FLUSH_SECONDS):
        return
    with _lanes_lock:
        outboxes = sorted({lane.outbox for lane in _lanes.values()})
    logger.warning(
        "Background vector writes still running after %.0f s at exit; the documents not "
        "written wait in the outbox (%s) and are written by the next process that uses them.",
        EXIT_FLUSH_SECONDS,
        ", ".join(outboxes),
    )


def _register_exit_flush() -> None:
    """Flush the writer at exit while worker pools still take work.

    ``atexit`` runs after ``concurrent.futures``' pools shut down, so an embedder's pool
    (MiniLM's) would refuse the writes; ``threading``'s exit hooks run in reverse order,
    so one registered after ``concurrent.futures.thread``'s runs first.
    """
    import concurrent.futures.thread  # noqa: F401  (its exit hook must be registered first)

    getattr(threading, "_register_atexit", atexit.register)(_flush_at_exit)


_register_exit_flush()


@contextmanager
def progress_bar(total: int | None) -> Iterator[Callable[[int], object]]:
    """A progress bar for storing ``total`` documents (None: no bar), as its ``update``."""
    if total is None:
        yield lambda done: None
        return
    from tqdm.auto import tqdm

    bar: Callable[..., Any] = tqdm
    with bar(total=total, unit="doc", desc="Storing") as shown:
        yield shown.update
