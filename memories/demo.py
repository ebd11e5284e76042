"""The README's main job: one scripted conversation through a chain, per memory type.

Runs offline on embedded defaults: each memory keeps its history in a SQLite
file, token counts come from bundled tiktoken data, and with no ``--llm`` the
assistant's replies are scripted (a fake chat model), so no key or network is
needed. With ``--llm provider:model`` a real model answers instead.
"""

from __future__ import annotations

import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseLanguageModel, FakeListChatModel
from langchain_core.messages import HumanMessage

from memories.base import BaseMemory
from memories.config import create_memory
from memories.tokens import TiktokenCounter

__all__ = ["DEMO_MEMORIES", "SCRIPT", "DemoResult", "run_demo"]

#: (user says, scripted assistant reply), over three sessions of one user.
SCRIPT: list[tuple[str, str]] = [
    ("Hi! I'm Maya, a marine biologist living in Lisbon.", "Nice to meet you, Maya!"),
    ("I mostly study octopus behaviour in tide pools.", "Octopuses are fascinating."),
    ("I prefer tea over coffee, green tea especially.", "Noted: green tea."),
    ("Next month I'm going to a conference in Tokyo.", "Exciting, enjoy Tokyo!"),
    ("My sister Ines is coming with me.", "Travelling with Ines sounds fun."),
    ("Can you remind me to pack my field notebook?", "I'll remember the notebook."),
    ("Actually I've switched to coffee lately, black, no sugar.", "Got it: black coffee now."),
    ("The conference moved to Kyoto, same dates.", "Kyoto it is, same dates."),
    ("What do you know about me so far?", "You're Maya, a marine biologist in Lisbon."),
    ("And what do I drink these days?", "Black coffee, no sugar."),
]

#: The memory configs the demo compares; each gets its own SQLite session.
DEMO_MEMORIES: dict[str, dict[str, Any]] = {
    "buffer": {"type": "buffer"},
    "window (k=3)": {"type": "window", "k": 3},
    "token_buffer (120)": {"type": "token_buffer", "max_token_limit": 120},
}


@dataclass(frozen=True)
class DemoResult:
    """What one memory type did over the script."""

    name: str
    """The row label."""
    injected: str
    """What the memory put into the prompt for the last turn."""
    tokens: int
    """Tokens of ``injected`` (tiktoken cl100k_base)."""
    llm_calls: int
    """Model calls made by the memory itself (summaries, profile updates), not the chat."""
    seconds: float
    """Time spent in the memory's save/load over the whole script."""


def run_demo(
    db_path: Path | None = None,
    *,
    llm: BaseLanguageModel | None = None,
    memories: dict[str, dict[str, Any]] | None = None,
    script: Sequence[tuple[str, str]] = SCRIPT,
    on_turn: Callable[[str, str, str], None] | None = None,
) -> list[DemoResult]:
    """Run the script through a ``ConversationChain`` once per memory config."""
    from langchain_classic.chains import ConversationChain

    db_path = db_path or Path(tempfile.mkdtemp(prefix="memories-demo-")) / "demo.db"
    counter = TiktokenCounter()
    results = []
    for name, config in (memories or DEMO_MEMORIES).items():
        session = name.split(" ")[0]
        history = {"type": "sqlite", "path": str(db_path), "session_id": session}
        memory: BaseMemory = create_memory({**config, "history": history})
        memory.clear()
        model = llm or FakeListChatModel(responses=[reply for _, reply in script])
        timed = _TimedMemory(memory)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConversationChain's own deprecation notice
            chain = ConversationChain(llm=model, memory=timed.memory)
        for user, _ in script:
            reply = chain.invoke({"input": user})["response"]
            if on_turn:
                on_turn(name, user, reply)
        text = "\n".join(str(v) for v in timed.last_loaded.values())
        results.append(
            DemoResult(
                name=name,
                injected=text,
                tokens=counter([HumanMessage(text)]) if text else 0,
                llm_calls=timed.llm_calls,
                seconds=timed.seconds,
            )
        )
    return results


class _TimedMemory:
    """Times a memory's save/load calls by wrapping its methods."""

    def __init__(self, memory: BaseMemory) -> None:
        self.memory = memory
        self.seconds = 0.0
        self.last_loaded: dict[str, Any] = {}
        save, load = memory.save_context, memory.load_memory_variables

        def timed_save(inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
            start = time.perf_counter()
            try:
                save(inputs, outputs)
            finally:
                self.seconds += time.perf_counter() - start

        def timed_load(inputs: dict[str, Any]) -> dict[str, Any]:
            start = time.perf_counter()
            try:
                self.last_loaded = load(inputs)
                return self.last_loaded
            finally:
                self.seconds += time.perf_counter() - start

        object.__setattr__(memory, "save_context", timed_save)
        object.__setattr__(memory, "load_memory_variables", timed_load)

    @property
    def llm_calls(self) -> int:
        return int(getattr(self.memory, "llm_calls", 0))


def format_results(results: Sequence[DemoResult], width: int = 60) -> str:
    """The comparison table a person reads at a glance."""
    lines = [
        f"{'memory':<22} {'tokens':>7} {'LLM calls':>9} {'time ms':>8}  "
        "injected into the last prompt",
        "-" * (22 + 7 + 9 + 8 + 5 + width),
    ]
    for r in results:
        shown = r.injected.replace("\n", " | ")
        if len(shown) > width:
            shown = shown[: width - 1] + "…"
        lines.append(
            f"{r.name:<22} {r.tokens:>7} {r.llm_calls:>9} {r.seconds * 1000:>8.1f}  {shown}"
        )
    return "\n".join(lines)
