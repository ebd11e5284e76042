"""`memories chat / inspect / export / import / clear` on config files."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from langchain_core.messages import AIMessage, HumanMessage

from memories import SQLiteHistory, VectorMemory
from memories.faces.cli import LLM_ENV, main
from tests.contract.history_contract import rich_messages
from tests.probes import killed_after, python

ROOT = Path(__file__).resolve().parents[2]
EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"


def write_config(path: Path, config: dict) -> Path:  # type: ignore[type-arg]
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "chat.db"


@pytest.fixture
def config(tmp_path: Path, db: Path) -> Path:
    history = {"type": "sqlite", "path": str(db), "session_id": "u1"}
    return write_config(tmp_path / "memory.yaml", {"type": "window", "k": 2, "history": history})


def run(
    argv: list[str], capsys: pytest.CaptureFixture[str], stdin: str = ""
) -> tuple[int, str, str]:
    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        code = main(argv)
    finally:
        sys.stdin = old
    out, err = capsys.readouterr()
    return code, out, err


# -- chat -------------------------------------------------------------------------


def test_chat_reads_piped_lines_saves_turns_and_says_it_is_offline(config: Path, db: Path) -> None:
    result = python(
        "-m", "memories.faces.cli", "chat", "--config", str(config),
        input="Hi, I'm Ada.\n\nI like tea.\n",
        cwd=ROOT,
    )  # fmt: skip
    replies = result.stdout.splitlines()
    assert len(replies) == 2 and all(r.startswith("assistant> (offline echo)") for r in replies)
    assert "I was shown 2 earlier messages" in replies[1]  # the memory reached the model
    assert "offline echo model" in result.stderr
    saved = [m.text for m in SQLiteHistory(db, session_id="u1").messages]
    assert saved[0::2] == ["Hi, I'm Ada.", "I like tea."]


def test_chat_memory_command_shows_the_window_and_quit_stops(
    config: Path, capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    code, out, _ = run(
        ["chat", "--config", str(config), "--session", "s9"],
        capsys,
        "one\ntwo\nthree\n/memory\n/quit\nnever sent\n",
    )
    assert code == 0
    lines = out.split("assistant>")[-1].splitlines()[1:]
    shown = [line for line in lines if not line.startswith("  ")]  # not a wrapped line's rest
    assert [line.split(":")[0].strip() for line in shown] == ["human", "ai", "human", "ai"]
    assert "human: two" in out and "human: one" not in out.split("/memory")[-1].split("\n", 4)[-1]
    assert len(SQLiteHistory(db, session_id="s9").messages) == 6
    assert SQLiteHistory(db, session_id="u1").messages == []


def test_chat_takes_the_model_from_the_environment(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LLM_ENV, "not-a-model-string")
    code, _, err = run(["chat", "--config", str(config)], capsys, "hi\n")
    assert code == 2 and "provider:model" in err


def test_chat_with_a_system_prompt_sends_it(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["chat", "--config", str(config), "--system", "Be terse."], capsys, "hi\n")
    assert code == 0 and "9 characters of system text" in out


# -- inspect ----------------------------------------------------------------------


def test_inspect_shows_messages_state_and_what_is_injected(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = {"type": "sqlite", "path": str(db), "session_id": "u1"}
    config = write_config(
        tmp_path / "tb.yaml", {"type": "token_buffer", "max_token_limit": 40, "history": history}
    )
    SQLiteHistory(db, session_id="u1").append(rich_messages()[1:])
    code, out, _ = run(["inspect", "--config", str(config)], capsys)
    assert code == 0
    assert "4 messages" in out
    assert 'ai: [["weather", {"city": "Paris"}]]' in out
    assert "tool[weather]: 18C, sunny" in out
    assert "state of TokenBufferMemory" in out and '"total"' in out
    assert "what the memory adds to the next prompt (" in out


def test_inspect_last_limits_the_listing(
    config: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    SQLiteHistory(db, session_id="u1").append([HumanMessage(f"m{i}") for i in range(30)])
    _, out, _ = run(["inspect", "--config", str(config), "--last", "3"], capsys)
    assert "30 messages (last 3 shown)" in out and "human: m27" in out and "human: m26" not in out
    _, out, _ = run(["inspect", "--config", str(config), "--all"], capsys)
    assert "human: m0" in out


# -- export / import ----------------------------------------------------------------


def exported_u1(tmp_path: Path, config: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """Session u1 holding :func:`rich_messages`, exported to a file by the CLI."""
    SQLiteHistory(db, session_id="u1").append(rich_messages())
    dump = tmp_path / "u1.jsonl"
    assert run(["export", "--config", str(config), "-o", str(dump)], capsys)[0] == 0
    return dump


def test_export_then_import_is_lossless_with_tool_calls(
    tmp_path: Path, config: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = exported_u1(tmp_path, config, db, capsys)
    lines = [json.loads(line) for line in dump.read_text(encoding="utf-8").splitlines()]
    assert [line["session_id"] for line in lines] == ["u1"] * 5

    other = write_config(
        tmp_path / "other.yaml",
        {"type": "buffer", "history": {"type": "sqlite", "path": str(tmp_path / "other.db")}},
    )
    code, _, err = run(["import", "--config", str(other), str(dump)], capsys)
    assert code == 0 and "5 messages into 1 session" in err
    assert SQLiteHistory(tmp_path / "other.db", session_id="u1").messages == rich_messages()


def test_export_to_stdout_and_import_from_stdin_into_another_session(
    config: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    SQLiteHistory(db, session_id="u1").append([HumanMessage("hi"), AIMessage("hello")])
    _, exported, _ = run(["export", "--config", str(config)], capsys)
    code, _, _ = run(
        ["import", "--config", str(config), "--session", "copy", "-"], capsys, exported
    )
    assert code == 0
    assert SQLiteHistory(db, session_id="copy").messages == [HumanMessage("hi"), AIMessage("hello")]


def test_import_routes_lines_to_their_sessions_in_batches_with_progress(
    tmp_path: Path, config: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        json.dumps({"session_id": s, "message": {"type": "human", "data": {"content": f"{s}{i}"}}})
        for s, i in [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("a", 3)]
    ]
    dump = tmp_path / "many.jsonl"
    dump.write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = ["import", "--config", str(config), str(dump), "--batch-size", "2", "--progress"]
    code, _, err = run(argv, capsys)
    assert code == 0 and "5/5" in err and "2 session(s)" in err
    a_seqs = [e.seq for e in SQLiteHistory(db, session_id="a").entries()]
    assert [m.text for m in SQLiteHistory(db, session_id="a").messages] == ["a0", "a1", "a2", "a3"]
    assert a_seqs == sorted(a_seqs)
    assert [m.text for m in SQLiteHistory(db, session_id="b").messages] == ["b0"]


def test_a_bad_import_line_is_named_and_nothing_is_written(
    tmp_path: Path, config: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = json.dumps({"session_id": "u1", "message": {"type": "human", "data": {"content": "x"}}})
    dump = tmp_path / "bad.jsonl"
    dump.write_text(f"{good}\n{{not json\n", encoding="utf-8")
    code, _, err = run(["import", "--config", str(config), str(dump)], capsys)
    assert code == 2 and "bad.jsonl:2" in err and "Nothing was imported" in err
    assert SQLiteHistory(db, session_id="u1").messages == []


@pytest.mark.parametrize(
    "metadata",
    [{"place": {"city": "Porto"}}, {"$where": 1}, {"versions": [{"content": "x", "metadata": []}]}],
)
def test_a_document_whose_metadata_cannot_be_stored_is_named_and_nothing_is_written(
    tmp_path: Path,
    db: Path,
    capsys: pytest.CaptureFixture[str],
    metadata: dict,  # type: ignore[type-arg]
) -> None:
    history = {"type": "sqlite", "path": str(db), "session_id": "u1"}
    vector = {"type": "vector", "path": str(tmp_path / "chroma"), "write": "sync",
              "embeddings": EMBEDDINGS, "memory_key": "recalled"}  # fmt: skip
    memories = [{"type": "buffer", "history": history}, vector]
    config = write_config(tmp_path / "both.yaml", {"type": "combined", "memories": memories})
    lines = [
        {"session_id": "u1", "message": {"type": "human", "data": {"content": "hi"}}},
        {"namespace": ["users", "ada"], "id": "d1", "text": "Ada likes tea", "metadata": {}},
        {"namespace": ["users", "bo"], "id": "d2", "text": "Bo likes tea", "metadata": metadata},
    ]
    dump = tmp_path / "bad.jsonl"
    dump.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    code, _, err = run(["import", "--config", str(config), str(dump)], capsys)
    assert code == 2 and "bad.jsonl:3" in err and "Nothing was imported" in err
    assert SQLiteHistory(db, session_id="u1").messages == []
    vector.pop("type"), vector.pop("memory_key")
    assert VectorMemory(**vector, namespace="users.ada").export_documents() == []


def test_a_line_holding_a_lone_surrogate_anywhere_is_named_and_nothing_is_written(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = {"type": "sqlite", "path": str(db), "session_id": "u1"}
    facts = {"type": "collection", "path": str(tmp_path / "chroma"), "policy": "manual",
             "url": f"sqlite:///{tmp_path / 'facts.db'}", "embeddings": EMBEDDINGS,
             "memory_key": "facts"}  # fmt: skip
    memories = [{"type": "buffer", "history": history}, facts]
    config = write_config(tmp_path / "both.yaml", {"type": "combined", "memories": memories})
    versions = [{"content": "Ada likes \ud800 tea", "metadata": {}}, {"content": "Ada likes tea"}]
    lines = [
        {"session_id": "u1", "message": {"type": "human", "data": {"content": "hi"}}},
        {"namespace": ["users", "ada"], "id": "m1", "text": "Ada likes tea",
         "metadata": {"versions": versions}},
    ]  # fmt: skip
    dump = tmp_path / "bad.jsonl"
    dump.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    code, _, err = run(["import", "--config", str(config), str(dump)], capsys)
    assert code == 2 and "bad.jsonl:2" in err and "lone surrogate" in err
    assert "Nothing was imported" in err and SQLiteHistory(db, session_id="u1").messages == []


def test_import_of_a_missing_file_is_a_clear_error(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["import", "--config", str(config), "nope.jsonl"], capsys)
    assert code == 2 and "nope.jsonl" in err


# -- clear --------------------------------------------------------------------------


def test_clear_asks_and_keeps_the_session_unless_confirmed(
    config: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    SQLiteHistory(db, session_id="u1").append([HumanMessage("keep me")])
    code, _, err = run(["clear", "--config", str(config)], capsys, "n\n")
    assert code == 1 and "nothing erased" in err
    assert len(SQLiteHistory(db, session_id="u1").messages) == 1
    code, _, err = run(["clear", "--config", str(config)], capsys, "y\n")
    assert code == 0 and "session 'u1': 1 messages" in err
    assert SQLiteHistory(db, session_id="u1").messages == []


def test_clear_erases_one_session_and_the_memory_state(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = {"type": "sqlite", "path": str(db), "session_id": "u1"}
    config = write_config(tmp_path / "tb.yaml", {"type": "token_buffer", "history": history})
    for session in ("u1", "u2"):
        SQLiteHistory(db, session_id=session).append([HumanMessage("hi"), AIMessage("yo")])
    run(["inspect", "--config", str(config), "--session", "u2"], capsys)  # computes state
    code, _, _ = run(["clear", "--config", str(config), "--session", "u2", "--yes"], capsys)
    assert code == 0
    cleared = SQLiteHistory(db, session_id="u2")
    assert cleared.messages == [] and cleared.load_state("anything") is None
    assert len(SQLiteHistory(db, session_id="u1").messages) == 2


# -- errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("type: bufer\n", "valid types"),
        ("type: window\nk: -1\n", "k: Input should be greater than or equal to 0, got -1"),
        ("type: window\nwindow_size: 3\n", "window_size"),
        ("type: buffer\nhistory: {type: redis}\n", "Unknown history type 'redis'"),
        ("type: [unclosed\n", "is not valid"),
        ("- a list\n", "must hold a mapping"),
    ],
)
@pytest.mark.parametrize("command", ["chat", "inspect", "export", "clear"])
def test_a_bad_config_exits_2_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, content: str, message: str
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(content, encoding="utf-8")
    argv = [command, "--config", str(config), *(["--yes"] if command == "clear" else [])]
    code, _, err = run(argv, capsys)
    assert code == 2 and message in err and err.startswith("memories: ")


def test_a_missing_config_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["inspect", "--config", "/nowhere/memory.yaml"], capsys)
    assert code == 2 and "does not exist" in err


@pytest.mark.parametrize("command", [["inspect"], ["export"], ["import", "-"]])
def test_commands_on_an_in_memory_history_say_why_they_cannot_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    config = write_config(tmp_path / "m.yaml", {"type": "buffer"})
    code, _, err = run([command[0], "--config", str(config), *command[1:]], capsys)
    assert code == 2 and "outlives the process" in err


def test_export_of_a_memory_without_history_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "s.yaml", {"type": "simple", "memories": {"a": "b"}})
    code, _, err = run(["export", "--config", str(config)], capsys)
    assert code == 2 and "keeps none" in err


def test_an_export_names_the_memories_it_leaves_out(tmp_path: Path, config: Path) -> None:
    # A profile's document is not part of an export: a backup made with it must say so.
    history = {"type": "sqlite", "path": str(tmp_path / "chat.db"), "session_id": "u1"}
    profile = {"type": "profile", "policy": "manual", "url": f"sqlite:///{tmp_path / 'p.db'}"}
    combined = write_config(
        tmp_path / "both.yaml",
        {"type": "combined", "memories": [{"type": "window", "history": history}, profile]},
    )
    SQLiteHistory(tmp_path / "chat.db", session_id="u1").add_messages([HumanMessage("hi")])
    both = python("-m", "memories.faces.cli", "export", "--config", str(combined), cwd=ROOT)
    assert json.loads(both.stdout)["message"]["data"]["content"] == "hi"
    assert "memories export leaves out ProfileMemory (not exportable" in both.stderr
    window_only = python("-m", "memories.faces.cli", "export", "--config", str(config), cwd=ROOT)
    assert "leaves out" not in window_only.stderr


@pytest.mark.parametrize(
    "command", ["demo", "chat", "inspect", "export", "import", "clear", "reshard"]
)
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0 and f"usage: memories {command}" in capsys.readouterr().out


def test_chat_with_a_background_summary_finishes_its_fold_before_exiting(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = {"type": "sqlite", "path": str(db), "session_id": "u1"}
    config = write_config(
        tmp_path / "s.yaml",
        {
            "type": "summary_buffer",
            "max_token_limit": 40,
            "summarize": "background",
            "debounce": 60,
            "history": history,
        },
    )
    lines = "".join(f"Line {i}: I collect old maps of Lisbon and Porto.\n" for i in range(6))
    code, _, _ = run(["chat", "--config", str(config)], capsys, lines)
    assert code == 0
    _, out, _ = run(["inspect", "--config", str(config)], capsys)
    assert "System: " in out or "system: " in out  # the summary was folded before exit


# -- profiles -----------------------------------------------------------------------


@pytest.fixture
def profile_config(tmp_path: Path) -> Path:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    return write_config(
        tmp_path / "profile.yaml",
        {"type": "profile", "policy": "manual", "namespace": ["users", "maya"], "url": url},
    )


def test_inspect_shows_a_profile_its_version_and_changes(
    profile_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memories import create_memory

    profile = create_memory(profile_config)
    profile.put({"name": "Maya"})
    profile.update([{"op": "add", "path": "/drink", "value": "black coffee"}])
    code, out, _ = run(["inspect", "--config", str(profile_config)], capsys)
    assert code == 0
    assert "profile users.maya/profile" in out and "version 2, 0 turns pending" in out
    assert '"drink": "black coffee"' in out
    assert 'change #2 patch v2: [{"op": "add", "path": "/drink"' in out
    assert "what the memory adds to the next prompt (" in out and "black coffee" in out


def test_namespace_picks_another_users_profile(
    profile_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memories import create_memory

    create_memory(profile_config).put({"name": "Maya"})
    _, out, _ = run(
        ["inspect", "--config", str(profile_config), "--namespace", "users.ines"], capsys
    )
    assert "profile users.ines/profile" in out and "version 0" in out and "Maya" not in out


def test_clear_empties_a_profile_as_a_change_that_can_be_rolled_back(
    profile_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memories import create_memory

    profile = create_memory(profile_config)
    profile.put({"name": "Maya"})
    code, out, err = run(["clear", "--config", str(profile_config)], capsys, "y\n")
    assert code == 2 and "--erase-namespace erases profiles" in err  # a session holds no profile
    assert profile.get() == {"name": "Maya"}
    argv = ["clear", "--config", str(profile_config), "--erase-namespace"]
    code, out, err = run(argv, capsys, "y\n")
    assert code == 0 and "profile users.maya/profile" in out
    assert "emptied as version 2 (rollback(1) restores it)" in err
    assert not profile.get()
    profile.rollback(1)
    assert profile.get() == {"name": "Maya"}


def test_clear_of_a_memory_with_nothing_to_erase_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "s.yaml", {"type": "simple", "memories": {"a": "b"}})
    code, _, err = run(["clear", "--config", str(config), "--yes"], capsys)
    assert code == 2 and "keeps no data to erase" in err


# -- vector memories ----------------------------------------------------------------


@pytest.fixture
def vector_config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path / "vector.yaml",
        {"type": "vector", "path": str(tmp_path / "chroma"), "namespace": ["users", "maya"]},
    )


def saved_turns(config: Path, turns: list[tuple[str, str]]) -> None:
    from memories import create_memory

    memory = create_memory(config)
    for question, answer in turns:
        memory.save_context({"input": question}, {"output": answer})


def test_inspect_lists_a_vector_namespaces_documents(
    vector_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved_turns(vector_config, [("My sister lives in Porto.", "Nice."), ("I like jazz.", "Cool.")])
    code, out, _ = run(["inspect", "--config", str(vector_config)], capsys)
    assert code == 0
    assert "vector namespace users.maya in the Chroma folder" in out and "2 documents" in out
    assert "[default] input: My sister lives in Porto. | output: Nice." in out


def test_vector_documents_export_and_import_into_another_namespace(
    vector_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memories import create_memory
    from memories.core.config import with_namespace

    saved_turns(vector_config, [("My sister lives in Porto.", "Nice."), ("I like jazz.", "Cool.")])
    code, exported, err = run(["export", "--config", str(vector_config)], capsys)
    assert code == 0 and "0 messages, 2 documents" in err
    lines = [json.loads(line) for line in exported.splitlines()]
    assert [line["namespace"] for line in lines] == [["users", "maya"]] * 2
    assert lines[0]["metadata"]["session"] == "default" and "namespace" not in lines[0]["metadata"]

    argv = ["import", "--config", str(vector_config), "--namespace", "users.copy", "-"]
    code, _, err = run(argv, capsys, exported)
    assert code == 0 and "2 documents" in err
    copy = create_memory(with_namespace(vector_config, "users.copy"))
    assert copy.search("Where does my sister live?", k=1)[0].text.startswith("input: My sister")
    run(argv, capsys, exported)  # the same ids again: replaced, not duplicated
    assert len(copy.search("anything", k=10)) == 2


def test_clear_erases_a_vector_namespace(
    vector_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memories import create_memory

    saved_turns(vector_config, [("I like jazz.", "Cool.")])
    argv = ["clear", "--config", str(vector_config), "--session", "other", "--yes"]
    code, _, err = run(argv, capsys)
    assert code == 0 and "0 documents (1 of other sessions kept" in err
    assert len(create_memory(vector_config).search("jazz", k=5)) == 1
    argv = ["clear", "--config", str(vector_config), "--erase-namespace", "--yes"]
    code, _, err = run(argv, capsys)
    assert code == 0 and "vector namespace users.maya: 1 documents" in err
    assert create_memory(vector_config).search("jazz", k=5) == []


def test_documents_cannot_be_imported_into_a_config_without_a_vector_memory(
    config: Path, capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    line = json.dumps({"namespace": ["u"], "id": "d1", "text": "hello", "metadata": {}})
    code, _, err = run(["import", "--config", str(config), "-"], capsys, line + "\n")
    assert code == 2 and "no vector memory to take them" in err
    assert SQLiteHistory(db, session_id="u1").messages == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"type: [buffer]\n", "Unknown memory type ['buffer']"),
        (b"type: {a: 1}\n", "Unknown memory type {'a': 1}"),
        (b"type: vector\nnamespace: 5\n", "namespace"),
        (b"type: buffer\n\xff\xfe\n", "is not UTF-8 text"),
    ],
)
def test_bad_configs_are_messages_not_tracebacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    """Issue 10, item 11: each of these ended in a traceback (exit 1)."""
    config = tmp_path / "bad.yaml"
    config.write_bytes(content)
    code, _, err = run(["inspect", "--config", str(config)], capsys)
    assert code == 2 and err.startswith("memories: ") and message in err


def test_bad_numbers_and_paths_are_messages_not_tracebacks(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["inspect", "--config", str(config), "--last", "-1"])
    assert exited.value.code == 2 and "must be a whole number > 0" in capsys.readouterr().err
    target = tmp_path / "missing" / "dir" / "out.jsonl"
    code, _, err = run(["export", "--config", str(config), "-o", str(target)], capsys)
    assert code == 2 and "No such file or directory" in err and str(target) in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"session_id": "u1", "message": {"type": "human", "data": {"content": "ok"}}}\n\xff\n',
         "not UTF-8 text"),
        (b"[" * 100_000 + b"\n", "2: not a line of a `memories export` file"),
        (b'{"session_id": "u1", "message": {"type": "ai", "data": {"content": "x", '
         b'"tool_calls": "garbage"}}}\n', "2: not a line of a `memories export` file"),
        (b'{"session_id": "u1", "message": {"type": "human", "data": {"content": "\\ud800"}}}\n',
         "lone surrogate"),
    ],
    ids=["not-utf8", "deep-json", "garbage-tool-calls", "lone-surrogate"],
)  # fmt: skip
def test_a_bad_import_file_is_a_message_and_imports_nothing(
    config: Path, db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    content: bytes, message: str,
) -> None:  # fmt: skip
    """Issue 10, items 10 and 11: tracebacks, and rows committed before the bad line."""
    good = b'{"session_id": "u1", "message": {"type": "human", "data": {"content": "first"}}}\n'
    export = tmp_path / "bad.jsonl"
    export.write_bytes(good + content)
    code, _, err = run(["import", "--config", str(config), str(export)], capsys)
    assert code == 2 and message in err and "Traceback" not in err
    assert SQLiteHistory(db, session_id="u1").messages == []


def test_inspect_never_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 10, item 11: a missing file was created, a missing session got a state row."""
    missing = tmp_path / "nowhere" / "chat.db"
    config = write_config(
        tmp_path / "c.yaml",
        {"type": "token_buffer", "history": {"type": "sqlite", "path": str(missing)}},
    )
    code, _, err = run(["inspect", "--config", str(config)], capsys)
    assert code == 2 and "the file does not exist" in err
    assert not missing.parent.exists()
    db = tmp_path / "chat.db"
    SQLiteHistory(db, session_id="someone").add_messages([HumanMessage("hi")])
    config = write_config(
        tmp_path / "d.yaml",
        {"type": "token_buffer", "history": {"type": "sqlite", "path": str(db)}},
    )
    code, out, _ = run(["inspect", "--config", str(config), "--session", "nobody"], capsys)
    assert code == 0 and "no messages" in out
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(db)) as connection:
        rows = connection.execute("SELECT count(*) FROM memories_state").fetchone()[0]
    assert rows == 0  # no state row was saved for the session that has no messages

    # A session with messages: its derived state is shown as it would be, not saved.
    code, out, _ = run(["inspect", "--config", str(config), "--session", "someone"], capsys)
    assert code == 0 and "state of TokenBufferMemory" in out and "human: hi" in out
    with closing(sqlite3.connect(db)) as connection:
        rows = connection.execute("SELECT count(*) FROM memories_state").fetchone()[0]
    assert rows == 0


def test_importing_an_export_twice_or_into_its_own_session_changes_nothing(
    tmp_path: Path, config: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 10, item 10: re-running an import duplicated it; into its own session, doubled it."""
    dump = exported_u1(tmp_path, config, db, capsys)
    code, _, err = run(["import", "--config", str(config), str(dump)], capsys)
    assert code == 0 and "0 written" in err
    assert SQLiteHistory(db, session_id="u1").messages == rich_messages()

    for _ in range(2):
        assert (
            run(["import", "--config", str(config), "--session", "copy", str(dump)], capsys)[0] == 0
        )
    assert SQLiteHistory(db, session_id="copy").messages == rich_messages()

    # An import that stopped half-way is finished by running it again.
    half = tmp_path / "half.jsonl"
    half.write_text(
        "".join(dump.read_text(encoding="utf-8").splitlines(True)[:2]), encoding="utf-8"
    )
    run(["import", "--config", str(config), "--session", "resumed", str(half)], capsys)
    code, _, err = run(
        ["import", "--config", str(config), "--session", "resumed", str(dump)], capsys
    )
    assert code == 0 and "3 written" in err
    assert SQLiteHistory(db, session_id="resumed").messages == rich_messages()

    # New messages after an import are kept, and a later import of the same file adds nothing.
    SQLiteHistory(db, session_id="copy").append([HumanMessage("afterwards")])
    run(["import", "--config", str(config), "--session", "copy", str(dump)], capsys)
    assert SQLiteHistory(db, session_id="copy").messages == [
        *rich_messages(),
        HumanMessage("afterwards"),
    ]


def test_a_reader_that_leaves_early_gets_no_traceback(config: Path, db: Path) -> None:
    """Issue 10, item 11: `memories export | head` ended in a BrokenPipeError traceback."""
    SQLiteHistory(db, session_id="u1").append([HumanMessage(f"message {i}") for i in range(5000)])
    process = subprocess.Popen(
        [sys.executable, "-m", "memories.faces.cli", "export", "--config", str(config)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    with killed_after(process, 60):  # a hung export ends the readline: the test fails
        first = process.stdout.readline()
    process.stdout.close()  # as `head -1` does
    error = process.communicate(timeout=60)[1].decode()
    assert b"message 0" in first
    assert "Traceback" not in error and "BrokenPipeError" not in error


def test_chat_commands_are_answered_locally_and_never_saved() -> None:
    """Issue 16: /help and /foo went to the model and were saved; /memory cut lines."""
    import io

    from memories import BufferMemory
    from memories.faces.commands import CHAT_HELP, chat
    from memories.testing import ScriptedChatModel

    memory = BufferMemory()
    long_message = "my plans for the summer are " + "quite long and detailed " * 20
    lines = ["/help", "/foo bar", long_message, "/memory", "//etc is a folder", "/clear",
             "/memory", "/quit", "never read"]  # fmt: skip
    out = io.StringIO()
    turns = chat(memory, ScriptedChatModel(), lines, out)
    text = out.getvalue()
    assert turns == 2
    assert CHAT_HELP in text and "unknown command /foo; /help lists the commands" in text
    shown = "".join(text.split("assistant>")[1].split())  # from the first reply on, unwrapped
    # The echoed reply, then /memory's human message and that reply: each in full, none cut.
    assert shown.count("quitelonganddetailed") == 60 and "…" not in text
    assert "(this session's memory is erased)" in text and text.rstrip().endswith("is empty)")
    assert memory.load_memory_variables({}) == {"history": ""}


def test_import_shows_progress_while_it_checks_and_demo_makes_no_folders(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 16: the import bar came after seconds of silence; --db made missing folders."""
    line = json.dumps({"session_id": "u1", "message": {"type": "human", "data": {"content": "x"}}})
    dump = tmp_path / "one.jsonl"
    dump.write_text(line + "\n", encoding="utf-8")
    code, _, err = run(["import", "--config", str(config), str(dump), "--progress"], capsys)
    assert code == 0 and "check: 1line" in err and "import: 100%" in err
    missing = tmp_path / "no" / "such" / "demo.db"
    code, _, err = run(["demo", "--db", str(missing)], capsys)
    assert code == 2 and "does not exist" in err and not (tmp_path / "no").exists()


def test_examples_export_with_their_feedback_and_import_into_another_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memories import ExampleMemory, create_memory
    from memories.core.config import with_namespace

    config = write_config(
        tmp_path / "examples.yaml",
        {"type": "examples", "path": str(tmp_path / "chroma"), "namespace": ["agents", "a"]},
    )
    memory = create_memory(config)
    assert isinstance(memory, ExampleMemory)
    memory.save_context({"input": "Summarise: meeting moved"}, {"output": "Meeting moved."})
    memory.feedback(memory.last_turn_id or "", 1.0)
    memory.add_example({"input": "Translate hi", "output": "Salut"})
    memory.close()

    code, exported, err = run(["export", "--config", str(config)], capsys)
    assert code == 0 and "0 messages, 2 documents" in err
    argv = ["import", "--config", str(config), "--namespace", "agents.b", "-"]
    code, _, err = run(argv, capsys, exported)
    assert code == 0 and "2 documents" in err
    copy = create_memory(with_namespace(config, "agents.b"))
    assert isinstance(copy, ExampleMemory)
    (rated,) = copy.select("summarise the meeting", min_feedback=0.5)
    assert rated.values == {"input": "Summarise: meeting moved", "output": "Meeting moved."}
    assert rated.feedback == 1.0


def test_collections_export_their_versions_and_import_them_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memories import CollectionMemory, create_memory
    from memories.core.config import with_namespace

    config = write_config(
        tmp_path / "collection.yaml",
        {
            "type": "collection",
            "path": str(tmp_path / "chroma"),
            "url": f"sqlite:///{tmp_path / 'ledger.db'}",
            "namespace": ["users", "ana"],
        },
    )
    memory = create_memory(config)
    assert isinstance(memory, CollectionMemory)
    home = memory.put("Ana lives in Lisbon")
    memory.update(home, "Ana lives in Porto")
    gone = memory.put("Ana has a cat")
    memory.delete(gone)

    code, out, _ = run(["inspect", "--config", str(config)], capsys)
    assert code == 0 and "Ana lives in Porto" in out
    code, exported, err = run(["export", "--config", str(config)], capsys)
    assert code == 0 and "2 documents" in err
    versions = {
        json.loads(line)["id"]: json.loads(line)["metadata"]["versions"]
        for line in exported.splitlines()
    }
    assert [v["content"] for v in versions[home]] == ["Ana lives in Lisbon", "Ana lives in Porto"]

    argv = ["import", "--config", str(config), "--namespace", "users.copy", "-"]
    assert run(argv, capsys, exported)[0] == 0
    copy = create_memory(with_namespace(config, "users.copy"))
    assert isinstance(copy, CollectionMemory)
    assert [r.content for r in copy.list()] == ["Ana lives in Porto"]
    assert [v.content for v in copy.history(home)] == ["Ana lives in Lisbon", "Ana lives in Porto"]
    assert [v.kind for v in copy.history(gone)] == ["put", "delete"]
    run(argv, capsys, exported)  # again: nothing replayed twice
    assert len(copy.history(home)) == 2

    code, _, _ = run(["clear", "--config", str(config), "--yes", "--erase-namespace"], capsys)
    assert code == 0 and create_memory(config).list() == []


def test_dead_letters_lists_refused_documents_and_retry_writes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An operator sees and retries, from the shell, what the store refused."""
    from memories import VectorMemory
    from tests.vector.test_persistence import _picky

    folder = str(tmp_path / "chroma")
    picky = VectorMemory(path=folder, namespace=["users", "maya"], embeddings=_picky())
    picky.search("warm up")  # index loaded: saves are queued and written together
    for line in ("I live in Oslo", "POISON pasted document", "my cat is Tom"):
        picky.save_context({"input": line}, {"output": "ok"})
    assert picky.flush() is True
    picky.close()
    config = write_config(
        tmp_path / "vector.yaml",
        {"type": "vector", "path": folder, "namespace": ["users", "maya"],
         "embeddings": "tests.vector.conftest:WordEmbeddings"},
    )  # fmt: skip
    code, out, _ = run(["dead-letters", "--config", str(config)], capsys)
    assert code == 0
    assert "vector namespace users.maya in the Chroma folder" in out
    assert "1 documents set aside" in out and "input too long for this model" in out
    assert "input: POISON pasted document" in out
    code, out, _ = run(["dead-letters", "--config", str(config), "--retry"], capsys)
    assert code == 0 and "1 set-aside documents queued again and written" in out
    assert "0 documents set aside" in out
    code, _, err = run(["dead-letters", "--config", str(tmp_path / "nope.yaml")], capsys)
    assert code == 2 and "nope.yaml" in err


def test_dead_letters_of_a_memory_without_a_vector_store_is_a_clear_error(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["dead-letters", "--config", str(config)], capsys)
    assert code == 2 and "works on vector memories" in err and "WindowMemory" in err


def test_reshard_moves_collections_made_before_shards_into_them(
    vector_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memories import create_memory
    from memories.kernel.namespaces import namespace_key

    memory = create_memory(vector_config)
    for question, answer in [("My sister lives in Porto.", "Nice."), ("I like jazz.", "Cool.")]:
        memory.save_context({"input": question}, {"output": answer})
    memory.flush()
    key = namespace_key(("users", "maya"))
    memory.store.demote_on_open = False  # looking at it would move it (the reshard does here)
    memory.store.promote(key)  # a collection of its own, as every namespace had before shards
    assert memory.store.placement(key) == "own"

    code, out, _ = run(["reshard", "--config", str(vector_config), "--dry-run"], capsys)
    assert code == 0 and f"would move {key}: 2 documents into its shard" in out
    assert memory.store.placement(key) == "own"
    code, out, err = run(["reshard", "--config", str(vector_config)], capsys, stdin="n\n")
    assert code == 1 and "nothing moved" in err and memory.store.placement(key) == "own"

    code, out, err = run(["reshard", "--config", str(vector_config), "--yes"], capsys)
    assert code == 0 and "1 namespaces (2 documents) moved into shards" in err
    assert memory.store.placement(key) == "shard"
    assert "Porto" in memory.search("Where does my sister live?", k=1)[0].text
    code, _, err = run(["reshard", "--config", str(vector_config)], capsys)
    assert code == 0 and "no namespace to move" in err
