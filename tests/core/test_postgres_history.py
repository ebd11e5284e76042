"""The SQL history on a real PostgreSQL server: several app servers share one database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memories import SQLHistory, TokenBufferMemory
from tests.contract.history_contract import HistoryContract, MakeHistory
from tests.postgres import find_pg_bin, postgres_server

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(find_pg_bin() is None, reason="PostgreSQL server not installed"),
]


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


class TestPostgresHistory(HistoryContract):
    @pytest.fixture
    def make_history(self, postgres_url: str, request: pytest.FixtureRequest) -> MakeHistory:
        prefix = request.node.name  # each test its own sessions in the shared database
        return lambda session_id: SQLHistory(postgres_url, session_id=f"{prefix}-{session_id}")


def test_two_app_servers_share_a_conversation(postgres_url: str) -> None:
    """Two memories on separate histories (as two servers would hold) see one conversation."""
    server_a = TokenBufferMemory(
        chat_memory=SQLHistory(postgres_url, session_id="shared-user"), max_token_limit=1000
    )
    server_b = TokenBufferMemory(
        chat_memory=SQLHistory(postgres_url, session_id="shared-user"), max_token_limit=1000
    )
    server_a.save_context({"input": "I am Ada"}, {"output": "Hello Ada"})
    server_b.save_context({"input": "What is my name?"}, {"output": "Ada"})
    expected = "Human: I am Ada\nAI: Hello Ada\nHuman: What is my name?\nAI: Ada"
    assert server_a.load_memory_variables({})["history"] == expected
    assert server_b.load_memory_variables({})["history"] == expected
