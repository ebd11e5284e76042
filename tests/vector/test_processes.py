"""Several processes saving and searching one namespace: on a Chroma server, and on pgvector."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from memories.long_term.vector import VectorMemory
from tests.postgres import PostgresServer
from tests.vector.conftest import ChromaServer

_WORKER = """
import json, sys, time
from pathlib import Path
from memories.long_term.vector import VectorMemory
options, me, workers, turns, folder = sys.argv[1:6]
me, workers, turns, folder = int(me), int(workers), int(turns), Path(folder)
memory = VectorMemory(**json.loads(options), namespace="shared", session_id=f"w{me}",
                      write="sync", recall={"mode": "bm25"},
                      embeddings="tests.vector.conftest:WordEmbeddings")
seen, missed, foreign = 0, [], []
for i in range(turns):
    for other in range(workers):
        done = (folder / f"done-{other}.txt")
        tokens = done.read_text().split() if other != me and done.exists() else []
        if tokens:  # saved (and announced) by another process before this search
            found = memory.search(tokens[-1], k=1)
            if found and tokens[-1] in found[0].text:
                seen += 1
            else:
                missed.append(tokens[-1])
            foreign += [r.text for r in found if "private" in r.text]
    token = f"tok{me}x{i}"
    memory.save_context({"input": token}, {"output": "ok"})
    with (folder / f"done-{me}.txt").open("a") as f:
        f.write(token + "\\n")
memory.close()
print(json.dumps({"seen": seen, "missed": missed, "foreign": foreign}))
"""


@pytest.fixture(params=["chroma", "pgvector"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """Where the processes' memories live: a Chroma server and one outbox, or pgvector."""
    if request.param == "chroma":
        server: ChromaServer = request.getfixturevalue("chroma_server")
        return {
            "mode": "http",
            "port": server.port,
            "outbox": str(tmp_path / "outbox.db"),
            "collection": f"p{uuid.uuid4().hex[:10]}",
        }
    database: PostgresServer = request.getfixturevalue("pgvector_server")
    # A fresh database of the server: the namespaces below are the test's alone.
    name = f"p{uuid.uuid4().hex[:10]}"
    with sa.create_engine(database.url, isolation_level="AUTOCOMMIT").connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    return {"vectors": database.url.rsplit("/", 1)[0] + f"/{name}"}


def test_four_processes_lose_nothing_and_see_each_others_turns_at_once(
    shared_store: dict[str, Any], tmp_path: Path
) -> None:
    workers, turns = 4, 12
    embeddings = "tests.vector.conftest:WordEmbeddings"
    other = VectorMemory(**shared_store, namespace="other", embeddings=embeddings)
    other.save_context({"input": "tok0x0 private"}, {"output": "another user's"})
    other.flush()
    root = Path(__file__).resolve().parents[2]
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WORKER,
                json.dumps(shared_store),
                str(me),
                str(workers),
                str(turns),
                str(tmp_path),
            ],
            cwd=root,
            stdout=subprocess.PIPE,
            text=True,
        )
        for me in range(workers)
    ]
    reports = []
    for process in processes:
        out, _ = process.communicate(timeout=300)
        assert process.returncode == 0
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert [r["missed"] for r in reports] == [[]] * workers  # every turn seen at the next search
    assert sum(r["seen"] for r in reports) > workers  # the workers did overlap
    assert [r["foreign"] for r in reports] == [[]] * workers  # never another namespace's turn
    shared = VectorMemory(
        **shared_store, namespace="shared", recall={"mode": "bm25"}, embeddings=embeddings
    )
    assert shared.backend.count() == workers * turns  # nothing lost
    for me in range(workers):
        for i in range(turns):
            assert f"tok{me}x{i}" in shared.search(f"tok{me}x{i}", k=1)[0].text
    numbers = {(r.metadata["session"], r.metadata["turn"]) for r in shared.search("ok", k=100)}
    assert len(numbers) == workers * turns  # each session numbered 0..turns-1, never twice
    assert numbers == {(f"w{me}", i) for me in range(workers) for i in range(turns)}
