"""A persistent store's folder can move: its queued writes, dead letters and recall index follow.

A store is named by the id in its folder (``memories-store-id``), not by the
folder's path; a store written before stores had ids is re-filed under its
id on first use.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from memories.integrations.chroma import STORE_ID_FILE, ChromaStore

from memories import BackendUnavailableError, ConfigError, VectorMemory
from memories.stores.recall import RecallConfig
from memories.stores.vector.outbox import OUTBOX_FILE, OutboxRow, SQLOutbox
from tests.postgres import find_pg_bin, postgres_server
from tests.probes import python

# Fills a store in a process of its own, as a user's earlier session did: turns
# written, one the embedder refused (a dead letter), one queued while the store
# was down (never written). With "legacy", as the version before store ids did.
_FILL = """
import json, sys
from memories import BackendUnavailableError, VectorMemory
from memories.integrations.chroma import ChromaStore
from tests.vector.conftest import WordEmbeddings

folder, outbox, legacy = sys.argv[1], sys.argv[2] or None, sys.argv[3] == "legacy"
if legacy:
    ChromaStore.target = property(lambda s: f"persistent:{s.path}#{s.collection_prefix}")
    ChromaStore.former_target = property(lambda s: None)

class Picky(WordEmbeddings):
    def embed_documents(self, texts):
        if any("POISON" in t for t in texts):
            raise ValueError("input too long for this model")
        return super().embed_documents(texts)

memory = VectorMemory(path=folder, outbox=outbox, namespace="moving", embeddings=Picky(),
                      write="sync")
memory.save_context({"input": f"my sister lives in Oslo, from {folder}"}, {"output": "nice"})
try:
    memory.save_context({"input": "POISON pasted document"}, {"output": "ok"})
except ValueError:
    pass
memory.save_context({"input": "I play the cello"}, {"output": "lovely"})  # POISON set aside

def down(*args, **kwargs):
    raise BackendUnavailableError("disk gone")

memory.store.upsert = down
try:
    memory.save_context({"input": "I moved to Bergen"}, {"output": "queued"})
except BackendUnavailableError:
    pass
print(json.dumps([memory.pending(), len(memory.dead_letters())]))
"""


def _fill(folder: Path, *, outbox: str = "", legacy: bool = False) -> None:
    root = Path(__file__).resolve().parents[2]
    args = [str(folder), outbox, "legacy" if legacy else "current"]
    done = python("-c", _FILL, *args, cwd=root)
    assert json.loads(done.stdout) == [1, 1]  # one queued, one set aside


def _open(folder: Path, outbox: str | None = None) -> VectorMemory:
    return VectorMemory(
        path=str(folder),
        outbox=outbox,
        namespace="moving",
        embeddings="tests.vector.conftest:WordEmbeddings",
        write="sync",
    )


def _check_all_there(memory: VectorMemory, *, home: Path) -> None:
    """What the fill left is all found: the queued turn, the dead letter, the index."""
    assert memory.pending() == 1
    (letter,) = memory.dead_letters()
    assert letter.row.text.startswith("input: POISON")
    assert memory.backend.namespaces() == {"moving": 3}  # the inspector's listing
    # Lexical recall finds the queued turn (the index holds it) and names the folder it was in.
    assert "Bergen" in memory.search("Bergen", k=1)[0].text
    assert str(home) in memory.search("sister Oslo", k=1)[0].text
    assert memory.flush() is True and memory.pending() == 0
    assert memory.store.count("moving") == 3
    assert memory.retry_dead_letters() == 1 and memory.dead_letters() == []


def _rows_under(url: str, target: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return sum(
                int(
                    connection.execute(
                        sa.text(f"SELECT count(*) FROM {table} WHERE target = :t"), {"t": target}
                    ).scalar_one()
                )
                for table in (
                    "memories_vector_outbox",
                    "memories_vector_dead_letters",
                    "memories_recall_spaces",
                )
            )
    finally:
        engine.dispose()


def test_a_moved_folder_keeps_its_queued_write_dead_letters_and_index(tmp_path: Path) -> None:
    _fill(tmp_path / "before")
    shutil.move(tmp_path / "before", tmp_path / "after")
    _check_all_there(_open(tmp_path / "after"), home=tmp_path / "before")


def test_a_store_written_before_store_ids_is_refiled_under_its_id_once(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    _fill(folder, legacy=True)
    assert not (folder / STORE_ID_FILE).exists()
    url = f"sqlite:///{folder / OUTBOX_FILE}"
    former = f"persistent:{folder.resolve()}#memories"
    assert _rows_under(url, former) == 3
    # As if a process crashed between writing the id and re-filing the rows: the next
    # open re-files them.
    store_id = f"{uuid.uuid4().hex}\n"
    (folder / STORE_ID_FILE).write_text(store_id)
    assert _open(folder).store.target == f"persistent:id:{store_id.strip()}#memories"
    assert _rows_under(url, former) == 0
    again = _open(folder)  # idempotent: nothing left to move, the id unchanged
    assert again.pending() == 1 and (folder / STORE_ID_FILE).read_text() == store_id
    shutil.move(folder, tmp_path / "new")
    _check_all_there(_open(tmp_path / "new"), home=folder)


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_outbox(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """One outbox URL that several store folders use."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared-outbox.db'}"
        return
    if find_pg_bin() is None:
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql)")
    with postgres_server() as url:
        yield url


def test_folders_sharing_one_outbox_keep_their_rows_apart_through_refiling_and_moves(
    tmp_path: Path, shared_outbox: str
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _fill(first, outbox=shared_outbox, legacy=True)
    _fill(second, outbox=shared_outbox, legacy=True)
    for folder in (first, second):  # re-filed, each under its own id (Chroma left unopened)
        memory = _open(folder, shared_outbox)
        assert memory.pending() == 1 and len(memory.dead_letters()) == 1
    # Swapped: the second store now lives where the first was.
    shutil.move(first, tmp_path / "aside")
    shutil.move(second, first)
    shutil.move(tmp_path / "aside", second)
    for folder, home in ((first, second), (second, first)):
        memory = _open(folder, shared_outbox)
        _check_all_there(memory, home=home)
        found: list[Any] = memory.search("sister Oslo", k=5)
        assert all(str(home) in r.text for r in found if "Oslo" in r.text)


def test_a_store_id_file_that_is_not_an_id_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / STORE_ID_FILE).write_text("edited by hand\n")
    with pytest.raises(ConfigError, match=r"not a store id .*restore it from a backup"):
        _open(tmp_path).store.target  # noqa: B018


def test_stores_opened_at_once_on_a_new_folder_agree_on_one_id(tmp_path: Path) -> None:
    with ThreadPoolExecutor(8) as pool:
        targets = set(pool.map(lambda _: ChromaStore(path=str(tmp_path)).target, range(32)))
    assert len(targets) == 1
    assert [p.name for p in tmp_path.iterdir()] == [STORE_ID_FILE]  # no scratch file left


def test_a_folder_without_hard_links_still_gets_its_id_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(*args: object) -> None:
        raise PermissionError("operation not permitted")

    monkeypatch.setattr("os.link", no_links)
    first = ChromaStore(path=str(tmp_path)).target
    assert ChromaStore(path=str(tmp_path)).target == first
    assert [p.name for p in tmp_path.iterdir()] == [STORE_ID_FILE]


def test_a_copy_of_a_folder_open_in_the_same_process_keeps_its_own_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy has the original's id (one target) but its own outbox, so its own queue."""
    _fill(tmp_path / "original")
    shutil.copytree(tmp_path / "original", tmp_path / "copy")
    original, copy = (
        VectorMemory(
            path=str(tmp_path / name),
            namespace="moving",
            embeddings="tests.vector.conftest:WordEmbeddings",
        )
        for name in ("original", "copy")
    )
    assert original.store.target == copy.store.target
    for memory in (original, copy):  # each one's queued Bergen turn, into its own folder
        assert memory.flush() is True
        memory.search("warm up")  # the index loaded: background saves are queued

    def down(*args: object, **kwargs: object) -> None:
        raise BackendUnavailableError("disk gone")

    monkeypatch.setattr(original.store, "upsert", down)
    original.save_context({"input": "I went to Tromso"}, {"output": "queued"})
    assert "Tromso" in original.search("Tromso", k=1)[0].text
    assert not any("Tromso" in r.text for r in copy.search("Tromso", k=5))
    assert copy.pending() == 0 and copy.flush() is True
    with pytest.raises(BackendUnavailableError):
        original.flush()
    monkeypatch.undo()
    assert original.flush() is True and original.store.count("moving") == 4
    assert copy.store.count("moving") == 3  # its two turns and Bergen: not Tromso


def test_reshard_reaches_a_folder_and_its_copy(tmp_path: Path) -> None:
    """Resharding goes by place: a copy has the original's id but collections of its own."""
    from memories import create_memory
    from memories.faces.commands import reshard

    original, copy = tmp_path / "original", tmp_path / "copy"
    _fill(original)
    promote = "import sys; from memories.integrations.chroma import ChromaStore; "
    promote += "ChromaStore(path=sys.argv[1]).promote('moving')"
    python("-c", promote, str(original))
    shutil.copytree(original, copy)
    leaves = [
        {"type": "vector", "path": str(folder), "namespace": ["moving"], "memory_key": name,
         "embeddings": "tests.vector.conftest:WordEmbeddings"}
        for name, folder in (("original", original), ("copy", copy))
    ]  # fmt: skip
    memory = create_memory({"type": "combined", "memories": leaves})
    would = reshard(memory, dry_run=True)
    assert [(d.namespace, d.documents) for d in would] == [("moving", 2), ("moving", 2)]


def test_refiling_keeps_the_index_the_id_already_has_and_drops_the_former_copy(
    tmp_path: Path,
) -> None:
    outbox = SQLOutbox(f"sqlite:///{tmp_path / OUTBOX_FILE}")
    config = RecallConfig()
    outbox.recall.space("former", "ns", config, stored=list)
    outbox.put("former", "ns", [OutboxRow("a", "old words", {"session": "s"}, False)])
    outbox.recall.space("now", "ns", config, stored=list)  # the id used before re-filing
    outbox.adopt("former", "now")
    outbox.adopt("former", "now")  # once per process: nothing more to do
    assert [row.doc_id for row in outbox.pending("now", "ns")] == ["a"]
    assert outbox.recall.namespaces("former") == {} and "ns" in outbox.recall.namespaces("now")
    assert outbox.pending("former", "ns") == []
