"""``memories demo --db`` leaves a config that the inspector opens on the demo's data (issue 27)."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import yaml

from memories.faces.demo import DEMO_MEMORIES, SCRIPT
from memories.faces.server.service import Inspector
from tests.inspector.conftest import Demo


def test_the_demo_prints_the_command_that_opens_its_data(demo: Demo) -> None:
    command = f"memories serve --config {shlex.quote(str(demo.config))}"
    assert command in demo.printed.splitlines()[-1]


def test_the_overview_lists_every_demo_memory_with_its_data(demo: Demo) -> None:
    overview = Inspector(demo.config).overview()
    rows = {row["id"]: row for row in overview["memories"]}
    assert list(rows) == [name.split(" ")[0] for name in DEMO_MEMORIES]
    for memory_id, row in rows.items():
        count = row["sessions"] if row["scope"] == "session" else row["namespaces"]
        assert count > 0, (memory_id, row)


def test_each_long_term_memory_holds_its_items_in_its_own_namespace(demo: Demo) -> None:
    rows = Inspector(demo.config).namespaces()["namespaces"]
    held = {row["namespace"]: row["memories"] for row in rows}
    assert held == {
        "demo.collection": {"collection": held["demo.collection"]["collection"]},
        "demo.examples": {"examples": len(SCRIPT)},
        "demo.instructions": {"instructions": 1},
        "demo.profile": {"profile": 1},
        "demo.vector": {"vector": len(SCRIPT)},
    }
    assert held["demo.collection"]["collection"] > 0


def test_the_profile_says_what_it_remembers_since_when_and_why(demo: Demo) -> None:
    profile = Inspector(demo.config).items("demo.profile", "profile")
    assert profile["document"]["drink"] == "black coffee, no sugar"
    history = profile["items"]  # newest first
    assert [change["version"] for change in history] == list(range(8, 0, -1))
    assert all(change["at"] for change in history)
    (drink,) = [c for c in history if c["patch"][0]["path"] == "/drink" and c["version"] > 3]
    (turn,) = drink["turns"]
    assert turn[0] == {"type": "human", "text": SCRIPT[6][0], "id": None}


def test_the_config_names_no_model_and_one_key_per_memory(demo: Demo) -> None:
    text = demo.config.read_text(encoding="utf-8")
    leaves = yaml.safe_load(text)["memories"]
    assert not any("llm" in leaf for leaf in leaves)
    keys = [leaf.get("memory_key", leaf["type"]) for leaf in leaves]
    assert len(set(keys)) == len(keys) == len(DEMO_MEMORIES)
    manual = {leaf["type"] for leaf in leaves if leaf.get("policy") == "manual"}
    assert manual == {"profile", "instructions"}


def test_the_demo_folder_copied_elsewhere_opens_with_every_namespace(
    demo: Demo, tmp_path: Path
) -> None:
    """Its stores are named by ids in their folders, not by where the folders are."""
    moved = tmp_path / "elsewhere"
    shutil.copytree(demo.config.parent, moved)
    here = Inspector(demo.config).namespaces()["namespaces"]
    there = Inspector(moved / demo.config.name).namespaces()["namespaces"]
    assert there == here and {row["namespace"] for row in there} >= {"demo.vector", "demo.examples"}
