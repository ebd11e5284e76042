"""Every script in examples/ runs offline and prints what it promises."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
from pathlib import Path

import pytest

from memories.errors import ConfigError
from memories.faces.scripts import needs
from tests.probes import python

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

#: example file -> lines its output must contain.
EXPECTED: dict[str, list[str]] = {
    "classic_chain.py": [
        "assistant: You're Maya.",
        "Human: I study octopuses.",
        "The SQLite log still holds all 8 messages.",
    ],
    "lcel_per_session.py": [
        "[alice] assistant: (offline echo) You said: 'What do I like?'. I was shown 4 earlier",
        "[bob] assistant: (offline echo) You said: 'Who am I?'. I was shown 2 earlier",
    ],
    "agent_middleware.py": [
        "assistant: It's 18C and sunny in Lisbon.",
        "The checkpointed thread holds 10 messages;",
        "the model was last shown 6",
    ],
    "config_swap.py": [
        "buffer.yaml        -> the last prompt held 7 messages",
        "window.yaml        -> the last prompt held 3 messages",
        "token_buffer.yaml  -> the last prompt held 3 messages",
    ],
    "profile_kept_current.py": [
        'profile: {"name": "Maya", "city": "Lisbon", "drink": "green tea"}',
        'profile: {"name": "Maya", "city": "Lisbon", "drink": "black coffee"}',
        'v3 update: [{"op": "replace", "path": "/drink", "value": "black coffee"}]',
        'After rollback(2): {"name": "Maya", "city": "Lisbon", "drink": "green tea"}',
    ],
    "mcp_client.py": [
        "[alice] tools: manage_memory, search_memory, read_profile, update_profile",
        "[alice] manage_memory: created memory ",
        '[alice] update_profile: {"city": "Porto"}',
        "[alice] search_memory: Alice is allergic to peanuts",
        "[bob] search_memory: (nothing)",
        "[bob] read_profile: {}",
        "[bob] search_memory error: search_memory takes ['limit', 'offset', 'query'], not "
        "['user_id'].",
    ],
    "vector_recall.py": [
        "Where does my sister live?\n  recalled: input: My sister Ines lives in Porto.",
        "Any food I should avoid?\n  recalled: input: I'm allergic to peanuts.",
        "What race?\n  recalled: input: I'm training for a half marathon in May.",
        "Only Tuesday's turns, with scores:\n",
    ],
    "agent_memory_tools.py": [
        "[alice, thread-1] assistant: Got it, no peanuts.",
        '"content": "Alice is allergic to peanuts"',
        "[alice, thread-2] assistant: Skip the satay",
        "  [search_memory] []",
        'Alice\'s memories: ["Alice is allergic to peanuts"]',
    ],
    "few_shot_examples.py": [
        "What the prompt gets:\nHuman: Summarise: the meeting moved to Friday.\n"
        "AI: Meeting -> Friday.",
        "Human: Summarise: Ana joins the team on Monday.\nAI: Ana joins Monday.",
        "  ai: Meeting -> Friday.",
    ],
    "instructions_from_feedback.py": [
        "Proposed: You are a support agent for a bike shop. Never share a customer's address. "
        "Answer in at most three sentences.",
        "Because: users found answers too long",
        "In use until approved: You are a support agent for a bike shop. Never share a "
        "customer's address.\n",
        "After approve(): You are a support agent for a bike shop. Never share a customer's "
        "address. Answer in at most three sentences.",
        "  v1 proposal, from 1 feedback item(s)",
        "After rollback(0): You are a support agent for a bike shop. Never share a customer's "
        "address.\n",
    ],
    "notebooks_adventure.py": [
        'sheet: {"name": "Mira", "class": "bard"}  quests: {"open": ["find the miller\'s dog"]',
        'quests: {"open": [], "done": ["found the miller\'s dog"]}',
        'Character: {"name":"Mira","class":"bard"}',
        "Notebook model calls: character sheet 1 (written once), quest log 4",
    ],
    "entity_graph.py": [
        "Closed facts:\n  User lives_in Lisbon (contradicted, said in: 'I live in Lisbon.",
        "Before the move: ['Melanie lives_in Paris', 'User lives_in Lisbon', "
        "'User sister Melanie', 'Mel works_at Louvre']",
        "Mel is Melanie, also known as ['Mel']",
        "- User sister Melanie (since",
        "- Melanie works_at Louvre (since",
    ],
    "entities_and_relations.py": [
        "user: Where do Ines and I live now?\nassistant: Both in Porto.",
        "The entities the chain's prompt was given on the last turn:\n"
        "  Ines: Ines is Maya's sister; she lives in Porto.\n"
        "  Maya: Maya lived in Lisbon and moved to Porto.",
        "Every version of Maya's summary, oldest first:\n  Maya lives in Lisbon.\n"
        "  Maya lived in Lisbon and moved to Porto.\n"
        "  Maya lived in Lisbon and moved to Porto, where her sister Ines lives.",
        "What the knowledge graph memory shows: On Maya: Maya moved away from Lisbon. "
        "Maya lives in Porto.",
        "Maya -> Lisbon over time: ['lives in', 'moved away from']",
    ],
    "langgraph_graph.py": [
        "You said: 'Where do I live?'. I was shown 2 earlier messages",
        "Thread: 6 messages",
    ],
}


#: The modules each extra installs: blocking them is an install without it.
EXTRA_MODULES = {
    "agents": ["langchain", "langgraph"],
    "chroma": ["chromadb", "onnxruntime", "onnx", "tokenizers", "Stemmer"],
    "mcp": ["mcp"],
}

#: Runs a script with some modules blocked (``sys.modules[name] = None``: importing them fails).
BLOCKED_RUN = """
import runpy, sys
script, *blocked = sys.argv[1:]
for name in blocked:
    sys.modules[name] = None
sys.argv = [script]
runpy.run_path(script, run_name="__main__")
"""


def run_example(name: str, tmp_path: Path, *blocked: str) -> subprocess.CompletedProcess[str]:
    """``python examples/NAME`` from the checkout, offline, with an empty TMPDIR of its own."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    return python(
        "-c", BLOCKED_RUN, str(EXAMPLES / name), *blocked,
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": str(ROOT)},
        timeout=300,
        check=False,
    )  # fmt: skip


def declared_extras(name: str) -> list[str]:
    """The extras an example's ``needs(...)`` calls name, in order."""
    source = (EXAMPLES / name).read_text(encoding="utf-8")
    calls = re.findall(r"\bneeds\(([^)]*)\)", source)
    return [extra for call in calls for extra in re.findall(r'"(\w+)"', call)]


def docstring_extras(name: str) -> list[str]:
    """The extras an example's docstring says it needs ([] for "Needs only the core install")."""
    doc = ast.get_docstring(ast.parse((EXAMPLES / name).read_text(encoding="utf-8"))) or ""
    (line,) = [line for line in doc.splitlines() if line.startswith("Needs ")]
    if line.startswith("Needs only the core install"):
        return []
    return re.findall(r"``(\w+)``", line.split(":")[0])


def test_every_example_is_checked() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_example_runs_as_a_script_and_leaves_nothing_in_tmpdir(
    name: str, tmp_path: Path
) -> None:
    """Issue 36: 13 of 14 examples left a ``memories-example-*`` folder in $TMPDIR."""
    result = run_example(name, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    for line in EXPECTED[name]:
        assert line in result.stdout
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_example_declares_its_extras_in_its_docstring_and_the_docs(name: str) -> None:
    extras = sorted(set(declared_extras(name)))
    assert sorted(docstring_extras(name)) == extras
    docs = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    (row,) = [line for line in docs.splitlines() if line.startswith(f"| `{name}` |")]
    listed = re.findall(r"`(\w+)`", row.split("|")[3])
    assert sorted(listed) == extras, row


#: (example, extra) whose missing modules a blocked import shows; mcp_client.py's chroma is its
#: server's (another process): the metadata test below covers that check.
WITHOUT_AN_EXTRA = [
    (name, extra)
    for name in sorted(EXPECTED)
    for extra in dict.fromkeys(declared_extras(name))
    if (name, extra) != ("mcp_client.py", "chroma")
]


@pytest.mark.parametrize(("name", "extra"), WITHOUT_AN_EXTRA)
def test_an_example_without_its_extra_stops_with_one_line(
    name: str, extra: str, tmp_path: Path
) -> None:
    """Issue 36: ``agent_middleware.py`` without langchain ended in a ModuleNotFoundError."""
    result = run_example(name, tmp_path, *EXTRA_MODULES[extra])
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert f"needs the {extra} extra" in line and f"pip install -e '.[{extra}]'" in line
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.fixture
def without_chromadb(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed metadata says chromadb is not installed."""
    real = importlib.metadata.version

    def version(distribution: str) -> str:
        if distribution == "chromadb":
            raise importlib.metadata.PackageNotFoundError(distribution)
        return real(distribution)

    monkeypatch.setattr(importlib.metadata, "version", version)


def test_needs_reads_the_extras_requirements_from_the_installed_metadata(
    without_chromadb: None,
) -> None:
    """What a script checks before it starts: chromadb not installed, by the metadata."""
    with pytest.raises(SystemExit) as stopped, needs("mcp", "chroma"):
        pytest.fail("the block ran without chromadb")
    assert str(stopped.value) == (
        "This script needs the mcp and chroma extras (chromadb not installed): "
        "run `pip install -e '.[mcp,chroma]'` in the repository's checkout."
    )
    with needs("mcp"):  # installed: the block runs
        pass


def test_needs_reads_the_requirements_of_an_egg_info_install_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without_chromadb: None
) -> None:
    """Building the wheel (tests/core/test_packaging.py) leaves an ``.egg-info`` in the
    checkout, found first on ``sys.path``: its requirements are in requires.txt, its
    PKG-INFO has no ``Requires-Dist``, and ``needs("chroma")`` saw none missing."""
    info = tmp_path / "chat_memories.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text(
        "Metadata-Version: 2.1\nName: chat-memories\nVersion: 0.2.0\nProvides-Extra: chroma\n"
    )
    (info / "requires.txt").write_text("langchain-core>=0.3\n\n[chroma]\nchromadb>=1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert importlib.metadata.distribution("chat-memories").read_text("requires.txt")
    with pytest.raises(SystemExit, match=r"chromadb not installed"), needs("chroma"):
        pytest.fail("the block ran without chromadb")


def test_needs_refuses_an_extra_the_library_does_not_have() -> None:
    with pytest.raises(ConfigError, match=r"no extra 'chromadb'.*agents, chroma"):
        needs("chromadb").__enter__()
