"""The Debouncer: one job per key after a quiet period, bounded, flushable, never silent."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest

from memories.errors import BackendUnavailableError
from memories.kernel.background import Debouncer, JobStatus, shared_debouncer

LONG = 60.0  # a quiet period no test waits for: jobs run through flush()


def recorder() -> tuple[list[str], Callable[[str], Callable[[], None]]]:
    """A list of job names that ran, and a maker of jobs that append their name."""
    ran: list[str] = []

    def job(name: str) -> Callable[[], None]:
        return lambda: ran.append(name)

    return ran, job


def test_rescheduling_a_key_replaces_its_pending_job() -> None:
    ran, job = recorder()
    with Debouncer(delay=LONG) as debouncer:
        debouncer.schedule("session", job("first"))
        debouncer.schedule("session", job("second"))
        debouncer.schedule("session", job("third"))
        assert debouncer.status().pending == 1
        assert ran == []
        assert debouncer.flush(timeout=10)
    assert ran == ["third"]


def test_each_key_gets_its_own_job() -> None:
    ran, job = recorder()
    with Debouncer(delay=LONG) as debouncer:
        debouncer.schedule("a", job("a"))
        debouncer.schedule("b", job("b"))
        assert debouncer.flush(timeout=10)
    assert sorted(ran) == ["a", "b"]


def test_flush_of_one_key_leaves_the_others_pending() -> None:
    ran, job = recorder()
    with Debouncer(delay=LONG) as debouncer:
        debouncer.schedule("a", job("a"))
        debouncer.schedule("b", job("b"))
        assert debouncer.flush("a", timeout=10)
        assert ran == ["a"]
        assert debouncer.status().pending == 1


def test_a_job_runs_by_itself_after_the_quiet_period() -> None:
    done = threading.Event()
    with Debouncer(delay=0.01) as debouncer:
        debouncer.schedule("a", done.set)
        assert done.wait(timeout=10)


def test_max_wait_runs_a_job_that_keeps_being_rescheduled() -> None:
    done = threading.Event()
    with Debouncer(delay=LONG, max_wait=0.01) as debouncer:
        debouncer.schedule("a", done.set)
        debouncer.schedule("a", done.set)  # would push it 60 s out without max_wait
        assert done.wait(timeout=10)


def test_jobs_run_on_a_worker_thread() -> None:
    threads: list[str] = []
    with Debouncer(delay=LONG, name="bg") as debouncer:
        debouncer.schedule("a", lambda: threads.append(threading.current_thread().name))
        debouncer.flush(timeout=10)
    assert threads and threads[0].startswith("bg-") and threads[0] != "MainThread"


def test_cancel_drops_the_pending_job() -> None:
    ran, job = recorder()
    with Debouncer(delay=LONG) as debouncer:
        debouncer.schedule("a", job("a"))
        assert debouncer.cancel("a") is True
        assert debouncer.cancel("a") is False
        debouncer.flush(timeout=10)
    assert ran == []


def test_a_failing_job_is_logged_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    def boom() -> None:
        raise ConnectionError("LLM down")

    with Debouncer(delay=LONG) as debouncer:
        with caplog.at_level(logging.ERROR, logger="memories.kernel.background"):
            debouncer.schedule("s1", boom)
            debouncer.flush(timeout=10)
        status = debouncer.status()
    assert status.failed == 1 and status.completed == 0
    assert status.last_error is not None and "ConnectionError: LLM down" in status.last_error
    assert "'s1'" in status.last_error
    assert any(r.exc_info and "s1" in r.getMessage() for r in caplog.records)


def test_a_job_failing_with_the_librarys_own_error_is_one_line_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 24: a store gone under the writer logged three chained tracebacks."""

    def gone() -> None:
        raise BackendUnavailableError("The Chroma folder '/x' is gone: close memories first.")

    with Debouncer(delay=LONG) as debouncer:
        with caplog.at_level(logging.DEBUG, logger="memories.kernel.background"):
            debouncer.schedule("s1", gone)
            debouncer.flush(timeout=10)
        assert debouncer.status().failed == 1
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1 and not errors[0].exc_info
    assert "'s1'" in errors[0].getMessage() and "is gone: close" in errors[0].getMessage()
    # The traceback is still there for whoever turns on debug logging.
    assert any(r.levelno == logging.DEBUG and r.exc_info for r in caplog.records)


def test_status_counts_completed_jobs() -> None:
    with Debouncer(delay=LONG) as debouncer:
        for key in "abc":
            debouncer.schedule(key, lambda: None)
        debouncer.flush(timeout=10)
        assert debouncer.status() == JobStatus(
            pending=0, running=0, completed=3, failed=0, dropped=0, last_error=None, closed=False
        )


def test_full_queue_drops_the_oldest_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    ran, job = recorder()
    with Debouncer(delay=LONG, max_pending=2) as debouncer:
        with caplog.at_level(logging.WARNING, logger="memories.kernel.background"):
            debouncer.schedule("a", job("a"))
            debouncer.schedule("b", job("b"))
            debouncer.schedule("c", job("c"))
        assert debouncer.status().dropped == 1
        debouncer.flush(timeout=10)
    assert sorted(ran) == ["b", "c"]
    assert any(
        "dropped the oldest" in r.getMessage() and "'a'" in r.getMessage() for r in caplog.records
    )


def test_full_queue_can_run_the_new_job_inline() -> None:
    threads: list[str] = []
    with Debouncer(delay=LONG, max_pending=1, when_full="run_inline") as debouncer:
        debouncer.schedule("a", lambda: None)
        debouncer.schedule("b", lambda: threads.append(threading.current_thread().name))
        assert threads == [threading.current_thread().name]
        assert debouncer.status().completed == 1
        assert debouncer.status().pending == 1


def test_a_key_never_runs_twice_at_once() -> None:
    started, release = threading.Event(), threading.Event()
    running: list[int] = []
    overlaps: list[int] = []

    def slow() -> None:
        running.append(1)
        if len(running) > 1:
            overlaps.append(len(running))
        started.set()
        release.wait(10)
        running.pop()

    with Debouncer(delay=0.0, workers=2) as debouncer:
        debouncer.schedule("a", slow)
        assert started.wait(10)
        debouncer.schedule("a", slow)  # pending while the first still runs
        assert debouncer.status().running == 1
        release.set()
        assert debouncer.flush(timeout=10)
    assert overlaps == []


def test_flush_times_out_while_a_job_runs() -> None:
    release = threading.Event()
    with Debouncer(delay=0.0) as debouncer:
        debouncer.schedule("a", lambda: release.wait(10))
        assert debouncer.flush(timeout=0.01) is False
        release.set()
        assert debouncer.flush(timeout=10) is True


def test_close_flushes_and_then_refuses_new_jobs() -> None:
    ran, job = recorder()
    debouncer = Debouncer(delay=LONG)
    debouncer.schedule("a", job("a"))
    assert debouncer.close(timeout=10) is True
    assert ran == ["a"]
    assert debouncer.status().closed
    with pytest.raises(RuntimeError, match="closed"):
        debouncer.schedule("b", job("b"))


@pytest.mark.parametrize(
    "options",
    [{"delay": -1}, {"max_pending": 0}, {"workers": 0}, {"when_full": "block"}],
)
def test_bad_settings_are_rejected(options: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Debouncer(**options)  # type: ignore[arg-type]


def test_the_shared_debouncer_is_one_object_until_closed() -> None:
    first = shared_debouncer()
    assert shared_debouncer() is first
