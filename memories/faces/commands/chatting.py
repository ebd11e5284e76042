"""``memories chat`` and ``memories usage``: a conversation line by line, and what it cost."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterable
from typing import Any, TextIO

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)

from memories.core.base import BaseMemory
from memories.core.langchain import LangChainBaseMemory
from memories.errors import LLMError
from memories.faces.commands.opening import flush, leaf_memories
from memories.faces.exchange import DEFAULT_HEADER, save_exchange, view_memory
from memories.kernel.messages import message_text


def prompt_messages(memory: LangChainBaseMemory, text: str, system: str) -> list[BaseMessage]:
    """The model's messages for a user line: system text with the memory's, its window, the line."""
    view = view_memory(memory, text, as_messages=True)
    system_text = "\n\n".join(t for t in (system, view.system_text(DEFAULT_HEADER)) if t)
    head: list[BaseMessage] = [SystemMessage(system_text)] if system_text else []
    return [*head, *view.messages, HumanMessage(text)]


def chat(
    memory: LangChainBaseMemory,
    model: BaseLanguageModel,
    lines: Iterable[str],
    out: TextIO,
    *,
    system: str = "",
    prompt: str = "",
) -> int:
    """Chat line by line (a ``/`` command is answered here: :data:`CHAT_HELP`); the turns.

    Raises:
        LLMError: the model call failed.
    """
    turns = 0
    out.write(prompt)
    out.flush()
    for line in lines:
        text = line.strip()
        if text in ("/quit", "/exit"):
            break
        if text.startswith("/") and not text.startswith("//"):
            out.write(_chat_command(memory, text, system))
        elif text:
            text = text.removeprefix("/")
            messages = prompt_messages(memory, text, system)
            try:
                reply = model.invoke(messages)
            except Exception as exc:  # a provider's errors have no common base class
                raise LLMError(f"The model failed: {type(exc).__name__}: {exc}") from exc
            answer = reply if isinstance(reply, AIMessage) else AIMessage(str(reply))
            save_exchange(memory, [messages[-1], answer])
            out.write(f"assistant> {answer.text}\n")
            turns += 1
        out.write(prompt)
        out.flush()
    flush(memory)
    return turns


def usage_report(memory: LangChainBaseMemory) -> list[dict[str, Any]]:
    """What each memory of ``memory`` has cost in this process, as plain data for JSON.

    Per memory: :meth:`~memories.core.base.BaseMemory.usage_name`, its namespace and
    :meth:`~memories.core.base.BaseMemory.usage`'s counters.
    """
    return [
        {"memory": leaf.usage_name(), "namespace": leaf.usage_namespace(), **leaf.usage().as_dict()}
        for leaf in leaf_memories(memory)
        if isinstance(leaf, BaseMemory)
    ]


def format_usage(report: list[dict[str, Any]]) -> str:
    """A :func:`usage_report` as a table: one line per memory and kind of call."""
    lines = [
        f"{'memory':<22} {'kind':<10} {'calls':>6} {'failed':>6} {'retries':>7} "
        f"{'tokens in':>10} {'tokens out':>10} {'seconds':>8}"
    ]
    for entry in report:
        for kind, usage in entry["totals"].items():
            lines.append(
                f"{entry['memory']:<22} {kind:<10} {usage['calls']:>6} {usage['failures']:>6} "
                f"{usage['retries']:>7} {usage['input_tokens']:>10} {usage['output_tokens']:>10} "
                f"{usage['seconds']:>8.3f}"
            )
        if not entry["totals"]:
            lines.append(f"{entry['memory']:<22} (no calls)")
    return "\n".join(lines) + "\n"


#: What ``/help`` prints in ``memories chat``.
CHAT_HELP = """commands (never sent to the model, never saved):
  /memory   what the memory adds to the next prompt, in full
  /usage    what each memory's model calls, embeddings and store transactions cost so far
  /clear    erase this session's memory
  /help     this list
  /quit     end the chat (or Ctrl-D); //text sends a line that starts with /
"""


def _chat_command(memory: LangChainBaseMemory, command: str, system: str) -> str:
    if command == "/help":
        return CHAT_HELP
    if command == "/memory":
        messages = prompt_messages(memory, "", system)[:-1]
        width = max(40, shutil.get_terminal_size().columns)
        return "".join(_wrapped(m, width) for m in messages) or "(the memory is empty)\n"
    if command == "/usage":
        return format_usage(usage_report(memory))
    if command == "/clear":
        memory.clear()
        return "(this session's memory is erased)\n"
    return f"unknown command {command.split()[0]}; /help lists the commands\n"


def _wrapped(message: BaseMessage, width: int) -> str:
    """A message in full, wrapped to ``width``, its role first."""
    lines: list[str] = []
    for number, part in enumerate(message_text(message).splitlines() or [""]):
        first = f"{message.type}: " if number == 0 else "  "
        lines += textwrap.wrap(part, width, initial_indent=first, subsequent_indent="  ") or [
            first.rstrip()
        ]
    return "\n".join(lines) + "\n"
