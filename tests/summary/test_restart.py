"""The summary and its fold point live in the history: a new process carries on."""

from __future__ import annotations

from pathlib import Path

import pytest

from memories import SQLiteHistory, SummaryBufferMemory, SummaryMemory
from tests.summary.fakes import RAISE, ScriptedLLM

LIMIT = 100


def save(memory: SummaryBufferMemory | SummaryMemory, i: int) -> None:
    memory.save_context({"input": f"question {i} about boats"}, {"output": f"answer {i}: sail"})


def open_buffer(path: Path, llm: ScriptedLLM) -> SummaryBufferMemory:
    """What a freshly started process builds: new history object, new memory."""
    history = SQLiteHistory(path, session_id="user-1")
    return SummaryBufferMemory(llm=llm, chat_memory=history, max_token_limit=LIMIT)


def test_a_restarted_summary_buffer_continues_the_same_summary(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    first_llm = ScriptedLLM()
    first = open_buffer(path, first_llm)
    i = 0
    while first_llm.calls < 2:
        save(first, i)
        i += 1
    value = first.load_memory_variables({})
    status = first.status()

    second_llm = ScriptedLLM(script=["summary after restart"])
    second = open_buffer(path, second_llm)
    assert second.load_memory_variables({}) == value
    assert second.moving_summary_buffer == "summary 2"
    assert second.status() == status

    while second_llm.calls < 1:
        save(second, i)
        i += 1
    # The new fold builds on the summary made before the restart, and folds
    # only turns that were not folded before it.
    assert "Current summary:\nsummary 2\n" in second_llm.prompts[0]
    folded_before = [j for j in range(i) if f"question {j} about" in "".join(first_llm.prompts)]
    new_lines = second_llm.prompts[0].split("New lines of conversation:")[1]
    assert folded_before
    assert not [j for j in folded_before if f"question {j} about" in new_lines]
    assert second.moving_summary_buffer == "summary after restart"


def test_a_restarted_summary_memory_continues(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    first = SummaryMemory(llm=ScriptedLLM(), chat_memory=SQLiteHistory(path, session_id="u"))
    save(first, 0)
    save(first, 1)
    llm = ScriptedLLM(script=["third"])
    second = SummaryMemory(llm=llm, chat_memory=SQLiteHistory(path, session_id="u"))
    assert second.buffer == "summary 2"
    save(second, 2)
    assert llm.calls == 1 and "summary 2" in llm.prompts[0] and "question 2" in llm.prompts[0]
    assert "question 1" not in llm.prompts[0]
    assert second.buffer == "third"


def test_a_failure_and_its_backoff_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    llm = ScriptedLLM(default=RAISE)
    first = open_buffer(path, llm)
    i = 0
    while llm.calls < 2:
        save(first, i)
        i += 1
    status = first.status()
    assert status.failures == 2 and status.retry_in == 1
    second = open_buffer(path, ScriptedLLM())
    assert second.status() == status
    assert second.load_memory_variables({}) == first.load_memory_variables({})


def test_another_session_in_the_same_file_has_its_own_summary(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    one = SummaryMemory(llm=ScriptedLLM(), chat_memory=SQLiteHistory(path, session_id="one"))
    two = SummaryMemory(
        llm=ScriptedLLM(default="other"), chat_memory=SQLiteHistory(path, session_id="two")
    )
    save(one, 0)
    save(two, 0)
    assert one.buffer == "summary 1" and two.buffer == "other"


def test_clear_erases_the_persisted_summary(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    memory = SummaryMemory(llm=ScriptedLLM(), chat_memory=SQLiteHistory(path, session_id="u"))
    save(memory, 0)
    memory.clear()
    again = SummaryMemory(llm=ScriptedLLM(), chat_memory=SQLiteHistory(path, session_id="u"))
    assert again.buffer == "" and again.chat_memory.entries() == []


def test_a_new_token_counter_recounts_but_keeps_the_summary(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    llm = ScriptedLLM()
    first = open_buffer(path, llm)
    i = 0
    while llm.calls < 1:
        save(first, i)
        i += 1
    history = SQLiteHistory(path, session_id="user-1")
    chars = SummaryBufferMemory(
        llm=ScriptedLLM(), chat_memory=history, max_token_limit=LIMIT, token_counter="chars"
    )
    assert chars.moving_summary_buffer == "summary 1"
    assert chars.status().unfolded_tokens != first.status().unfolded_tokens
    assert chars.status().unfolded_messages == first.status().unfolded_messages


@pytest.mark.parametrize("limit", [60, 500])
def test_changing_the_limit_keeps_the_summary(tmp_path: Path, limit: int) -> None:
    path = tmp_path / "chat.db"
    llm = ScriptedLLM()
    first = open_buffer(path, llm)
    i = 0
    while llm.calls < 1:
        save(first, i)
        i += 1
    history = SQLiteHistory(path, session_id="user-1")
    other = SummaryBufferMemory(llm=ScriptedLLM(), chat_memory=history, max_token_limit=limit)
    assert other.moving_summary_buffer == "summary 1"
