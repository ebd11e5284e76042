"""Erasing a person everywhere: every store of every memory of a config, exact both ways.

Two users fill every memory type that has a store (a chat log and its derived
state on SQLite, entities and a graph, a profile, a collection, instructions,
examples and turns in embedded Chroma with their outbox rows, dead letters and
recall index). Erasing one leaves nothing of them in any store, counted per
store and searched for in every row of every SQLite table (Chroma's own
included), and leaves every count and every read of the other user as it was.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from memories import BackendUnavailableError, ConfigError, ErasureReport, erase_user
from memories.core.combined import leaves_of
from memories.core.config import create_memory, with_namespace, with_session
from memories.core.erasure import erasure_shares
from memories.faces.cli import main
from memories.kernel.accounting import Budget
from memories.stores.vector.chroma_backend import ChromaBackend
from memories.stores.vector.outbox import OutboxRow
from memories.testing import ScriptedChatModel
from tests import needs
from tests.entities.fakes import RuleModel
from tests.probes import killed_after, python
from tests.redis_server import find_redis_server, redis_server

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"
USERS = ("maya", "omar")


def _marker(user: str) -> str:
    """A word that only this user's data holds (what the row scan looks for)."""
    return f"Zq{user}secret"


def config_for(
    folder: Path, *, entities: bool = True, sql: str | None = None, vectors: str | None = None
) -> dict[str, Any]:
    """Every memory type that has a store, on one SQLite file (or ``sql``, a database URL)
    and one Chroma folder (or ``vectors``, a PostgreSQL database with pgvector)."""
    db, chroma = folder / "memories.db", folder / "chroma"
    url = sql or f"sqlite:///{db}"
    history = {"type": "sql", "url": url, "session_id": "default"}
    vector = {"path": str(chroma), "embeddings": EMBEDDINGS, "write": "sync"}
    if vectors is not None:
        vector["vectors"] = vectors
    memories: list[dict[str, Any]] = [
        {"type": "buffer", "history": history},
        {"type": "summary_buffer", "max_token_limit": 30, "history": history,
         "memory_key": "summary"},
        {"type": "profile", "url": url, "policy": "manual"},
        {"type": "collection", "url": url, **vector, "policy": "manual",
         "memory_key": "facts"},
        {"type": "instructions", "url": url, "policy": "manual", "memory_key": "rules"},
        {"type": "examples", **vector, "memory_key": "examples"},
        {"type": "vector", **vector, "memory_key": "recalled"},
        {"type": "entity", "url": url, "policy": "manual", "memory_key": "graph"},
    ]  # fmt: skip
    if entities:
        memories += [
            {"type": "conversation_entity", "llm": RuleModel(), "history": history,
             "entity_store": {"type": "sql", "url": url, "session_id": "x"},
             "memory_key": "entity_history"},
            {"type": "conversation_kg", "llm": RuleModel(), "history": history,
             "kg": {"type": "sql", "url": url, "session_id": "x"}, "memory_key": "kg"},
        ]  # fmt: skip
    return {"type": "combined", "memories": memories}


def _user(config: dict[str, Any], user: str) -> tuple[str, str]:
    return f"users.{user}", f"{user}-chat"


def _leaves(config: dict[str, Any], user: str) -> dict[str, Any]:
    namespace, session = _user(config, user)
    memory = create_memory(with_session(with_namespace(config, namespace), session))
    return {type(leaf).__name__: leaf for leaf in leaves_of(memory)}


def fill(config: dict[str, Any]) -> None:
    """Give each user data in every store, their marker word in each."""
    for user in USERS:
        leaves, word = _leaves(config, user), _marker(user)
        leaves["BufferMemory"].save_context({"input": f"I am {user}"}, {"output": word})
        summary = leaves["SummaryBufferMemory"]  # on the same log; its fold is a state row
        line = f"My city holds {word} and many more words than thirty tokens allow, " * 3
        summary.save_context({"input": line}, {"output": f"noted {word}"})
        profile = leaves["ProfileMemory"]
        profile.put({"name": user, "secret": word})
        profile.update([{"op": "add", "path": "/city", "value": f"Porto {word}"}])
        collection = leaves["CollectionMemory"]
        fact = collection.put(f"{user} drinks tea {word}")
        collection.update(fact, f"{user} drinks green tea {word}")
        leaves["InstructionsMemory"].put(f"Answer {user} briefly {word}")
        leaves["EntityMemory"].save_context({"input": f"Jane met {word}"}, {"output": "ok"})
        leaves["ExampleMemory"].add_example({"input": f"hi {word}", "output": "hello"})
        if "ConversationEntityMemory" in leaves:
            leaves["ConversationEntityMemory"].knowledge_store.set("Jane", f"Jane knows {word}")
            leaves["ConversationKGMemory"].knowledge_store.add_triple(("Jane", word, "knows"))
        vector = leaves["VectorMemory"]
        vector.save_context({"input": f"{user} plays chess {word}"}, {"output": "good"})
        backend = vector.backend
        if not isinstance(backend, ChromaBackend):  # pgvector writes at once: no queue
            continue
        target, key = backend.store.target, backend._key
        queued = [
            OutboxRow(f"{user}-queued", f"waiting {word}", {"session": vector.session_id}, False),
            OutboxRow(f"{user}-refused", f"refused {word}", {"session": vector.session_id}, False),
        ]
        backend.outbox.put(target, key, queued)  # a store that was down: they wait
        backend.outbox.bury(target, key, [(queued[1], "ValueError: too long")])


def census(config: dict[str, Any], user: str) -> dict[str, dict[str, int]]:
    """What every store holds of ``user``, by store and kind."""
    namespace, session = _user(config, user)
    return {
        s.store: s.count() for s in erasure_shares(config, namespace=namespace, session=session)
    }


def reads(config: dict[str, Any], user: str) -> dict[str, Any]:
    """What the user's memories give back through their public reads."""
    leaves = _leaves(config, user)
    found = {
        "messages": [m.content for m in leaves["BufferMemory"].chat_memory.messages],
        "profile": leaves["ProfileMemory"].get(),
        "profile versions": len(leaves["ProfileMemory"].history()),
        "facts": sorted(r.content for r in leaves["CollectionMemory"].list()),
        "rules": leaves["InstructionsMemory"].load_memory_variables({}),
        "examples": [e.text for e in leaves["ExampleMemory"].backend.documents()],
        "turns": sorted(r.text for r in leaves["VectorMemory"].export_documents()),
        "dead letters": [d.row.text for d in leaves["VectorMemory"].dead_letters()],
    }
    if "ConversationEntityMemory" in leaves:
        found["entities"] = leaves["ConversationEntityMemory"].knowledge_store.entities()
        found["graph"] = leaves["ConversationKGMemory"].knowledge_store.get_triples()
    return found


def rows_holding(folder: Path, word: str) -> list[str]:
    """Every row of every table of every SQLite file under ``folder`` whose text holds ``word``."""
    found = []
    for file in folder.rglob("*"):
        if not file.is_file() or file.read_bytes()[:16] != b"SQLite format 3\x00":
            continue
        with sqlite3.connect(file) as connection:
            tables = [r[0] for r in connection.execute("SELECT name FROM sqlite_master "
                                                      "WHERE type = 'table'")]  # fmt: skip
            for table in tables:
                try:
                    rows = connection.execute(f'SELECT * FROM "{table}"').fetchall()
                except sqlite3.OperationalError:  # a virtual table of a module not loaded
                    continue
                found += [f"{file.name}:{table}" for row in rows if word in repr(row)]
    return found


@pytest.fixture
def filled(tmp_path: Path) -> dict[str, Any]:
    config = config_for(tmp_path)
    fill(config)
    return config


def test_erasing_a_user_removes_them_from_every_store_and_nothing_of_the_other(
    filled: dict[str, Any], tmp_path: Path
) -> None:
    omar_reads = reads(filled, "omar")  # first: a read writes what waits in the outbox
    maya, omar = census(filled, "maya"), census(filled, "omar")
    kinds = {kind for counts in maya.values() for kind, n in counts.items() if n}
    assert {"chat log rows", "derived state rows", "current documents", "ledger versions",
            "Chroma documents", "Chroma log rows", "outbox rows", "dead letters",
            "recall index rows", "entity versions", "graph changes"} <= kinds  # fmt: skip
    # Every store holds something of each user (else "untouched" would prove nothing).
    filled_stores = [  # the model usage rows stay empty: these memories call no model
        counts for store, counts in [*maya.items(), *omar.items()] if "model usage" not in store
    ]
    assert all(sum(counts.values()) > 0 for counts in filled_stores)
    assert rows_holding(tmp_path, _marker("maya")) and rows_holding(tmp_path, _marker("omar"))

    preview = erase_user(filled, namespace="users.maya", session="maya-chat", dry_run=True)
    assert preview.dry_run and preview.remaining is None and not preview.complete
    assert {line.store: dict(line.found) for line in preview.stores} == maya
    assert census(filled, "maya") == maya  # a dry run erases nothing

    report = erase_user(filled, namespace="users.maya", session="maya-chat")
    assert isinstance(report, ErasureReport) and report.complete
    assert report.removed == report.found == sum(sum(c.values()) for c in maya.values())
    assert {line.store: line.removed for line in report.stores} == maya
    assert all(sum(c.values()) == 0 for c in census(filled, "maya").values())
    assert rows_holding(tmp_path, _marker("maya")) == []

    assert census(filled, "omar") == omar
    assert reads(filled, "omar") == omar_reads
    assert rows_holding(tmp_path, _marker("omar"))

    again = erase_user(filled, namespace="users.maya", session="maya-chat")
    assert again.complete and again.found == again.removed == 0  # idempotent
    # A new process loads Chroma's index from its log, blanked rows included: the other
    # user's turns are found by meaning, and nothing of the erased user comes back.
    assert _searched_in_a_new_process(tmp_path, "omar", "who plays chess?") == [
        "input: omar plays chess Zqomarsecret\noutput: good"
    ]
    assert _searched_in_a_new_process(tmp_path, "maya", "who plays chess?") == []


def _searched_in_a_new_process(folder: Path, user: str, query: str) -> list[str]:
    code = (
        "import json, sys\n"
        "from memories import VectorMemory\n"
        f"memory = VectorMemory(path={str(folder / 'chroma')!r}, embeddings={EMBEDDINGS!r}, "
        f"namespace='users.{user}', recall={{'mode': 'dense'}})\n"
        f"print(json.dumps([r.text for r in memory.search({query!r}, k=1)]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    found: list[str] = json.loads(python("-c", code, env=env, timeout=300).stdout)
    return found


def test_an_erasure_that_fails_inside_a_store_is_finished_by_the_next_run(
    filled: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chroma fails after the outbox and the recall index of the namespace are cleared."""
    from memories.integrations.chroma import ChromaStore

    omar = census(filled, "omar")
    delete = ChromaStore.delete

    def fails_once(self: ChromaStore, *args: Any, **kwargs: Any) -> None:
        monkeypatch.setattr(ChromaStore, "delete", delete)
        raise BackendUnavailableError("Chroma went away")

    monkeypatch.setattr(ChromaStore, "delete", fails_once)
    with pytest.raises(BackendUnavailableError, match="went away"):
        erase_user(filled, namespace="users.maya", session="maya-chat")
    assert rows_holding(tmp_path, _marker("maya"))  # the documents are still in Chroma

    report = erase_user(filled, namespace="users.maya", session="maya-chat")
    assert report.complete and report.removed > 0
    assert rows_holding(tmp_path, _marker("maya")) == []
    assert census(filled, "omar") == omar


def test_the_report_renders_as_text_and_as_json_data(filled: dict[str, Any]) -> None:
    report = erase_user(filled, namespace="users.maya", session="maya-chat")
    data = json.loads(json.dumps(report.to_dict()))
    assert data["namespace"] == "users.maya" and data["session"] == "maya-chat"
    assert data["complete"] is True and data["remaining"] == 0
    assert data["removed"] == report.removed > 0
    line = next(s for s in data["stores"] if "SQLHistory" in s["store"])
    assert line["removed"]["chat log rows"] == line["found"]["chat log rows"] > 0
    assert line["remaining"] == {"chat log rows": 0, "derived state rows": 0}
    text = report.text()
    assert f"erased {report.removed} items; 0 remaining" in text
    assert "maya-chat" in text and "users.maya" in text


def test_erasing_only_a_session_keeps_the_namespace_long_term_memories(
    filled: dict[str, Any],
) -> None:
    """A session names a chat: its log, its entities, its turns; the profile is the namespace's.

    The config names the namespace the session's turns went to (a config per user).
    """
    before = reads(filled, "maya")
    report = erase_user(with_namespace(filled, "users.maya"), session="maya-chat")
    assert report.complete and report.removed > 0
    after = reads(filled, "maya")
    assert after["messages"] == [] and after["entities"] == {} and after["graph"] == []
    assert after["turns"] == [] and after["dead letters"] == []
    for kept in ("profile", "profile versions", "facts", "rules"):
        assert after[kept] == before[kept]


def test_erasing_a_namespace_leaves_a_namespace_that_only_starts_like_it(tmp_path: Path) -> None:
    config = config_for(tmp_path, entities=False)
    fill(config)
    longer = _leaves(config, "mayan")
    longer["ProfileMemory"].put({"name": "mayan"})
    longer["VectorMemory"].save_context({"input": "mayan sails"}, {"output": "ok"})
    erase_user(config, namespace="users.maya")
    assert _leaves(config, "mayan")["ProfileMemory"].get() == {"name": "mayan"}
    assert len(_leaves(config, "mayan")["VectorMemory"].export_documents()) == 1


def test_erasing_without_a_namespace_or_a_session_is_refused(filled: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"namespace .* session"):
        erase_user(filled)


def test_a_session_alone_on_a_config_whose_namespace_is_a_template_asks_for_the_namespace(
    tmp_path: Path,
) -> None:
    config = {"type": "profile", "url": f"sqlite:///{tmp_path / 'p.db'}", "policy": "manual",
              "namespace": ["users", "{user_id}"]}  # fmt: skip
    with pytest.raises(ConfigError, match=r"\['user_id'\].*--namespace"):
        erase_user(config, session="maya-chat")
    assert erase_user(config, namespace="users.maya", session="maya-chat").complete


# -- the command ------------------------------------------------------------------------


def _file(tmp_path: Path) -> Path:
    config = config_for(tmp_path, entities=False)  # a file names no model object
    fill(config)
    path = tmp_path / "memories.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _run(
    argv: list[str], capsys: pytest.CaptureFixture[str], stdin: str = ""
) -> tuple[int, str, str]:
    import io

    sys.stdin = io.StringIO(stdin)
    try:
        code = main(argv)
    finally:
        sys.stdin = sys.__stdin__
    out, err = capsys.readouterr()
    return code, out, err


def test_memories_erase_asks_first_naming_what_will_go(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path)
    argv = ["erase", "--config", str(path), "--namespace", "users.maya", "--session", "maya-chat"]
    code, out, err = _run(argv, capsys, stdin="n\n")
    assert code == 1 and "nothing erased" in err
    assert "This erases, for good" in out and "chat log rows" in out and "users.maya" in out
    assert rows_holding(tmp_path, _marker("maya"))

    code, out, _ = _run([*argv, "--dry-run", "--json"], capsys)
    assert code == 0 and json.loads(out)["dry_run"] is True and json.loads(out)["found"] > 0

    code, out, err = _run([*argv, "--json"], capsys, stdin="y\n")
    report = json.loads(out[out.index("{") :])
    assert code == 0 and report["complete"] is True and report["removed"] > 0
    assert "erased in SQLHistory" in err
    assert rows_holding(tmp_path, _marker("maya")) == []
    code, out, _ = _run([*argv, "-y"], capsys)
    assert code == 0 and "erased 0 items; 0 remaining" in out
    code, _, err = _run(["erase", "--config", str(path), "-y"], capsys)
    assert code == 2 and "Name whose data to erase" in err


def test_memories_erase_killed_half_way_finishes_on_the_next_run(tmp_path: Path) -> None:
    """SIGKILL after two stores are erased; a second run leaves 0, and the other user whole."""
    path = _file(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    command = ["-m", "memories.faces.cli", "erase", "--config", str(path)]

    def erase(*options: str, **extra: str) -> subprocess.Popen[str]:
        user = ["--namespace", "users.maya", "--session", "maya-chat", "--json"]
        return subprocess.Popen(
            [sys.executable, *command, *user, *options],
            env={**env, **extra},
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def counted(user: str) -> dict[str, Any]:
        whose = ["--namespace", f"users.{user}", "--session", f"{user}-chat"]
        done = python(*command, *whose, "--dry-run", "--json", env=env, timeout=300)
        return {s["store"]: s["found"] for s in json.loads(done.stdout)["stores"]}

    omar = counted("omar")
    stores = len(counted("maya"))
    assert stores >= 4
    process = erase("-y", MEMORIES_ERASE_PAUSE_AFTER="2")
    assert process.stderr is not None
    lines = []
    with killed_after(process, 300):  # a hung erase ends the readline: the test fails
        while not (line := process.stderr.readline()).startswith("paused"):
            assert line, f"the erase ended before pausing: {''.join(lines)}"
            lines.append(line)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    assert sum(line.startswith("erased in ") for line in lines) == 2
    half = counted("maya")
    assert sum(map(sum, (c.values() for c in half.values()))) > 0  # some is left...
    assert sum(1 for c in half.values() if sum(c.values()) == 0) >= 2  # ...some is gone

    second = erase("-y")
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    report = json.loads(out)
    assert report["complete"] is True and report["remaining"] == 0
    assert report["removed"] == sum(map(sum, (c.values() for c in half.values())))
    assert all(sum(c.values()) == 0 for c in counted("maya").values())
    assert rows_holding(tmp_path, _marker("maya")) == []
    assert counted("omar") == omar


def test_messages_a_retention_hides_but_no_sweep_deleted_yet_are_erased_too(
    tmp_path: Path,
) -> None:
    history = {"type": "sql", "url": f"sqlite:///{tmp_path / 'chat.db'}", "session_id": "maya"}
    config = {"type": "buffer", "history": history, "retention": {"keep_messages": 2}}
    memory = create_memory(config)
    for line in ("one", "two", "three"):
        memory.save_context({"input": line}, {"output": "ok"})
    assert len(memory.chat_memory.messages) == 2  # four expired, not swept
    report = erase_user(config, session="maya")
    assert report.complete and report.removed == 6
    assert rows_holding(tmp_path, "one") == []


@pytest.mark.skipif(find_redis_server() is None, reason=needs.NO_REDIS)
def test_erasing_a_session_erases_its_entities_in_redis_and_no_other_sessions() -> None:
    with redis_server() as server:
        config = {
            "type": "conversation_entity",
            "llm": RuleModel(),
            "entity_store": {"type": "redis", "url": server.url, "ttl": None},
        }
        for user, text in [("maya", "Maya lives in Oslo"), ("ravi", "Ravi lives in Pune")]:
            memory = create_memory(with_session(config, user))
            memory.load_memory_variables({"input": text})
            memory.save_context({"input": text}, {"output": "ok"})
            memory.chat_memory.clear()  # only the entity store holds them now
        ravi = erase_user(config, session="ravi", dry_run=True).to_dict()["stores"]
        report = erase_user(config, session="maya")
        (line,) = [line for line in report.stores if "Redis" in line.store]
        assert line.removed["entity versions"] >= 2 and line.removed["redis index keys"] == 2
        assert report.complete and erase_user(config, session="maya", dry_run=True).found == 0
        assert erase_user(config, session="ravi", dry_run=True).to_dict()["stores"] == ravi


def test_erasing_a_namespace_erases_its_model_usage_and_budget_rows(tmp_path: Path) -> None:
    # The usage table and the budget's spending name the namespace: the person's id.
    from memories.kernel.llm import ModelUsage

    config = {"type": "profile", "url": f"sqlite:///{tmp_path / 'p.db'}", "policy": "manual",
              "namespace": ["users", "{user_id}"]}  # fmt: skip
    stores = {}
    for user in ("maya", "omar"):
        memory = create_memory(with_namespace(config, ("users", user)))
        stores[user] = memory.usage_store
        memory.usage_store.record_call("profile", f"users.{user}", ModelUsage(calls=1))
        memory.usage_store.reserve(f"users.{user}", 0, Budget(calls=5))
    omar = stores["omar"].held("users.omar")
    assert stores["maya"].held("users.maya") == {"budget spending rows": 1, "model usage rows": 1}
    report = erase_user(config, namespace="users.maya")
    assert report.complete and report.removed >= 2
    assert stores["maya"].held("users.maya") == {"budget spending rows": 0, "model usage rows": 0}
    assert stores["omar"].held("users.omar") == omar


def test_erasing_a_namespace_leaves_a_chat_memorys_session_usage_alone(tmp_path: Path) -> None:
    # A summary memory's usage rows are keyed by its session, not by a person's namespace:
    # erasing users.maya must not erase the rows of session "summary" (someone else's).
    from memories.kernel.llm import ModelUsage

    url = f"sqlite:///{tmp_path / 'm.db'}"
    config = {
        "type": "combined",
        "memories": [
            {"type": "profile", "url": url, "policy": "manual",
             "namespace": ["users", "{user_id}"]},
            {"type": "summary", "llm": ScriptedChatModel(responses=["gist"]),
             "history": {"type": "sqlite", "path": str(tmp_path / "m.db"),
                         "session_id": "summary"}},
        ],
    }  # fmt: skip
    memory = create_memory(with_namespace(config, ("users", "maya")))
    summary = next(m for m in memory.leaves() if m.config_type == "summary")
    store = summary.usage_store
    assert store is not None
    store.record_call("summary", "summary", ModelUsage(calls=1))
    before = store.held("summary")
    assert before["model usage rows"] == 1
    report = erase_user(config, namespace="users.maya")
    assert report.complete
    assert store.held("summary") == before
    # Erasing that session is what takes them.
    shares = summary.erasure_shares(session=True, namespace=False)
    assert [share.count() for share in shares if "model usage" in share.store] == [before]
