"""Chroma's vector index files: the unused capacity is zeroed, the elements in use are kept."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from memories.stores.vector import hnsw_files
from memories.stores.vector.hnsw_files import blank_unused

SIZE = 16  # bytes per element in data_level0.bin
CAPACITY = 5


def segment(folder: Path, name: str, *, count: int, version: int = 1) -> Path:
    """A segment folder as Chroma's hnswlib writes it: ``count`` elements in use, the rest of
    the capacity holding leftover memory (a user's text)."""
    where = folder / name
    where.mkdir(parents=True)
    header = struct.pack("<iQQQQQQiIQQQdQ", version, 0, CAPACITY, count, SIZE, 8, 4, 0, 0, 16,
                         32, 16, 0.36, 100)  # fmt: skip
    (where / "header.bin").write_bytes(header)
    used = b"".join(bytes([65 + i]) * SIZE for i in range(count))
    leftover = (b"Zqmayasecret" * CAPACITY * SIZE)[: (CAPACITY - count) * SIZE]
    (where / "data_level0.bin").write_bytes(used + leftover)
    (where / "length.bin").write_bytes(b"\x01\x02\x03\x04" * count + b"maya" * (CAPACITY - count))
    (where / "link_lists.bin").write_bytes(b"")
    return where


def test_the_unused_capacity_is_zeroed_and_the_elements_in_use_are_kept(tmp_path: Path) -> None:
    used = segment(tmp_path, "a", count=2)
    empty = segment(tmp_path, "b", count=0)

    done = blank_unused(tmp_path)

    assert done.segments == 2 and done.skipped == ()
    assert done.zeroed == (3 * SIZE + 3 * 4) + (5 * SIZE + 5 * 4)
    data = (used / "data_level0.bin").read_bytes()
    assert data == b"A" * SIZE + b"B" * SIZE + bytes(3 * SIZE)
    assert (used / "length.bin").read_bytes() == b"\x01\x02\x03\x04" * 2 + bytes(3 * 4)
    assert (empty / "data_level0.bin").read_bytes() == bytes(CAPACITY * SIZE)
    assert blank_unused(tmp_path).zeroed == 0  # nothing left to zero: nothing written


def test_a_segment_of_an_unknown_format_is_left_as_it_is_and_named(tmp_path: Path) -> None:
    other = segment(tmp_path, "other", count=1, version=2)
    before = (other / "data_level0.bin").read_bytes()
    done = blank_unused(tmp_path)
    assert done.zeroed == 0 and done.skipped == ("other (persistence version 2, not 1)",)
    assert (other / "data_level0.bin").read_bytes() == before


def test_a_segment_chroma_writes_meanwhile_is_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chroma writes the header (a larger count) before the elements: seen, the segment stops."""
    where = segment(tmp_path, "a", count=2)
    read = hnsw_files._count
    calls = []

    def grows(header: Path) -> tuple[int, int]:
        calls.append(header)
        count, size = read(header)
        return (count + 1, size) if len(calls) > 1 else (count, size)

    monkeypatch.setattr(hnsw_files, "_count", grows)
    done = blank_unused(tmp_path)
    assert done.zeroed == 0 and "wrote to it meanwhile" in done.skipped[0]
    assert b"Zqmayasecret" in (where / "data_level0.bin").read_bytes()
