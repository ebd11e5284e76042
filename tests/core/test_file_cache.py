"""Issue 37: bytes slow to derive (the rewritten MiniLM) are cached whole or not at all."""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from memories.kernel.file_cache import cached_bytes
from memories.kernel.paths import CACHE_DIR_ENV

PAYLOAD = bytes(range(256)) * 4096  # 1 MB


def counting(payload: bytes = PAYLOAD) -> tuple[Callable[[], bytes], list[int]]:
    calls: list[int] = []

    def derive() -> bytes:
        calls.append(1)
        return payload

    return derive, calls


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_second_call_reads_the_cache_without_deriving(folder: Path) -> None:
    derive, calls = counting()
    assert cached_bytes("thing.bin", derive) == PAYLOAD
    assert cached_bytes("thing.bin", derive) == PAYLOAD
    assert calls == [1]
    assert [p.name for p in folder.iterdir()] == ["thing.bin"], "no temporary file is left"


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # a partial file
        lambda data: data[:100] + bytes([data[100] ^ 1]) + data[101:],  # one flipped bit
        lambda data: b"",
    ],
    ids=["truncated", "flipped", "empty"],
)
def test_a_damaged_cache_file_is_derived_again_and_replaced(
    folder: Path, damage: Callable[[bytes], bytes], caplog: pytest.LogCaptureFixture
) -> None:
    derive, calls = counting()
    cached_bytes("thing.bin", derive)
    path = folder / "thing.bin"
    path.write_bytes(damage(path.read_bytes()))
    with caplog.at_level(logging.WARNING):
        assert cached_bytes("thing.bin", derive) == PAYLOAD
    assert calls == [1, 1]
    assert cached_bytes("thing.bin", derive) == PAYLOAD
    assert calls == [1, 1], "the damaged file was replaced by a whole one"


def test_an_unwritable_cache_folder_only_means_deriving_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A regular file where the folder should be: mkdir fails even for root.
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_DIR_ENV, str(blocker / "cache"))
    derive, calls = counting()
    assert cached_bytes("thing.bin", derive) == PAYLOAD
    assert cached_bytes("thing.bin", derive) == PAYLOAD
    assert calls == [1, 1]


def test_off_keeps_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(CACHE_DIR_ENV, "off")
    derive, calls = counting()
    cached_bytes("thing.bin", derive)
    cached_bytes("thing.bin", derive)
    assert calls == [1, 1] and list(tmp_path.iterdir()) == []


def _racer(folder: str, rounds: int) -> tuple[int, bool]:
    """Derive, read and drop the same cache file over and over; (damaged reads, all right)."""
    os.environ[CACHE_DIR_ENV] = folder
    damaged: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = damaged.append  # type: ignore[method-assign]
    logging.getLogger("memories.kernel.file_cache").addHandler(handler)
    right = True
    for i in range(rounds):
        right &= cached_bytes("big.bin", lambda: PAYLOAD * 8) == PAYLOAD * 8
        if i % 3 == 0:  # make the others write it again while the rest read it
            Path(folder, "big.bin").unlink(missing_ok=True)
    return len([r for r in damaged if r.levelno >= logging.WARNING]), right


def test_processes_racing_to_write_never_read_a_partial_file(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        results = pool.starmap_async(_racer, [(str(tmp_path), 40)] * 4).get(timeout=120)
    assert results == [(0, True)] * 4
    assert [p.name for p in tmp_path.iterdir()] in ([], ["big.bin"])
