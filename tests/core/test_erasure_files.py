"""Erasing a person leaves no byte of them in any file of the stores it touched.

Two users fill a collection, a profile, a vector memory and a summary buffer
(60 items and 60 turns each). After one is erased, every file under the
stores' folders is read byte for byte (the SQLite files with their ``-wal``
and ``-shm``, Chroma's ``chroma.sqlite3`` and its segment folders) and holds
no copy of the erased user's marker word, in any case; the other user's data
reads back whole. On PostgreSQL the relations' files are read after a
CHECKPOINT (its WAL segments are not: see docs/deployment.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from memories import erase_user
from memories.core.combined import leaves_of
from memories.core.config import create_memory, with_namespace, with_session
from tests import needs
from tests.core.test_erasure import _searched_in_a_new_process
from tests.postgres import find_pg_bin, postgres_cluster

EMBEDDINGS = "tests.vector.conftest:WordEmbeddings"
USERS = ("maya", "omar")
ITEMS = 60


class MarkerSummaries(BaseChatModel):
    """A summarizer whose summary names the marker words of its prompt (so the fold holds them)."""

    @property
    def _llm_type(self) -> str:
        return "marker-summaries"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        words = sorted(set(re.findall(r"Zq\w+?secret", str(messages[-1].content))))
        text = f"They talked about {' '.join(words)} at length."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


def _marker(user: str) -> str:
    return f"Zq{user}secret"


def config_for(folder: Path, *, sql: str | None = None, vectors: str | None = None) -> dict:  # type: ignore[type-arg]
    url = sql or f"sqlite:///{folder / 'memories.db'}"
    vector: dict[str, Any] = {
        "path": str(folder / "chroma"), "embeddings": EMBEDDINGS, "write": "sync"
    }  # fmt: skip
    if vectors is not None:
        vector["vectors"] = vectors
    history = {"type": "sql", "url": url, "session_id": "default"}
    return {
        "type": "combined",
        "memories": [
            {"type": "summary_buffer", "max_token_limit": 60, "history": history,
             "llm": MarkerSummaries(), "token_counter": "chars"},
            {"type": "profile", "url": url, "policy": "manual", "memory_key": "profile"},
            {"type": "collection", "url": url, **vector, "policy": "manual",
             "memory_key": "facts"},
            {"type": "vector", **vector, "memory_key": "recalled"},
        ],
    }  # fmt: skip


def _leaves(config: dict, user: str) -> dict[str, Any]:  # type: ignore[type-arg]
    memory = create_memory(with_session(with_namespace(config, f"users.{user}"), f"{user}-chat"))
    return {type(leaf).__name__: leaf for leaf in leaves_of(memory)}


def fill(config: dict) -> None:  # type: ignore[type-arg]
    for user in USERS:
        leaves, word = _leaves(config, user), _marker(user)
        collection, vector = leaves["CollectionMemory"], leaves["VectorMemory"]
        summary, profile = leaves["SummaryBufferMemory"], leaves["ProfileMemory"]
        for i in range(ITEMS):
            fact = collection.put(f"{user} keeps fact {i}: {word}")
            if i % 10 == 0:
                collection.update(fact, f"{user} keeps fact {i} (edited): {word}")
            vector.save_context({"input": f"{user} turn {i} {word}"}, {"output": f"ok {i}"})
            summary.save_context({"input": f"{user} says {i} {word}"}, {"output": f"noted {i}"})
            profile.put({"name": user, "turn": i, "secret": f"{word} {i}"})


def reads(config: dict, user: str) -> dict[str, Any]:  # type: ignore[type-arg]
    leaves = _leaves(config, user)
    return {
        "summary": leaves["SummaryBufferMemory"].load_memory_variables({}),
        "profile": leaves["ProfileMemory"].get(),
        "profile versions": len(leaves["ProfileMemory"].history()),
        "facts": sorted(r.content for r in leaves["CollectionMemory"].list()),
        "turns": sorted(r.text for r in leaves["VectorMemory"].export_documents()),
    }


def copies(files: list[Path], word: str) -> dict[str, int]:
    """How many times each file holds ``word`` (any case), the files that hold it."""
    needle = word.lower().encode()
    found = {str(f): f.read_bytes().lower().count(needle) for f in files if f.is_file()}
    return {name: n for name, n in found.items() if n}


def test_an_erased_user_is_in_no_byte_of_any_file_and_the_other_reads_back_whole(
    tmp_path: Path,
) -> None:
    config = config_for(tmp_path)
    fill(config)
    omar = reads(config, "omar")
    assert len(omar["facts"]) == ITEMS and len(omar["turns"]) == ITEMS
    assert _marker("omar") in str(omar["summary"])
    files = lambda: sorted(tmp_path.rglob("*"))  # noqa: E731  (Chroma adds folders)
    assert copies(files(), _marker("maya")) and copies(files(), _marker("omar"))

    report = erase_user(config, namespace="users.maya", session="maya-chat")

    assert report.complete, report.text()
    assert copies(files(), _marker("maya")) == {}
    assert reads(config, "omar") == omar
    assert copies(files(), _marker("omar"))
    # The compacted Chroma folder opens in a new process, the other user's turns found.
    (found,) = _searched_in_a_new_process(tmp_path, "omar", "omar turn 7")
    assert found.startswith("input: omar turn 7 ")
    assert _searched_in_a_new_process(tmp_path, "maya", "maya turn 7") == []
    compacted = {line.where: line for line in report.files}
    assert set(compacted) == {
        f"SQLite file {str(tmp_path / 'memories.db')!r}",
        f"SQLite file {str(tmp_path / 'chroma' / 'memories-outbox.db')!r}",
        f"Chroma folder {str(tmp_path / 'chroma')!r}",
    }
    assert all(line.complete and line.seconds >= 0 for line in report.files)
    assert all("vacuumed" in line.done and "WAL emptied" in line.done for line in report.files)
    chroma = compacted[f"Chroma folder {str(tmp_path / 'chroma')!r}"].done
    assert "text index merged" in chroma and "vector index segments" in chroma
    assert "compacted SQLite file" in report.text()
    assert {"file", "done", "seconds", "complete"} <= set(report.to_dict()["files"][0])


def test_a_dry_run_or_no_compaction_compacts_nothing(tmp_path: Path) -> None:
    config = config_for(tmp_path)
    _leaves(config, "maya")["ProfileMemory"].put({"secret": _marker("maya")})
    assert erase_user(config, namespace="users.maya", dry_run=True).files == ()
    report = erase_user(config, namespace="users.maya", compaction=False)
    assert report.files == () and report.complete


def test_a_reader_holding_the_wal_makes_the_erasure_incomplete_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from memories.stores import compaction

    monkeypatch.setattr(compaction, "WAIT_SECONDS", 0.2)
    config = {"type": "profile", "url": f"sqlite:///{tmp_path / 'p.db'}", "policy": "manual"}
    memory = create_memory(with_namespace(config, "users.maya"))
    memory.put({"secret": _marker("maya")})
    reader = sqlite3.connect(tmp_path / "p.db", isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM sqlite_master").fetchone()  # a snapshot held open
    try:
        report = erase_user(config, namespace="users.maya")
    finally:
        reader.close()
    (line,) = report.files
    assert not line.complete and not report.complete and report.remaining == 0
    assert "reader" in line.done and "run the erasure again" in line.done
    again = erase_user(config, namespace="users.maya")  # the reader is gone: done now
    assert again.complete and copies([tmp_path / "p.db-wal"], _marker("maya")) == {}


# -- PostgreSQL ---------------------------------------------------------------------------


def _relation_files(url: str, data: Path) -> list[Path]:
    """The files of every relation of the database (tables, TOAST, indexes) after a CHECKPOINT."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("CHECKPOINT")
            paths = connection.exec_driver_sql(
                "SELECT pg_relation_filepath(c.oid) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "
                "AND pg_relation_filepath(c.oid) IS NOT NULL"
            ).scalars()
            return [file for path in paths for file in data.glob(f"{path}*")]
    finally:
        engine.dispose()


@pytest.mark.server
@pytest.mark.skipif(find_pg_bin(with_vector=True) is None, reason=needs.NO_PGVECTOR)
def test_on_postgresql_and_pgvector_no_relation_file_keeps_the_erased_user(
    tmp_path: Path,
) -> None:
    with postgres_cluster(with_vector=True) as server:
        url, data = server.url, server.root / "data"
        config = config_for(tmp_path, sql=url, vectors=url)
        fill(config)
        omar = reads(config, "omar")
        assert copies(_relation_files(url, data), _marker("maya"))

        report = erase_user(config, namespace="users.maya", session="maya-chat")

        assert report.complete, report.text()
        assert any("VACUUM FULL" in line.done for line in report.files)
        assert copies(_relation_files(url, data), _marker("maya")) == {}
        assert copies(sorted(tmp_path.rglob("*")), _marker("maya")) == {}
        assert reads(config, "omar") == omar
        assert copies(_relation_files(url, data), _marker("omar"))


@pytest.mark.server
def test_on_postgresql_a_role_that_does_not_own_the_tables_is_told_the_erasure_is_not_physical(
    postgres_url: str,
) -> None:
    """VACUUM skips a table its role does not own with a mere warning: the report says so."""
    config = {"type": "profile", "url": postgres_url, "policy": "manual"}
    create_memory(with_namespace(config, "users.maya")).put({"secret": _marker("maya")})
    erase_user(config, namespace="users.nobody", compaction=False)  # every table made
    engine = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("CREATE ROLE app LOGIN")
            connection.exec_driver_sql("GRANT ALL ON ALL TABLES IN SCHEMA public TO app")
            connection.exec_driver_sql("GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO app")
    finally:
        engine.dispose()
    as_app = {**config, "url": postgres_url.replace("//postgres@", "//app@")}

    report = erase_user(as_app, namespace="users.maya")

    assert report.remaining == 0 and not report.complete
    (line,) = report.files
    assert not line.complete and "this role does not own it" in line.done
    assert "only a superuser may rewrite it" not in line.done  # nothing was vacuumed


def test_memories_erase_prints_a_line_per_compacted_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import yaml

    from memories.faces.cli import main

    config = {"type": "profile", "url": f"sqlite:///{tmp_path / 'p.db'}", "policy": "manual"}
    create_memory(with_namespace(config, "users.maya")).put({"secret": _marker("maya")})
    path = tmp_path / "memory.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    argv = ["erase", "--config", str(path), "--namespace", "users.maya", "-y"]

    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"compacted SQLite file {str(tmp_path / 'p.db')!r}: vacuumed (" in out
    assert "WAL emptied (" in out and " s)\n" in out
    assert copies(sorted(tmp_path.iterdir()), _marker("maya")) == {}

    assert main([*argv, "--json"]) == 0
    (line,) = json.loads(capsys.readouterr().out)["files"]
    assert line["complete"] is True and line["file"].endswith("p.db'") and line["seconds"] >= 0
