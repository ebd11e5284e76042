"""Every registered memory type has a run of the memory contract."""

from __future__ import annotations

import importlib
from pathlib import Path

from memories.core.config import MEMORY_TYPES
from tests.contract.memory_contract import MemoryContract

TESTS = Path(__file__).resolve().parents[1]


def _contract_runs() -> dict[str, list[str]]:
    for path in sorted(TESTS.rglob("test_*.py")):
        module = ".".join(path.relative_to(TESTS.parent).with_suffix("").parts)
        importlib.import_module(module)
    runs: dict[str, list[str]] = {}
    pending = list(MemoryContract.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        runs.setdefault(getattr(cls, "memory_type", "<none>"), []).append(cls.__name__)
    return runs


def test_every_registered_memory_type_has_a_contract_run() -> None:
    runs = _contract_runs()
    assert "<none>" not in runs, f"contract runs without a memory_type: {runs.get('<none>')}"
    assert sorted(set(MEMORY_TYPES) - set(runs)) == []
    assert sorted(set(runs) - set(MEMORY_TYPES)) == []
