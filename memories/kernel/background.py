"""Debounced background jobs: run work for a key once things have gone quiet.

A memory that derives expensive state (a summary, a profile) schedules work
under the session's key after each turn; a new turn before the quiet period
ends replaces the pending job, so a burst costs one job. Jobs run on daemon
worker threads, never twice at once for a key; a failure is logged and counted
in :meth:`Debouncer.status`, never swallowed. A process that exits without
``close()`` drops pending jobs, which is safe: the turns are in the history
and the next turn schedules the work again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from typing import Any, ClassVar, Literal, Protocol, TypeVar

from memories.errors import MemoriesError
from memories.kernel.accounting import Accounts, ModelUsage, carried
from memories.kernel.checks import whole_number

__all__ = [
    "UPDATE_RANK",
    "BackgroundWork",
    "Debouncer",
    "JobStatus",
    "MemoryStatus",
    "WhenFull",
    "merged_batches",
    "shared_debouncer",
]

logger = logging.getLogger(__name__)

Job = Callable[[], object]
WhenFull = Literal["drop_oldest", "run_inline"]


@dataclass(frozen=True)
class JobStatus:
    """A snapshot of a :class:`Debouncer`'s counters."""

    pending: int
    """Jobs waiting for their quiet period (or for a worker)."""
    running: int
    """Jobs running now."""
    completed: int
    """Jobs that returned normally, since the debouncer was made."""
    failed: int
    """Jobs that raised (each one logged with its traceback)."""
    dropped: int
    """Pending jobs dropped because the queue was full (each one logged)."""
    last_error: str | None
    """``"key: ExceptionType: message"`` of the most recent failure, or None."""
    closed: bool
    """Whether :meth:`Debouncer.close` was called."""


@dataclass
class _Pending:
    job: Job
    due: float
    deadline: float
    """``due`` never moves past this, so a key that keeps getting turns still runs."""
    order: int


class Debouncer:
    """Runs one job per key after a quiet period, on background worker threads.

    Args:
        delay: the quiet period in seconds after the last :meth:`schedule` of a key.
        max_wait: the longest a job waits from the first schedule of its key,
            however often it is rescheduled (default ``10 * delay``).
        max_pending: how many keys may have a pending job; past it, ``when_full``
            decides: ``"drop_oldest"`` drops the job scheduled first, with a
            warning (a memory reschedules it on its session's next turn, so no
            turn is lost); ``"run_inline"`` runs the new job in the caller's thread.
        workers: worker threads; a key never runs on two at once.
        name: the threads' name prefix, seen in logs and debuggers.
    """

    def __init__(
        self,
        *,
        delay: float = 1.0,
        max_wait: float | None = None,
        max_pending: int = 1000,
        when_full: WhenFull = "drop_oldest",
        workers: int = 1,
        name: str = "memories-background",
    ) -> None:
        for what, seconds in (("delay", delay), ("max_wait", max_wait)):
            number = isinstance(seconds, int | float) and not isinstance(seconds, bool)
            if seconds is not None and not (number and 0 <= seconds < float("inf")):
                raise ValueError(f"{what} must be a number of seconds >= 0, got {seconds!r:.80}")
        whole_number(max_pending, "max_pending", least=1)
        whole_number(workers, "workers", least=1)
        if when_full not in ("drop_oldest", "run_inline"):
            raise ValueError(f"when_full must be 'drop_oldest' or 'run_inline', got {when_full!r}")
        self.delay = delay
        self.max_wait = 10 * delay if max_wait is None else max_wait
        self.max_pending = max_pending
        self.when_full: WhenFull = when_full
        self.workers = workers
        self.name = name
        self._pending: dict[Hashable, _Pending] = {}
        self._running: set[Hashable] = set()
        self._threads: list[threading.Thread] = []
        self._changed = threading.Condition()
        self._order = 0
        self._completed = self._failed = self._dropped = 0
        self._last_error: str | None = None
        self._closed = False

    def schedule(
        self,
        key: Hashable,
        job: Job,
        /,
        *,
        delay: float | None = None,
        max_wait: float | None = None,
    ) -> None:
        """Run ``job`` once ``key`` has been quiet for ``delay`` seconds.

        A pending job of ``key`` is replaced, keeping its ``max_wait`` deadline; a
        running one is not interrupted (the new one runs after it). ``delay`` and
        ``max_wait`` override the debouncer's for this job (``delay`` alone: ten times it).

        Raises:
            RuntimeError: the debouncer is closed.
        """
        now = time.monotonic()
        quiet = self.delay if delay is None else delay
        default_wait = self.max_wait if delay is None else 10 * quiet
        longest = default_wait if max_wait is None else max_wait
        inline = False
        with self._changed:
            if self._closed:
                raise RuntimeError(
                    f"{self!r} is closed; make a new Debouncer or run the job directly."
                )
            entry = self._pending.get(key)
            if entry is not None:
                entry.job = job
                entry.due = min(now + quiet, entry.deadline)
            elif len(self._pending) >= self.max_pending and self.when_full == "run_inline":
                inline = True
                self._running.add(key)
            else:
                if len(self._pending) >= self.max_pending:
                    self._drop_oldest()
                self._order += 1
                deadline = now + longest
                self._pending[key] = _Pending(
                    job, min(now + quiet, deadline), deadline, self._order
                )
                self._start_workers()
            self._changed.notify_all()
        if inline:
            logger.warning(
                "%r: %d jobs pending (max_pending); running the job of %r inline",
                self,
                self.max_pending,
                key,
            )
            self._run(key, job)

    def cancel(self, key: Hashable, /) -> bool:
        """Drop the pending job of ``key``; True when there was one (a running job goes on)."""
        with self._changed:
            found = self._pending.pop(key, None) is not None
            self._changed.notify_all()
            return found

    def flush(self, key: Hashable | None = None, /, *, timeout: float | None = None) -> bool:
        """Run pending jobs now (of ``key``, or all) and wait until they are done.

        Returns:
            True when nothing of ``key`` (or nothing at all) is pending or
            running any more; False when ``timeout`` seconds passed first.
        """
        end = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            now = time.monotonic()
            for k, entry in self._pending.items():
                if key is None or k == key:
                    entry.due = now
            self._changed.notify_all()
            while self._busy(key):
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def close(self, *, timeout: float | None = None) -> bool:
        """Flush, then stop the workers; :meth:`schedule` raises afterwards.

        Returns:
            True when every job finished within ``timeout``. On False the
            jobs still pending are dropped (and logged); a running one is
            left to finish on its daemon thread.
        """
        done = self.flush(timeout=timeout)
        with self._changed:
            self._closed = True
            if self._pending:
                logger.warning(
                    "%r closed with %d jobs still pending; dropping them",
                    self,
                    len(self._pending),
                )
                self._dropped += len(self._pending)
                self._pending.clear()
            self._changed.notify_all()
            threads = list(self._threads)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout=0 if not done else None)
        return done

    def status(self) -> JobStatus:
        """The counters now."""
        with self._changed:
            return JobStatus(
                pending=len(self._pending),
                running=len(self._running),
                completed=self._completed,
                failed=self._failed,
                dropped=self._dropped,
                last_error=self._last_error,
                closed=self._closed,
            )

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> Debouncer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Debouncer(name={self.name!r}, delay={self.delay})"

    # -- internals (called with self._changed held unless said otherwise) ---------

    def _busy(self, key: Hashable | None) -> bool:
        if key is None:
            return bool(self._pending or self._running)
        return key in self._pending or key in self._running

    def _drop_oldest(self) -> None:
        oldest = min(self._pending, key=lambda k: self._pending[k].order)
        del self._pending[oldest]
        self._dropped += 1
        logger.warning(
            "%r: %d jobs pending (max_pending); dropped the oldest, of %r",
            self,
            self.max_pending,
            oldest,
        )

    def _start_workers(self) -> None:
        self._threads = [t for t in self._threads if t.is_alive()]
        while len(self._threads) < self.workers:
            thread = threading.Thread(
                target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _next_ready(self) -> tuple[Hashable, Job] | float | None:
        """The next job to run now, else seconds until one is due, else None."""
        runnable = [(e.due, e.order, k) for k, e in self._pending.items() if k not in self._running]
        if not runnable:
            return None
        due, _, key = min(runnable)
        wait = due - time.monotonic()
        if wait > 0:
            return wait
        return key, self._pending.pop(key).job

    def _work(self) -> None:
        while True:
            with self._changed:
                while True:
                    if self._closed and not self._pending:
                        return
                    ready = self._next_ready()
                    if isinstance(ready, tuple):
                        key, job = ready
                        self._running.add(key)
                        break
                    self._changed.wait(ready)
            self._run(key, job)
            del job  # while it waits for the next, the thread keeps no job (nor its memory)

    def _run(self, key: Hashable, job: Job) -> None:
        """Run one job outside the lock, then record how it went."""
        error: BaseException | None = None
        try:
            job()
        except MemoriesError as exc:
            # The library's own error already says what failed and what to do
            # (a store gone, queued documents waiting in an outbox): one line,
            # and the traceback only for whoever turns on debug logging.
            error = exc
            logger.error("%r: background job of %r failed: %s", self, key, describe_error(exc))
            logger.debug("The failure's traceback:", exc_info=True)
        except Exception as exc:
            error = exc
            logger.exception("%r: background job of %r failed", self, key)
        with self._changed:
            self._running.discard(key)
            if error is None:
                self._completed += 1
            else:
                self._failed += 1
                self._last_error = f"{key!r}: {type(error).__name__}: {error}"
            self._changed.notify_all()


_shared: Debouncer | None = None
_shared_lock = threading.Lock()


def shared_debouncer() -> Debouncer:
    """The debouncer memories share unless given their own: one thread, each job its own delay."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.closed:
            _shared = Debouncer(name="memories-shared")
        return _shared


@dataclass(frozen=True)
class MemoryStatus:
    """Where a memory's deferred work stands: every memory's status (subclasses add fields)."""

    pending: int = 0
    """Units of work saved but not processed yet (turns to fold, documents to write)."""
    failures: int = 0
    """Consecutive failures of that work (0 when the last attempt worked)."""
    last_error: str | None = None
    """Why the last attempt failed, while ``failures`` > 0."""
    background: JobStatus | None = None
    """The scheduler's counters when the work runs in the background, else None."""
    model: ModelUsage | None = field(default=None, compare=False)
    """What the memory's model calls have cost in this process (None: a kind with no ``llm``).

    Left out of equality: it counts this process's calls, not the memory's state, so a
    restarted memory's status equals the one before.
    """
    usage: Accounts | None = field(default=None, compare=False)
    """Every model call, embedding batch and store transaction of this memory in this
    process, per kind and per namespace (see :mod:`memories.kernel.accounting`)."""
    deferred: str | None = field(default=None, compare=False)
    """Why the memory's formation waits, when its model budget is spent (else None)."""


class BatchResult(Protocol):
    """What one batch of deferred work did: a dataclass with a status and an error."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def status(self) -> str: ...
    @property
    def error(self) -> str | None: ...


B = TypeVar("B", bound=BatchResult)


#: Statuses of an update, least telling first.
UPDATE_RANK = {"idle": 0, "unchanged": 1, "updated": 2, "failed": 3}


def merged_batches(before: B, after: B, rank: Mapping[str, int] = UPDATE_RANK) -> B:
    """Two deferred batches as one: higher ``rank``, later version and error, counts summed."""
    counts = {
        f.name: getattr(before, f.name) + getattr(after, f.name)
        for f in fields(after)
        if f.name not in ("status", "version", "error")
    }
    status = max(before.status, after.status, key=rank.__getitem__)
    return replace(after, status=status, error=after.error or before.error, **counts)


@dataclass(eq=False)
class BackgroundWork:
    """One memory's deferred job (a summary fold, a profile update, vector writes).

    Args:
        key: the job's key on the scheduler: two memories on the same data share one job.
        job: what to run (on a worker thread, never twice at once for a key).
        scheduler: the :class:`Debouncer`; by default the process's shared one.
        delay: the quiet period before the job runs, in seconds.
        max_wait: the longest a job waits however often it is rescheduled.
    """

    key: Hashable
    job: Job
    _: KW_ONLY
    scheduler: Debouncer | None = None
    delay: float | None = None
    max_wait: float | None = None
    closed: bool = field(default=False, init=False)
    """Set by :meth:`close`: :meth:`schedule` then refuses."""

    def _debouncer(self) -> Debouncer:
        return self.scheduler if self.scheduler is not None else shared_debouncer()

    def schedule(self) -> bool:
        """(Re)schedule the job; False after :meth:`close` (the caller then runs it inline)."""
        if self.closed:
            return False
        job = carried(self.job)  # counted and traced as part of the operation that scheduled it
        self._debouncer().schedule(self.key, job, delay=self.delay, max_wait=self.max_wait)
        return True

    def cancel(self) -> bool:
        """Drop the pending job (a running one goes on); True when one was pending."""
        return self._debouncer().cancel(self.key)

    def flush(self, *, timeout: float | None = None) -> bool:
        """Run the pending job now and wait; True when nothing is pending or running."""
        return self._debouncer().flush(self.key, timeout=timeout)

    def close(self, *, timeout: float | None = None) -> bool:
        """Flush, then schedule nothing more (the scheduler keeps serving others)."""
        done = self.flush(timeout=timeout)
        self.closed = True
        return done

    def status(self) -> JobStatus:
        """The scheduler's counters."""
        return self._debouncer().status()

    def __repr__(self) -> str:
        return f"BackgroundWork(key={self.key!r})"


def describe_error(error: Any) -> str:
    """``"ExceptionType: message"``, as every status record shows an error."""
    return f"{type(error).__name__}: {error}"
