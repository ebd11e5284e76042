"""What the command line prints, and that a command that reads writes nothing (issue 36)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memories import SQLiteHistory
from memories.faces.cli import build_parser, main
from tests.core.test_cli_commands import run
from tests.probes import python
from tests.retention.conftest import EMBEDDINGS


def test_inspect_reads_a_history_kept_for_a_number_of_days(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Inspecting wrapped the retained history in a read-only view that said it kept no times."""
    db = tmp_path / "chat.db"
    SQLiteHistory(db, session_id="u1").append([HumanMessage("I like tea"), AIMessage("Noted.")])
    config = tmp_path / "m.yaml"
    config.write_text(
        f"type: token_buffer\nhistory: {{type: sqlite, path: {db}, session_id: u1}}\n"
        "retention: {keep_days: 7}\n"
    )
    code, out, err = run(["inspect", "--config", str(config)], capsys)
    assert (code, err) == (0, "") and "human: I like tea" in out


def test_inspect_makes_no_chroma_folder_for_a_store_never_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, folder = tmp_path / "chat.db", tmp_path / "vectors.chroma"
    SQLiteHistory(db, session_id="u1").append([HumanMessage("hi")])
    config = tmp_path / "m.yaml"
    config.write_text(
        "type: combined\nmemories:\n"
        f"  - {{type: buffer, history: {{type: sqlite, path: {db}, session_id: u1}}}}\n"
        f"  - {{type: vector, memory_key: recalled, path: {folder}, embeddings: '{EMBEDDINGS}',"
        " namespace: [users, ada]}\n"
    )
    code, _, err = run(["inspect", "--config", str(config)], capsys)
    assert code == 2 and f"Nothing is stored at {str(folder)!r}: the folder does not exist" in err
    assert not folder.exists()


def test_no_help_shows_rest_markup(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for argv in ([], *([name] for name in commands)):
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        out = capsys.readouterr().out
        assert "``" not in out and ":func:" not in out and ":class:" not in out, argv


def test_an_erase_dry_run_names_each_store_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "chat.db"
    SQLiteHistory(db, session_id="maya").append([HumanMessage("hi"), AIMessage("hello")])
    config = tmp_path / "m.yaml"
    config.write_text(
        "type: combined\nmemories:\n"
        f"  - {{type: buffer, history: {{type: sqlite, path: {db}, session_id: u1}}}}\n"
        f"  - {{type: profile, url: 'sqlite:///{tmp_path / 'p.db'}', policy: manual}}\n"
    )
    code, out, err = run(
        ["erase", "--config", str(config), "--session", "maya", "--dry-run"], capsys
    )
    assert code == 0
    printed = (out + err).splitlines()
    stores = [line for line in printed if str(db) in line]
    assert len(stores) == 1 and "2 chat log rows" in stores[0], printed


def test_an_erase_names_each_store_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "chat.db"
    SQLiteHistory(db, session_id="maya").append([HumanMessage("hi"), AIMessage("hello")])
    config = tmp_path / "m.yaml"
    config.write_text(f"type: buffer\nhistory: {{type: sqlite, path: {db}, session_id: u1}}\n")
    code, out, err = run(["erase", "--config", str(config), "--session", "maya", "-y"], capsys)
    assert code == 0
    printed = (out + err).splitlines()
    stores = [line for line in printed if str(db) in line and "compacted" not in line]
    assert len(stores) == 1 and "2 chat log rows" in stores[0], printed
    assert "; 0 remaining" in stores[0] and "erased 2 items; 0 remaining" in out


def test_usage_measures_on_a_copy_and_writes_nothing_to_the_config_stores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: each run of `memories usage` added its conversation to the real session."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    db, folder = tmp_path / "chat.db", tmp_path / "vectors.chroma"
    SQLiteHistory(db, session_id="u1").append([HumanMessage("I like tea"), AIMessage("Noted.")])
    config = tmp_path / "m.yaml"
    config.write_text(
        "type: combined\nmemories:\n"
        "  - {type: buffer, history: {type: sqlite, path: chat.db, session_id: u1}}\n"
        "  - {type: vector, memory_key: recalled, path: vectors.chroma, write: sync,"
        f" embeddings: '{EMBEDDINGS}', namespace: [users, ada]}}\n"
    )
    code, out, err = run(["usage", "--config", str(config)], capsys, "I like coffee too\nbye\n")
    assert code == 0 and "2 turns on a copy of the stores" in err and "buffer" in out
    assert _rows(db) == 2 and not folder.exists()
    assert list((tmp_path / "tmp").iterdir()) == []  # the copy is gone

    code, _, err = run(["usage", "--config", str(config), "--save"], capsys, "I like coffee\n")
    assert code == 0 and "1 turns on the config's stores" in err
    assert _rows(db) == 4 and folder.is_dir()


def test_usage_copies_the_stores_a_config_leaves_at_their_default_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store with no path in the config lives in the data directory: it is measured with
    its data, on a copy, as a store whose path the config names."""
    from memories import create_memory
    from memories.faces.commands.copying import on_a_copy
    from memories.kernel.paths import DATA_DIR_ENV

    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "home"))
    config = {"type": "vector", "embeddings": EMBEDDINGS, "namespace": "users.ada", "write": "sync"}
    create_memory(config).add(["Ada likes green tea"])
    with on_a_copy(config, command="usage") as copied:
        copy = create_memory(copied)
        assert [r.text for r in copy.search("green tea")] == ["Ada likes green tea"]
        copy.add(["Ada likes coffee too"])
    assert create_memory(config).backend.count() == 1


def test_usage_on_a_server_store_needs_save(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "m.yaml"
    url = "postgresql://ada:secret@db.example/memories"
    config.write_text(f"type: buffer\nhistory: {{type: sql, url: '{url}', session_id: u1}}\n")
    code, _, err = run(["usage", "--config", str(config)], capsys, "hi\n")
    assert code == 2 and "cannot be copied: pass --save" in err and "secret" not in err


def _rows(db: Path) -> int:
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(db)) as connection:
        return int(connection.execute("SELECT count(*) FROM memories_messages").fetchone()[0])


def test_inspect_leaves_the_folder_as_it_found_it(tmp_path: Path) -> None:
    """SQLite's -wal and -shm files of a read stayed beside the database after inspect exited."""
    root = Path(__file__).resolve().parents[2]
    write = (
        "from memories import SQLiteHistory; from langchain_core.messages import HumanMessage; "
        "SQLiteHistory('chat.db', session_id='u1').append([HumanMessage('hi')])"
    )
    python("-c", write, cwd=tmp_path)
    (tmp_path / "m.yaml").write_text(
        "type: buffer\nhistory: {type: sqlite, path: chat.db, session_id: u1}\n"
    )
    before = sorted(p.name for p in tmp_path.iterdir())
    result = python(
        "-m", "memories.faces.cli", "inspect", "--config", "m.yaml",
        cwd=tmp_path, env={**__import__("os").environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    assert "human: hi" in result.stdout, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before == ["chat.db", "m.yaml"]
