"""One reflection on the instructions: the prompt, the rules a revision must keep, the retries.

:class:`RevisionSession` is a :class:`~memories.kernel.conversation.Conversation`
with no I/O: each revision must name a prompt, keep its pinned passages word
for word and fit the token budget.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from memories.errors import InvalidInputError, LLMError
from memories.kernel.conversation import CheckedReply, parse_json_reply
from memories.kernel.messages import format_buffer
from memories.stores.documents import PendingTurn

__all__ = [
    "FEEDBACK_KWARG",
    "Feedback",
    "ReflectionOutcome",
    "Revision",
    "RevisionSession",
    "feedback_message",
    "feedback_of",
    "reflection_prompt",
]

#: Where a queued feedback message keeps its score and comment.
FEEDBACK_KWARG = "memories_feedback"


@dataclass(frozen=True)
class Feedback:
    """A score or a comment on how the agent did."""

    score: float | None
    """A number (higher is better), or None."""
    comment: str | None
    """What the user said about it, or None."""

    def describe(self) -> str:
        """One line for the model."""
        parts = [f"score {self.score:g}" if self.score is not None else ""]
        parts.append(json.dumps(self.comment, ensure_ascii=False) if self.comment else "")
        return "Feedback: " + ", ".join(p for p in parts if p)


@dataclass(frozen=True)
class Revision:
    """A new text for one prompt, and why."""

    prompt: str
    """The prompt's name."""
    text: str
    """Its whole new text."""
    reason: str
    """Why the model changed it."""


_SYSTEM = """\
You maintain the instructions that an AI assistant follows: {count} named prompt(s), shown \
below. You are shown the recent conversations the assistant had and the feedback it received. \
Reflect on what went wrong or right, and revise the prompts so the assistant does better: add \
or sharpen rules the conversations and feedback call for, and drop rules they show to be wrong. \
Change a prompt only when the conversations or the feedback give a reason.

Rules for every revision:
- give the prompt's whole new text, not a diff;
- each prompt must stay within {budget} tokens;{pinned}
- revise only the prompts named below: {names}.{instructions}

Reply with only a JSON object and nothing else:
{{"reflection": "what you learned", "revisions": [{{"prompt": "<name>", "text": "<whole new \
text>", "reason": "<why>"}}]}}
Reply {{"reflection": "...", "revisions": []}} when nothing should change."""

_NOT_JSON = (
    'Your reply is not the JSON object asked for. Reply with only {"reflection": "...", '
    '"revisions": [{"prompt": "<name>", "text": "<whole new text>", "reason": "<why>"}]}.'
)


def reflection_prompt(
    prompts: Mapping[str, str],
    turns: Sequence[PendingTurn],
    *,
    pinned: Sequence[str],
    budget: int,
    instructions: str | None,
) -> list[BaseMessage]:
    """The first two messages of a reflection: the rules, then the prompts, turns and feedback."""
    pins = ""
    if pinned:
        listed = "\n".join(f"  {json.dumps(p, ensure_ascii=False)}" for p in pinned)
        pins = (
            "\n- these pinned passages must stay word for word in every prompt that has "
            f"them:\n{listed}"
        )
    system = _SYSTEM.format(
        count=len(prompts),
        budget=budget,
        pinned=pins,
        names=", ".join(json.dumps(n) for n in prompts),
        instructions=f"\n\n{instructions.strip()}" if instructions else "",
    )
    shown = "\n\n".join(f"Prompt {json.dumps(n)}:\n{t}" for n, t in prompts.items())
    conversations: list[str] = []
    feedback: list[str] = []
    for turn in turns:
        notes = [f for f in map(feedback_of, turn.messages) if f is not None]
        if notes:
            feedback.extend(f.describe() for f in notes)
        else:
            conversations.append(format_buffer(turn.messages, "Human", "AI"))
    body = f"Current prompts:\n{shown}\n\nConversations:\n"
    body += "\n---\n".join(conversations) if conversations else "(none)"
    body += "\n\nFeedback:\n" + ("\n".join(feedback) if feedback else "(none)")
    return [SystemMessage(system), HumanMessage(body)]


@dataclass(frozen=True)
class ReflectionOutcome:
    """What one reflection produced."""

    revisions: tuple[Revision, ...]
    """The accepted revisions (empty: nothing to change, or a failure)."""
    raw: tuple[str, ...]
    """Every reply, as text."""
    error: str | None
    """Why it failed, or None."""


@dataclass
class RevisionSession(CheckedReply[tuple[Revision, ...]]):
    """One reflection: asks for revisions, checks each, sends errors back (bounded).

    Args:
        opening: the first messages (:func:`reflection_prompt`).
        max_retries: how many times a bad reply is sent back.
        prompts: the prompts as they stand.
        pinned: passages a revision must keep where the prompt had them.
        budget: the most tokens a prompt may have.
        count: counts a text's tokens.
    """

    prompts: Mapping[str, str]
    pinned: Sequence[str]
    budget: int
    count: Callable[[str], int]

    fix = "Reply again with the corrected JSON object."

    def outcome(self) -> ReflectionOutcome:
        """The result, once :meth:`request` returns None."""
        return ReflectionOutcome(self.accepted or (), tuple(self._raw), self._error)

    def _accept(self, reply: BaseMessage) -> tuple[Revision, ...]:
        value = parse_json_reply(
            str(reply.text),
            accepts=lambda v: isinstance(v, list) or (isinstance(v, dict) and "revisions" in v),
            hint=_NOT_JSON,
        )
        items = value.get("revisions") if isinstance(value, dict) else value
        if not isinstance(items, list):
            raise LLMError(f'"revisions" must be a list. {_NOT_JSON}')
        revisions: list[Revision] = []
        problems: list[str] = []
        seen: set[str] = set()
        for i, item in enumerate(items):
            try:
                revision = self._checked(item, i, seen)
            except LLMError as exc:
                problems.append(str(exc))
                continue
            if revision is not None:
                revisions.append(revision)
                seen.add(revision.prompt)
        if problems:
            raise LLMError("; ".join(problems))
        return tuple(revisions)

    def _checked(self, item: Any, index: int, seen: set[str]) -> Revision | None:
        """The revision ``item`` describes, checked on its own (None: it changes nothing)."""
        if not isinstance(item, dict):
            raise LLMError(f"revisions[{index}] is not an object")
        name, text, reason = item.get("prompt"), item.get("text"), item.get("reason", "")
        if not isinstance(name, str) or name not in self.prompts:
            raise LLMError(
                f"revisions[{index}] names the prompt {name!r}; the prompts are "
                f"{sorted(self.prompts)}"
            )
        if name in seen:
            raise LLMError(f"the prompt {name!r} is revised twice; give one revision per prompt")
        if not isinstance(text, str) or not text.strip():
            raise LLMError(f"the revision of {name!r} has no text")
        if text == self.prompts[name]:
            return None
        lost = [p for p in self.pinned if p in self.prompts[name] and p not in text]
        if lost:
            raise LLMError(
                f"the revision of {name!r} removes or changes the pinned passage {lost[0]!r}; "
                "keep it word for word"
            )
        size = self.count(text)
        if size > self.budget:
            raise LLMError(
                f"the revision of {name!r} has {size} tokens, over the budget of {self.budget}; "
                "make it shorter"
            )
        return Revision(name, text, reason if isinstance(reason, str) else str(reason))


def feedback_message(score: float | None, comment: str | None) -> HumanMessage:
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score)
    ):
        raise InvalidInputError(f"score must be a finite number, got {score!r}.")
    if comment is not None and not isinstance(comment, str):
        raise InvalidInputError(f"comment must be a str, got {type(comment).__name__}.")
    if score is None and not comment:
        raise InvalidInputError("feedback needs a score, a comment, or both.")
    note = {"score": None if score is None else float(score), "comment": comment}
    return HumanMessage(comment or "", additional_kwargs={FEEDBACK_KWARG: note})


def feedback_of(message: BaseMessage) -> Feedback | None:
    note = message.additional_kwargs.get(FEEDBACK_KWARG)
    if not isinstance(note, dict):
        return None
    return Feedback(note.get("score"), note.get("comment"))
