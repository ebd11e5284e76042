"""Swapping memory classes by config file: the same chat, three memory configs.

The application code never names a memory class; the YAML file does. Change
the file, not the code.

Needs only the core install (``pip install -e .``).

    python examples/config_swap.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from langchain_core.messages import HumanMessage

from memories import create_memory
from memories.testing import ScriptedChatModel

HISTORY = "history: {{type: sqlite, path: '{db}', session_id: {session}}}\n"
CONFIGS = {
    "buffer.yaml": "type: buffer\nreturn_messages: true\n",
    "window.yaml": "type: window\nk: 1\nreturn_messages: true\n",
    "token_buffer.yaml": "type: token_buffer\nmax_token_limit: 80\nreturn_messages: true\n",
}


def chat(config_file: Path, lines: list[str]) -> int:
    """Run the lines through a model with the configured memory; return the last prompt's size."""
    memory = create_memory(config_file)
    memory.clear()
    model = ScriptedChatModel()
    for line in lines:
        history = memory.load_memory_variables({})["history"]
        reply = model.invoke([*history, HumanMessage(line)])
        memory.save_context({"input": line}, {"output": reply})
    return len(model.prompts[-1])


def main(workdir: Path) -> None:
    lines = ["I'm Maya.", "I live in Lisbon.", "I like green tea.", "What do you know about me?"]
    for name, text in CONFIGS.items():
        path = workdir / name
        history = HISTORY.format(db=workdir / "chat.db", session=path.stem)
        path.write_text(text + history, encoding="utf-8")
        shown = chat(path, lines)
        print(f"{name:<18} -> the last prompt held {shown} messages")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="memories-example-") as folder:
        main(Path(folder))
