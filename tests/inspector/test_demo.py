"""``memories demo --db`` leaves a config that the inspector opens on the demo's data (issue 27)."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import yaml

from memories.faces.demo import DEMO_MEMORIES, DEMO_NAMESPACE, SCRIPT
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


def test_the_users_long_term_memories_share_her_namespace(demo: Demo) -> None:
    """Issue 36: each memory sat in a namespace of its own (four empty cards and one real)."""
    rows = Inspector(demo.config).namespaces()["namespaces"]
    held = {row["namespace"]: row["memories"] for row in rows}
    user = ".".join(DEMO_NAMESPACE)
    assert held == {
        user: {
            "vector": len(SCRIPT),
            "collection": held[user]["collection"],
            "examples": len(SCRIPT),
            "instructions": 1,
            "profile": 1,
        }
    }
    assert held[user]["collection"] > 0


def test_a_collection_memory_shows_its_second_version_its_cause_and_rolls_back(
    demo: Demo, tmp_path: Path
) -> None:
    """Issue 36: offline, no collection item ever got a second version, nor kept facts only."""
    user = ".".join(DEMO_NAMESPACE)
    items = Inspector(demo.config).items(user, "collection")["items"]
    said = {str(item["content"]) for item in items}
    assert not any(text.endswith("?") for text in said)  # questions are not memories
    (drink,) = [item for item in items if "coffee" in str(item["content"])]
    page = Inspector(demo.config).item(user, "collection", drink["id"])
    newest, oldest = page["versions"]
    assert (oldest["content"], newest["version"]) == (SCRIPT[2][0], 2)
    assert newest["turns"][0][0]["text"] == SCRIPT[6][0]  # the turn that changed it
    copy = tmp_path / "copy"
    shutil.copytree(demo.config.parent, copy)  # a write: on a copy, not the shared demo
    writable = Inspector(copy / demo.config.name, allow_writes=True)
    done = writable.rollback(user, "collection", 1, item_id=drink["id"], expected_version=2)
    assert done["version"] == 3
    assert writable.item(user, "collection", drink["id"])["current"]["content"] == SCRIPT[2][0]


def test_the_profile_says_what_it_remembers_since_when_and_why(demo: Demo) -> None:
    profile = Inspector(demo.config).items(".".join(DEMO_NAMESPACE), "profile")
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
    assert there == here and [row["namespace"] for row in there] == [".".join(DEMO_NAMESPACE)]
