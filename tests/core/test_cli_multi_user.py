"""The commands on the documented multi-user config: a namespace per user from a template."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from memories import CollectionMemory, SQLiteHistory
from memories.faces.cli import main
from memories.kernel.retention import DAY
from tests.retention.conftest import EMBEDDINGS

USERS = ("ada", "bo", "cy")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """examples/mcp.yaml's shape, with a transcript kept 7 days; each user has one expired item
    and one kept forever, and two old messages in their session."""
    db, chroma = tmp_path / "memories.db", tmp_path / "memories.chroma"
    for user in USERS:
        past = CollectionMemory(
            namespace=("users", user),
            path=str(chroma),
            url=f"sqlite:///{db}",
            embeddings=EMBEDDINGS,
            policy="manual",
            clock=lambda: time.time() - 3600,
        )
        past.put(f"{user} was in Rome", ttl=10)
        past.put(f"{user} likes tea", ttl=None)
        past.flush()
        old = SQLiteHistory(
            tmp_path / "chat.db", session_id=user, clock=lambda: time.time() - 9 * DAY
        )
        old.append([HumanMessage(f"hi from {user}"), AIMessage("hello")])
    path = tmp_path / "memories.yaml"
    path.write_text(
        "type: combined\n"
        "memories:\n"
        "  - type: buffer\n"
        "    history: {type: sqlite, path: chat.db, session_id: ada}\n"
        "    retention: {keep_days: 7}\n"
        "  - type: collection\n"
        "    memory_key: memories\n"
        "    namespace: [users, '{user_id}']\n"
        "    url: sqlite:///memories.db\n"
        "    path: memories.chroma\n"
        f"    embeddings: {EMBEDDINGS}\n"
        "    policy: manual\n"
    )
    return path


def _held(tmp_path: Path, user: str) -> list[str]:
    memory = CollectionMemory(
        namespace=("users", user),
        path=str(tmp_path / "memories.chroma"),
        url=f"sqlite:///{tmp_path / 'memories.db'}",
        embeddings=EMBEDDINGS,
        hide_expired=False,  # what is stored, swept or not
    )
    return sorted(str(record.content) for record in memory.list())


def test_a_dry_run_counts_every_users_namespace_in_words(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "--config", str(config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    for user in USERS:
        assert f"namespace users/{user}: 1" in out and f"session {user}: 2" in out
    assert "would delete 3 items" in out and "would delete 6 messages" in out
    assert "messages older than 7 days" in out and "sqlite history" in out
    assert "{'" not in out and "Retention(" not in out and "RetainedHistory" not in out
    assert _held(tmp_path, "ada") == ["ada likes tea", "ada was in Rome"]


def test_namespace_and_session_sweep_only_that_persons_data(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "--config", str(config), "--namespace", "users.ada"]) == 0
    out = capsys.readouterr().out
    assert "deleted 1 items (namespace users.ada only)" in out and "users/bo" not in out
    assert "histories: not swept (--namespace users.ada names no session)" in out
    assert _held(tmp_path, "ada") == ["ada likes tea"]
    assert _held(tmp_path, "bo") == ["bo likes tea", "bo was in Rome"]
    assert len(SQLiteHistory(tmp_path / "chat.db", session_id="ada").records()) == 2

    assert main(["sweep", "--config", str(config), "--session", "bo"]) == 0
    out, err = capsys.readouterr()
    assert "deleted 2 messages (session bo only)" in out and "session bo: 2" in out
    assert "items" not in out and "--session bo sweeps histories only" in err
    assert SQLiteHistory(tmp_path / "chat.db", session_id="bo").records() == []
    assert len(SQLiteHistory(tmp_path / "chat.db", session_id="cy").records()) == 2
    assert _held(tmp_path, "bo") == ["bo likes tea", "bo was in Rome"]

    assert main(["sweep", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "deleted 2 items" in out and "deleted 4 messages" in out
    assert [_held(tmp_path, user) for user in USERS] == [[f"{u} likes tea"] for u in USERS]


def test_a_config_without_a_history_says_it_keeps_no_transcript(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "collection.yaml"  # on the stores the fixture made
    config.write_text(
        "type: collection\n"
        "namespace: [users, '{user_id}']\n"
        f"url: sqlite:///{tmp_path / 'memories.db'}\n"
        f"path: {tmp_path / 'memories.chroma'}\n"
        f"embeddings: {EMBEDDINGS}\n"
        "ttl: 60\n"
    )
    assert main(["sweep", "--config", str(config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "histories: none in this config" in out
    assert "60 minutes" in out and "{'ttl'" not in out


def test_a_history_without_retention_is_named_as_kept_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    SQLiteHistory(tmp_path / "c.db").append([HumanMessage("hi")])
    config = tmp_path / "memories.yaml"
    config.write_text(f"type: buffer\nhistory: {{type: sqlite, path: {tmp_path / 'c.db'}}}\n")
    assert main(["sweep", "--config", str(config), "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert "no retention: every message is kept" in captured.out
    assert "no memory of this config has a retention or a time to live" in captured.err


def test_a_command_on_one_person_names_the_namespaces_to_choose_from(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("inspect", "clear", "chat", "usage"):
        assert main([command, "--config", str(config)]) == 2
        err = capsys.readouterr().err
        assert f"`memories {command}` works on one person's memories" in err
        assert (
            "--namespace users.ada" in err
            and "Its stores hold 3: users.ada, users.bo, users.cy" in err
        )
    assert main(["inspect", "--config", str(config), "--namespace", "users.bo", "--all"]) == 0
    out = capsys.readouterr().out
    assert "bo likes tea" in out and "ada likes tea" not in out


def test_an_export_of_one_user_imports_into_the_templated_config(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = tmp_path / "bo.jsonl"
    argv = ["--config", str(config), "--namespace", "users.bo", "--session", "bo"]
    assert main(["export", *argv, "-o", str(exported)]) == 0
    assert main(["clear", *argv, "--erase-namespace", "-y"]) == 0
    assert _held(tmp_path, "bo") == []
    assert main(["import", "--config", str(config), str(exported), "--no-progress"]) == 0
    capsys.readouterr()
    assert "bo likes tea" in _held(tmp_path, "bo") and _held(tmp_path, "ada")


def test_export_and_dead_letters_cover_every_users_namespace(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = tmp_path / "all.jsonl"
    assert main(["export", "--config", str(config), "-o", str(exported)]) == 0
    assert "6 documents" in capsys.readouterr().err  # (the session's messages are past retention)
    text = exported.read_text()
    assert all(f"{user} likes tea" in text for user in USERS)
    assert main(["dead-letters", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert all(f"vector namespace users.{user} in" in out for user in USERS)


def test_sweep_and_reshard_of_stores_never_made_make_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dry run of `memories sweep` on examples/mcp.yaml made memories.db; reshard, the folder."""
    import shutil

    root = Path(__file__).resolve().parents[2]
    config = shutil.copy(root / "examples" / "mcp.yaml", tmp_path / "mcp.yaml")
    for command in (["sweep", "--dry-run"], ["sweep"], ["reshard", "--dry-run"]):
        assert main([*command, "--config", str(config)]) == 0
        assert "nothing is stored yet" in capsys.readouterr().err
        assert [p.name for p in tmp_path.iterdir()] == ["mcp.yaml"]
