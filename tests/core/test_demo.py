"""The demo's sessions, restarts and the count of the memories' own model calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from langchain_core.language_models import FakeListChatModel

from memories import BufferMemory, register_memory
from memories.config import MEMORY_TYPES
from memories.demo import DEMO_LLM, DEMO_MEMORIES, SCRIPT, SESSIONS, run_demo


class CallingMemory(BufferMemory):
    """A buffer that asks its model something on every save, like a summary memory."""

    config_type: ClassVar[str] = "calling"
    built: ClassVar[int] = 0
    llm: Any = None

    def model_post_init(self, context: Any, /) -> None:
        type(self).built += 1

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        if self.llm is not None:
            self.llm.invoke("summarise")
        super().save_context(inputs, outputs)


def test_memory_is_rebuilt_for_each_session_and_keeps_the_conversation(tmp_path: Path) -> None:
    register_memory("calling", __name__, "CallingMemory")
    try:
        CallingMemory.built = 0
        (result,) = run_demo(tmp_path / "d.db", memories={"calling": {"type": "calling"}})
        assert CallingMemory.built == 1 + len(SESSIONS)  # one to clear, one per session
        assert result.injected.count("Human:") == len(SCRIPT) - 1
        assert result.llm_calls == 0  # no --llm: the DEMO_LLM option is dropped
    finally:
        MEMORY_TYPES.pop("calling")


def test_the_memorys_own_model_calls_are_counted_apart_from_the_chat(tmp_path: Path) -> None:
    register_memory("calling", __name__, "CallingMemory")
    try:
        chat = FakeListChatModel(responses=["ok"])
        config = {"type": "calling", "llm": DEMO_LLM}
        (result,) = run_demo(tmp_path / "d.db", llm=chat, memories={"calling": config})
        assert result.llm_calls == len(SCRIPT)
    finally:
        MEMORY_TYPES.pop("calling")


def test_with_a_model_the_summary_memories_call_it_and_the_calls_are_counted(
    tmp_path: Path,
) -> None:
    chat = FakeListChatModel(responses=["Maya: biologist in Lisbon, drinks black coffee."])
    configs = {k: v for k, v in DEMO_MEMORIES.items() if k.startswith("summary")}
    results = run_demo(tmp_path / "d.db", llm=chat, memories=configs)
    assert [r.name for r in results] == list(configs)
    assert all(r.llm_calls > 0 for r in results)
    assert all("drinks black coffee" in r.injected for r in results)


def test_a_row_whose_extra_is_missing_is_skipped_with_the_pip_command(tmp_path: Path) -> None:
    register_memory(
        "ghost", "no_such_module_for_the_demo", "Ghost", pip_command="pip install ghost"
    )
    try:
        (result,) = run_demo(tmp_path / "d.db", memories={"ghost": {"type": "ghost"}})
        assert result.injected.startswith("(skipped: ") and "pip install ghost" in result.injected
    finally:
        MEMORY_TYPES.pop("ghost")
