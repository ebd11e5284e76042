"""Every module path a user could import before the layout by floors still imports, with its names.

``public_paths.json`` lists each module of the flat layout (the last release
before issue 24) with the public names it had: its ``__all__``, or its public
functions and classes. The old path must give the module that now holds those
names (the very same module object, so a class is never defined twice), and
a pickle made before the move must load.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import pickle
import pkgutil
from pathlib import Path

import pytest

from memories._moved import MOVED
from tests.probes import python

PUBLIC_PATHS: dict[str, list[str]] = json.loads(
    (Path(__file__).with_name("public_paths.json")).read_text(encoding="utf-8")
)


@pytest.mark.parametrize("old", sorted(PUBLIC_PATHS))
def test_an_old_module_path_still_gives_its_public_names(old: str) -> None:
    module = importlib.import_module(old)
    missing = [name for name in PUBLIC_PATHS[old] if not hasattr(module, name)]
    assert missing == []


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_moved_module_itself(old: str) -> None:
    new = importlib.import_module(MOVED[old])
    assert importlib.import_module(old) is new
    # The real module keeps its own identity: its spec and name are the new path's.
    assert new.__name__ == MOVED[old]
    assert new.__spec__ is not None and new.__spec__.name == MOVED[old]


def test_a_module_of_a_moved_package_is_never_a_second_copy() -> None:
    """``memories.history.retained`` (unlisted) is the one ``memories.stores.history.retained``."""
    copies = []
    for old, new in sorted(MOVED.items()):
        package = importlib.import_module(new)
        for found in pkgutil.iter_modules(getattr(package, "__path__", [])):
            module = importlib.import_module(f"{new}.{found.name}")
            if importlib.import_module(f"{old}.{found.name}") is not module:
                copies.append(f"{old}.{found.name}")
    assert copies == []


def test_every_module_of_the_flat_layout_is_listed_or_still_in_place() -> None:
    moved_or_kept = {
        old for old in PUBLIC_PATHS if old in MOVED or importlib.util.find_spec(old) is not None
    }
    assert moved_or_kept == set(PUBLIC_PATHS)


def test_no_alias_names_a_module_that_exists_under_its_old_path() -> None:
    root = Path(importlib.import_module("memories").__file__ or "").parent
    shadowed = [
        old
        for old in MOVED
        if (root.parent / (old.replace(".", "/") + ".py")).exists()
        or (root.parent / old.replace(".", "/") / "__init__.py").exists()
    ]
    assert shadowed == []


def test_a_pickle_naming_an_old_module_loads_in_a_fresh_process() -> None:
    """A pickle written before the move names ``memories.vector.records.SearchResult``."""
    from memories.stores.vector.records import SearchResult

    result = SearchResult("a turn", {"k": 1}, 0.5, "id-1")
    data = pickle.dumps(result, protocol=0).replace(
        b"memories.stores.vector.records", b"memories.vector.records"
    )
    assert b"memories.vector.records" in data
    code = (
        "import pickle, sys; r = pickle.loads(sys.stdin.buffer.read()); "
        "print(type(r).__module__, r.text)"
    )
    out = python("-c", code, input=data.decode("ascii"), timeout=60)  # protocol 0 is ASCII
    assert out.stdout.split() == ["memories.stores.vector.records", "a", "turn"]


def test_an_old_module_path_runs_with_python_dash_m() -> None:
    """``python -m memories.cli`` (the CLI's module before the move) still runs the CLI."""
    out = python("-m", "memories.cli", "--version", timeout=60)
    assert out.stdout.split()[0] == "memories"
    assert out.stderr == ""
