"""Erasing a person on PostgreSQL: the SQL stores (histories, state, profiles, collections,
instructions, entities, graphs) and, where pgvector is there, the vector documents."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from memories import erase_user
from tests import needs
from tests.core.test_erasure import _marker, census, config_for, fill, reads, rows_holding
from tests.postgres import find_pg_bin, postgres_server

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(find_pg_bin() is None, reason=needs.NO_POSTGRES),
]


def pg_rows_holding(url: str, word: str) -> list[str]:
    """Every row of every table of the database whose text holds ``word``."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            tables = sa.inspect(connection).get_table_names()
            return [
                table
                for table in tables
                for row in connection.execute(sa.text(f'SELECT * FROM "{table}"'))
                if word in repr(tuple(row))
            ]
    finally:
        engine.dispose()


def _erases_one_user_exactly(config: dict, url: str, folder: Path) -> None:  # type: ignore[type-arg]
    fill(config)
    omar_reads = reads(config, "omar")
    maya, omar = census(config, "maya"), census(config, "omar")
    filled_stores = [  # the model usage rows stay empty: these memories call no model
        counts for store, counts in [*maya.items(), *omar.items()] if "model usage" not in store
    ]
    assert all(sum(counts.values()) > 0 for counts in filled_stores)
    assert pg_rows_holding(url, _marker("maya")) and pg_rows_holding(url, _marker("omar"))

    report = erase_user(config, namespace="users.maya", session="maya-chat")
    assert report.complete and report.removed == sum(sum(c.values()) for c in maya.values())
    assert all(sum(c.values()) == 0 for c in census(config, "maya").values())
    assert pg_rows_holding(url, _marker("maya")) == []
    assert rows_holding(folder, _marker("maya")) == []
    assert census(config, "omar") == omar and reads(config, "omar") == omar_reads


def test_erasing_a_user_on_postgresql_leaves_nothing_of_them_and_all_of_the_other(
    postgres_url: str, tmp_path: Path
) -> None:
    config = config_for(tmp_path, sql=postgres_url)
    stores = " ".join(census(config, "maya"))
    for kind in ("SQLHistory(", "profile store 'postgresql", "SQLEntityStore(", "SQLEntityGraph("):
        assert kind in stores
    _erases_one_user_exactly(config, postgres_url, tmp_path)


@pytest.mark.skipif(find_pg_bin(with_vector=True) is None, reason=needs.NO_PGVECTOR)
def test_erasing_a_user_on_postgresql_with_pgvector_erases_their_documents_too(
    tmp_path: Path,
) -> None:
    with postgres_server(with_vector=True) as url:
        config = config_for(tmp_path, sql=url, vectors=url)
        assert any(line.startswith("PostgreSQL (pgvector)") for line in census(config, "maya"))
        _erases_one_user_exactly(config, url, tmp_path)
