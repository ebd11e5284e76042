"""The profile store and memory on a real PostgreSQL server.

The store's SQL must hold on a server database too: compare-and-set updates,
conflicting first inserts (which abort the transaction there), the LIKE
escapes of namespace prefixes, and concurrent writers from several threads.
The SQLite tests are re-run here with ``url`` pointing at a fresh database.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import create_engine, text

from memories.stores.documents import ProfileStore
from tests import needs
from tests.postgres import find_pg_bin
from tests.profile.test_memory import (  # noqa: F401  (re-run here on PostgreSQL)
    test_a_concurrent_write_during_an_update_is_not_lost,
    test_a_profile_over_the_token_budget_is_updated_section_by_section,
    test_an_update_that_keeps_losing_races_is_recorded_not_raised,
    test_clear_is_a_recorded_change_that_rollback_undoes,
    test_concurrent_direct_writes_all_land,
    test_namespaces_isolate_users,
    test_profile_and_pending_turns_survive_a_restart,
    test_put_and_update_validate_and_record_versions,
    test_rollback_restores_a_version_as_a_new_version,
    test_turns_kept_after_a_failure_are_folded_into_the_next_update,
)
from tests.profile.test_store import (  # noqa: F401  (re-run here on PostgreSQL)
    test_a_cleared_profile_is_hidden_from_get_but_keeps_its_version,
    test_async_twins_do_the_same_work,
    test_commit_drops_exactly_the_pending_turns_it_folded_in,
    test_commit_writes_only_at_the_expected_version,
    test_every_put_is_recorded_with_its_patch,
    test_failures_are_recorded_without_a_version,
    test_key_page_filter_finds_exactly_the_keys_and_texts_that_hold_it,
    test_namespaces_isolate_profiles,
    test_put_then_get_returns_the_document_with_its_version,
    test_search_and_list_namespaces_follow_the_prefix,
    test_the_store_survives_a_restart,
)

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(find_pg_bin() is None, reason=needs.NO_POSTGRES),
]


@pytest.fixture
def store(url: str) -> ProfileStore:
    """The SQL store on a fresh server database (the store tests take it)."""
    return ProfileStore(url)


@pytest.fixture
def url(postgres_url: str) -> str:
    """A fresh database on the server for each test."""
    name = f"profile_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return f"{postgres_url.rsplit('/', 1)[0]}/{name}"
