"""Every script in examples/ runs offline and prints what it promises."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

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
        "input: I'm training for a half marathon in May.",
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


def test_every_example_is_checked() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs_offline_and_prints_its_result(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the examples write
    namespace = runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    assert callable(namespace["main"])
    out = capsys.readouterr().out
    for line in EXPECTED[name]:
        assert line in out


def test_an_example_runs_as_a_script() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "classic_chain.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "The SQLite log still holds all 8 messages." in result.stdout
