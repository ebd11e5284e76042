"""The CLI's inspect / export / import / clear on entity and knowledge-graph memories."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from memories.errors import ConfigError, InvalidInputError
from memories.faces.commands import (
    EntityLine,
    TripleLine,
    clear,
    clear_targets,
    export_jsonl,
    import_jsonl,
    inspect,
    knowledge_of,
    open_memory,
    read_jsonl,
)
from memories.stores.entities.summaries import SQLEntityStore
from memories.stores.entities.triples import SQLEntityGraph
from tests.entities.fakes import RuleModel

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TURNS = [("Jane lives in Oslo", "Nice."), ("Tom visits Jane", "Good."), ("Jane likes Tom", "Ok.")]


def config(tmp_path: Path, kind: str, session: str = "u1") -> dict[str, Any]:
    url = f"sqlite:///{tmp_path / 'memories.db'}"
    store = {"type": "sql", "url": url, "session_id": session}
    options: dict[str, Any] = {
        "type": f"conversation_{kind}",
        "llm": RuleModel(),
        "history": {"type": "sqlite", "path": str(tmp_path / "chat.db"), "session_id": session},
    }
    options["entity_store" if kind == "entity" else "kg"] = store
    return options


def converse(memory: Any) -> None:
    for question, answer in TURNS:
        memory.load_memory_variables({"input": question})
        memory.save_context({"input": question}, {"output": answer})


def test_inspect_lists_entities_with_their_versions_and_triples(tmp_path: Path) -> None:
    outputs = {}
    for kind in ("entity", "kg"):
        memory = open_memory(config(tmp_path, kind))
        converse(memory)
        out = io.StringIO()
        inspect(open_memory(config(tmp_path, kind)), out)
        outputs[kind] = out.getvalue()
    assert "entities of session 'u1' in SQLEntityStore" in outputs["entity"]
    assert (
        "Jane (3 versions): Jane lives in Oslo | Tom visits Jane | Jane likes Tom"
        in (outputs["entity"])
    )
    assert "triples of session 'u1' in SQLEntityGraph" in outputs["kg"]
    assert "(Jane, lives, Oslo)" in outputs["kg"] and "(Jane, likes, Tom)" in outputs["kg"]


@pytest.mark.parametrize("kind", ["entity", "kg"])
def test_export_then_import_into_another_session_is_lossless_and_idempotent(
    tmp_path: Path, kind: str
) -> None:
    source = open_memory(config(tmp_path, kind))
    converse(source)
    out = io.StringIO()
    messages, others = export_jsonl(source, out)
    assert messages == 2 * len(TURNS) and others > 0
    target = config(tmp_path, kind, session="u2")

    def knowledge(session: str) -> list[Any]:
        return [store for _, store in knowledge_of(open_memory(target, session))]

    def histories(session: str) -> list[Any]:
        return [open_memory(target, session).chat_memory]

    lines = read_jsonl(out.getvalue().splitlines(), source="x.jsonl", session="u2")
    assert import_jsonl(lines, histories, None, knowledge, progress=False) == messages + others
    copy = open_memory(target)
    source_store, copy_store = source.knowledge_store, copy.knowledge_store
    if kind == "entity":
        assert copy_store.entities() == source_store.entities()
    else:
        assert copy_store.get_triples() == source_store.get_triples()
    assert [m.content for m in copy.chat_memory.messages] == [
        m.content for m in source.chat_memory.messages
    ]
    assert import_jsonl(lines, histories, None, knowledge, progress=False) == 0  # again: nothing


def test_export_lines_are_one_json_object_each(tmp_path: Path) -> None:
    source = open_memory(config(tmp_path, "entity"))
    converse(source)
    out = io.StringIO()
    export_jsonl(source, out)
    parsed = read_jsonl(out.getvalue().splitlines(), source="x.jsonl")
    entities = [line for line in parsed if isinstance(line, EntityLine)]
    assert {line.entity for line in entities} == {"Jane", "Oslo", "Tom"}
    assert all(line.session_id == "u1" for line in entities)
    kg = open_memory(config(tmp_path, "kg"))
    converse(kg)
    out = io.StringIO()
    export_jsonl(kg, out)
    triples = [
        x for x in read_jsonl(out.getvalue().splitlines(), source="y") if isinstance(x, TripleLine)
    ]
    assert ("Jane", "lives", "Oslo") in [tuple(t.triple) for t in triples]


@pytest.mark.parametrize(
    "line",
    [
        '{"session_id": "u1", "entity": "", "summary": "x"}',
        '{"session_id": "u1", "entity": "Jane", "summary": 3}',
        '{"session_id": "u1", "triple": ["Jane", "likes"]}',
        '{"session_id": "u1", "triple": ["Jane", "", "Tom"]}',
        '{"session_id": "", "entity": "Jane", "summary": "x"}',
    ],
)
def test_a_bad_knowledge_line_is_named_and_nothing_is_imported(line: str) -> None:
    good = '{"session_id": "u1", "entity": "Tom", "summary": "fine"}'
    with pytest.raises(InvalidInputError, match=r"x\.jsonl:2: not a line"):
        read_jsonl([good, line], source="x.jsonl")


def test_knowledge_cannot_be_imported_where_no_store_outlives_the_process(tmp_path: Path) -> None:
    in_memory = config(tmp_path, "entity")
    del in_memory["entity_store"]  # the default: in this process only
    lines = read_jsonl(['{"session_id": "u1", "entity": "Jane", "summary": "x"}'], source="f")
    with pytest.raises(ConfigError, match="no entity store that outlives the process"):
        import_jsonl(
            lines,
            lambda s: [],
            None,
            lambda s: [store for _, store in knowledge_of(open_memory(in_memory, s))],
            progress=False,
        )


def test_clear_erases_entities_keeping_versions_unless_asked_and_the_graph(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'memories.db'}"
    entity, kg = open_memory(config(tmp_path, "entity")), open_memory(config(tmp_path, "kg"))
    converse(entity)
    converse(kg)
    assert any("entities of session 'u1'" in t for t in clear_targets(entity))
    assert any("knowledge graph of session 'u1'" in t for t in clear_targets(kg))
    done = clear(entity)
    assert any("3 entities (their earlier versions kept" in line for line in done)
    store = SQLEntityStore(url, session_id="u1")
    assert store.entities() == {} and len(store.history("Jane")) == 4
    converse(entity)
    clear(entity, namespaces=True)
    assert store.history("Jane") == []
    done = clear(kg)
    assert any("knowledge graph of session 'u1'" in line for line in done)
    assert SQLEntityGraph(url, session_id="u1").get_triples() == []
    assert entity.chat_memory.messages == [] and kg.chat_memory.messages == []


def test_the_cli_exports_imports_inspects_and_clears_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    import memories.faces.commands.opening as opening
    from memories.faces.cli import main

    made = opening.create_memory

    def with_model(options: dict[str, Any]) -> Any:  # a YAML config names no offline model
        return made({**options, "llm": RuleModel()})

    monkeypatch.setattr(opening, "create_memory", with_model)
    options = config(tmp_path, "entity")
    del options["llm"]
    path = tmp_path / "memory.yaml"
    path.write_text(yaml.safe_dump(options), encoding="utf-8")
    converse(open_memory(config(tmp_path, "entity")))
    export = tmp_path / "out.jsonl"
    assert main(["export", "--config", str(path), "-o", str(export)]) == 0
    assert "6 messages, 3 documents, entities and triples" in capsys.readouterr().err
    assert main(["import", "--config", str(path), "--session", "u2", str(export)]) == 0
    assert "9 written" in capsys.readouterr().err
    assert main(["inspect", "--config", str(path), "--session", "u2"]) == 0
    assert "entities of session 'u2'" in capsys.readouterr().out
    assert main(["clear", "--config", str(path), "--session", "u2", "--yes"]) == 0
    assert "entities of session 'u2': 3 entities" in capsys.readouterr().err
    url = f"sqlite:///{tmp_path / 'memories.db'}"
    assert SQLEntityStore(url, session_id="u2").entities() == {}
    assert len(SQLEntityStore(url, session_id="u1").entities()) == 3


def test_relative_store_paths_are_read_next_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from memories.core.config import load_config, sqlite_files
    from memories.faces.cli import main

    folder = tmp_path / "app"
    folder.mkdir()
    path = folder / "memory.yaml"
    entity = {
        "type": "conversation_entity",
        "history": {"type": "sqlite", "path": "chat.db"},
        "entity_store": {"type": "sqlite", "db_file": "entities.db"},
    }
    kg = {"type": "conversation_kg", "kg": {"type": "sql", "url": "sqlite:///graph.db"}}
    path.write_text(yaml.safe_dump({"type": "combined", "memories": [entity, kg]}), "utf-8")
    monkeypatch.chdir(tmp_path)  # elsewhere than the config
    members = load_config(path)["memories"]
    assert members[0]["entity_store"]["db_file"] == str(folder / "entities.db")
    assert members[1]["kg"]["url"] == f"sqlite:///{folder / 'graph.db'}"
    assert set(sqlite_files(load_config(path))) == {
        str(folder / name) for name in ("chat.db", "entities.db", "graph.db")
    }
    # inspect never creates a store's file: a missing one is an error naming it.
    assert main(["inspect", "--config", str(path)]) == 2
    assert "Nothing is stored at" in capsys.readouterr().err
    assert not (folder / "entities.db").exists() and not (folder / "graph.db").exists()


@pytest.mark.parametrize("bad", [0, True, "500", 2.5])
def test_import_refuses_a_batch_size_that_is_not_a_whole_number_of_lines(bad: Any) -> None:
    lines = read_jsonl(['{"session_id": "u1", "entity": "Jane", "summary": "x"}'], source="f")
    with pytest.raises(ConfigError, match=f"batch_size must be a whole number >= 1, got {bad!r}"):
        import_jsonl(lines, lambda s: [], batch_size=bad)
