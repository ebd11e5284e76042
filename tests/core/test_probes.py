"""The probe helper: a child process never holds a test forever, and its failure shows why."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.probes import killed_after, python


def test_a_child_past_its_timeout_is_killed_and_its_stderr_noted() -> None:
    code = "import sys, time; print('about to hang', file=sys.stderr, flush=True); time.sleep(60)"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        python("-c", code, timeout=2)
    assert time.monotonic() - started < 30
    assert "about to hang" in "\n".join(caught.value.__notes__)


def test_a_failing_child_fails_the_test_with_its_stderr_tail() -> None:
    code = "import sys; print('some output'); sys.exit('the reason it failed')"
    with pytest.raises(AssertionError) as caught:
        python("-c", code, "an-argument")
    message = str(caught.value)
    assert "exited 1" in message and "an-argument" in message
    assert "the reason it failed" in message and "some output" in message


def test_only_the_end_of_a_long_stderr_is_shown() -> None:
    code = "import sys; sys.stderr.write('early ' * 5000 + 'the last words'); sys.exit(3)"
    with pytest.raises(AssertionError) as caught:
        python("-c", code)
    message = str(caught.value)
    assert "the last words" in message and len(message) < 10_000


def test_without_check_a_failing_exit_is_returned() -> None:
    done = python("-c", "import sys; print('out'); sys.exit(4)", check=False)
    assert (done.returncode, done.stdout) == (4, "out\n")


def test_input_cwd_and_env_reach_the_child(tmp_path: Path) -> None:
    code = "import os, sys; print(sys.stdin.read(), os.getcwd(), os.environ['PROBE_VALUE'])"
    done = python("-c", code, input="given", cwd=tmp_path, env={"PROBE_VALUE": "seen"})
    assert done.stdout.split() == ["given", str(tmp_path), "seen"]


def test_a_popen_read_line_by_line_ends_when_its_time_is_up() -> None:
    code = "import time; time.sleep(60)"
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert process.stdout is not None
    with killed_after(process, 1):
        assert process.stdout.readline() == b""  # waits for a line that never comes: killed
    process.wait(timeout=10)
    process.stdout.close()
    assert time.monotonic() - started < 30
