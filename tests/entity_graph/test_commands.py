"""`memories inspect / export / import / clear` on an entity graph config (type: entity)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from memories import EntityMemory, create_memory
from memories.core.config import with_namespace
from tests.core.test_cli_commands import run

TURNS = [
    "I live in Lisbon. My sister Melanie is a painter.",
    "I moved to Porto.",
    "Mel called me today.",
]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "graph.yaml"
    options = {"type": "entity", "url": f"sqlite:///{tmp_path / 'g.db'}", "namespace": ["u", "ana"]}
    path.write_text(yaml.safe_dump(options), encoding="utf-8")
    return path


def graph(config: Path, namespace: str = "u.ana") -> EntityMemory:
    memory = create_memory(with_namespace(yaml.safe_load(config.read_text()), namespace))
    assert isinstance(memory, EntityMemory)
    return memory


def told(memory: EntityMemory) -> EntityMemory:
    for turn in TURNS:
        memory.save_context({"input": turn}, {"output": "Ok."})
    return memory


def test_inspect_lists_entities_and_current_relations_with_counts(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    told(graph(config))
    code, out, _ = run(["inspect", "--config", str(config)], capsys)
    assert code == 0
    assert (
        "entity graph u.ana in " in out
        and ": 4 entities (1 merged into others), 2 current relations, 1 ended, 0 turns pending"
        in out
    )
    assert "  Melanie (also Mel): My sister Melanie is a painter." in out
    assert "  User lives_in Porto (since " in out and "  User sister Melanie (since " in out
    assert "User lives_in Lisbon (since" not in out  # ended: counted, not listed as current
    _, other, _ = run(["inspect", "--config", str(config), "--namespace", "u.bob"], capsys)
    assert "entity graph u.bob in " in other and ": 0 entities" in other
    assert "Melanie" not in other


def test_export_writes_entities_and_relations_with_their_times_and_history(
    config: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    told(graph(config))
    code, exported, err = run(["export", "--config", str(config)], capsys)
    assert code == 0 and "0 messages, 8 documents" in err
    assert "leaves out" not in caplog.text  # a graph is exportable
    records = [json.loads(line) for line in exported.splitlines()]
    assert {r["graph"] for r in records} == {"entity", "relation"}
    assert all(r["namespace"] == ["u", "ana"] for r in records)
    names = {r["id"]: r["name"] for r in records if r["graph"] == "entity"}
    mel = next(r for r in records if r["graph"] == "entity" and r["name"] == "Mel")
    assert names[mel["merged_into"]] == "Melanie" and mel["merge_reason"]
    relations = {
        (names[r["subject"]], r["predicate"], names[r["object"]]): r
        for r in records
        if r["graph"] == "relation"
    }
    lisbon = relations[("User", "lives_in", "Lisbon")]
    assert lisbon["ended"] == "contradicted" and lisbon["invalid_at"] >= lisbon["valid_at"]
    assert lisbon["turns"][0][0]["data"]["content"] == TURNS[0]  # what said it
    assert lisbon["ended_by"][0][0]["data"]["content"] == TURNS[1]  # what ended it
    assert relations[("User", "lives_in", "Porto")]["invalid_at"] is None


def test_import_writes_what_a_graph_lacks_and_twice_writes_nothing(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = told(graph(config))
    _, exported, _ = run(["export", "--config", str(config)], capsys)
    argv = ["import", "--config", str(config), "--namespace", "u.copy", "-"]
    code, _, err = run(argv, capsys, exported)
    assert code == 0 and "8 written" in err
    code, _, err = run(argv, capsys, exported)
    assert code == 0 and "0 written" in err
    code, _, err = run(["import", "--config", str(config), "-"], capsys, exported)
    assert code == 0 and "0 written" in err  # into its own namespace: all there already
    copy = graph(config, "u.copy")
    assert [r.text() for r in copy.relations()] == [r.text() for r in original.relations()]

    def closed(memory: EntityMemory) -> list[tuple[object, ...]]:
        return [
            (r.text(), r.ended, r.valid_at, r.invalid_at, r.turns, r.ended_by)
            for r in memory.history()
        ]

    assert closed(copy) == closed(original) and len(closed(copy)) == 1
    mel, kept = copy.entity("Mel"), original.entity("Mel")
    assert mel is not None and kept is not None  # the entity's times are the import's
    assert (mel.id, mel.name, mel.aliases, mel.summary) == (
        kept.id,
        kept.name,
        kept.aliases,
        kept.summary,
    )
    assert [(e.name, e.merge_reason) for e in copy.merges()] == [
        (e.name, e.merge_reason) for e in original.merges()
    ]
    # A graph the import made keeps working: the next turn updates it.
    copy.save_context({"input": "I moved to Braga."}, {"output": "Ok."})
    assert "User lives_in Braga" in [r.text() for r in copy.relations()]
    assert graph(config, "u.bob").entities() == []


def test_a_bad_graph_line_imports_nothing(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    told(graph(config))
    _, exported, _ = run(["export", "--config", str(config)], capsys)
    lines = exported.splitlines()
    bad = json.loads(lines[-1])
    bad["valid_at"] = "last tuesday"
    broken = "\n".join([*lines[:-1], json.dumps(bad)]) + "\n"
    argv = ["import", "--config", str(config), "--namespace", "u.copy", "-"]
    code, _, err = run(argv, capsys, broken)
    assert code == 2 and f"<stdin>:{len(lines)}" in err and "valid_at" in err
    assert graph(config, "u.copy").entities() == []


def test_a_cleared_graph_round_trips_with_its_history_and_a_partial_file_is_refused(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    told(graph(config)).clear()
    graph(config).save_context({"input": "I live in Braga."}, {"output": "Ok."})
    _, exported, _ = run(["export", "--config", str(config)], capsys)
    assert '"cleared": true' in exported  # the entities ended relations still name
    argv = ["import", "--config", str(config), "--namespace", "u.copy", "--batch-size", "1", "-"]
    code, _, err = run(argv, capsys, exported)
    assert code == 0, err
    copy, original = graph(config, "u.copy"), graph(config)
    assert [r.text() for r in copy.history()] == [r.text() for r in original.history()]
    assert "User lives_in Lisbon" in [r.text() for r in copy.history()]
    assert [r.text() for r in copy.relations()] == ["User lives_in Braga"]
    assert copy.export_records() == original.export_records()

    relations = "".join(line + "\n" for line in exported.splitlines() if '"relation"' in line)
    argv = ["import", "--config", str(config), "--namespace", "u.partial", "-"]
    code, _, err = run(argv, capsys, relations)
    assert code == 2 and "neither the file nor the graph holds" in err
    assert graph(config, "u.partial").export_records() == []


def test_clear_clears_the_namespace_and_keeps_the_history(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    told(graph(config))
    told(graph(config, "u.bob"))
    code, _, err = run(["clear", "--config", str(config), "--yes"], capsys)
    assert code == 2 and "--erase-namespace erases profiles, entity graphs" in err
    argv = ["clear", "--config", str(config), "--erase-namespace"]
    code, out, err = run(argv, capsys, "y\n")
    assert code == 0 and "entity graph u.ana in " in out
    assert "4 entities cleared and 2 current relations ended" in err
    ana = graph(config)
    assert ana.entities() == [] and ana.relations() == []
    assert len(ana.history()) == 3  # ended, never deleted
    assert len(graph(config, "u.bob").relations()) == 2  # another namespace: untouched


def test_erase_user_removes_a_folded_graph_and_its_history_and_nothing_of_another(
    config: Path, tmp_path: Path
) -> None:
    """The graph's entities, relations, every version and queued turn go; bob's graph stays."""
    import sqlite3

    from memories.core.erasure import erase_user

    told(graph(config))
    told(graph(config, "u.bob"))
    graph(config).refresh()
    graph(config).apply([{"op": "relate", "subject": "Ana", "predicate": "knows", "value": "Zq"}])
    bob = graph(config, "u.bob").export_records()
    report = erase_user(config, namespace="u.ana")
    assert report.complete and report.removed > 0
    ana = graph(config)
    assert ana.entities() == [] and ana.relations() == [] and ana.history() == []
    assert ana.export_records() == [] and ana.status().pending == 0
    assert graph(config, "u.bob").export_records() == bob
    with sqlite3.connect(tmp_path / "g.db") as connection:
        listed = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        tables = [row[0] for row in listed]
        left = [
            table
            for table in tables
            for row in connection.execute(f'SELECT * FROM "{table}"').fetchall()
            if "u.ana" in repr(row) or "Zq" in repr(row)
        ]
    assert left == []


def test_the_async_twins_export_and_import_the_same_records(config: Path) -> None:
    import asyncio

    original = told(graph(config))
    copy = graph(config, "u.copy")

    async def copied() -> tuple[int, int]:
        records = await original.aexport_records()
        return await copy.aimport_records(records), await copy.aimport_records(records)

    first, second = asyncio.run(copied())
    assert first == 8 and second == 0
    assert copy.export_records() == original.export_records()
