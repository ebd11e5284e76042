"""Chroma's vector index files: the capacity they write from memory that was never set.

Chroma's hnswlib writes a segment's whole capacity when it makes its files, so the
slots past the element count hold whatever the process's memory held (an erased
person's text included); nothing reads them, and :func:`blank_unused` zeroes them.
Why and how safely: docs/architecture.md, "Chroma's index files".
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Blanked", "blank_unused"]

#: ``header.bin``: PERSISTENCE_VERSION, offsetLevel0_, max_elements_, cur_element_count,
#: size_data_per_element_, label_offset_, offsetData_, maxlevel_, enterpoint_node_, maxM_,
#: maxM0_, M_, mult_, ef_construction_ (written field by field: no padding).
_HEADER = struct.Struct("<iQQQQQQiIQQQdQ")
_VERSION = 1
_LENGTH_SIZE = 4  # a float per element in length.bin
_BLOCK = 1 << 16


@dataclass(frozen=True)
class Blanked:
    """What :func:`blank_unused` did to the segments of one Chroma folder."""

    segments: int
    """Segment folders looked at."""
    zeroed: int
    """Bytes of unused capacity that held something and were zeroed."""
    skipped: tuple[str, ...]
    """Segments left as they are, each with why (an unknown format, a write meanwhile)."""


def blank_unused(folder: Path) -> Blanked:
    """Zero the unused capacity of every HNSW segment under ``folder`` (a Chroma folder)."""
    zeroed, skipped, segments = 0, [], 0
    for header in sorted(folder.glob("*/header.bin")):
        segments += 1
        try:
            zeroed += _blank_segment(header)
        except (OSError, _Changed) as exc:
            skipped.append(f"{header.parent.name} ({exc})")
    return Blanked(segments, zeroed, tuple(skipped))


class _Changed(Exception):
    """The segment is not in a form this module knows, or Chroma wrote it meanwhile."""


def _count(header: Path) -> tuple[int, int]:
    """The element count and the size of an element in ``data_level0.bin``."""
    data = header.read_bytes()
    if len(data) != _HEADER.size:
        raise _Changed(f"a header of {len(data)} bytes, not {_HEADER.size}")
    fields = _HEADER.unpack(data)
    if fields[0] != _VERSION:
        raise _Changed(f"persistence version {fields[0]}, not {_VERSION}")
    return fields[3], fields[4]


def _blank_segment(header: Path) -> int:
    count, size = _count(header)
    zeroed = 0
    for name, used in (("data_level0.bin", count * size), ("length.bin", count * _LENGTH_SIZE)):
        path = header.with_name(name)
        if not path.exists():
            continue
        with path.open("r+b") as file:
            end = file.seek(0, 2)
            for start in range(used, end, _BLOCK):
                file.seek(start)
                block = file.read(min(_BLOCK, end - start))
                if not block.strip(b"\0"):
                    continue
                if _count(header) != (count, size):
                    raise _Changed("Chroma wrote to it meanwhile: run the erasure again")
                file.seek(start)
                file.write(bytes(len(block)))
                zeroed += len(block)
            if zeroed:
                file.flush()
                os.fsync(file.fileno())
    return zeroed
