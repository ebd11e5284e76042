"""LLM calls of the summary-buffer memory, side by side with LangChain's.

Run from the repository root::

    PYTHONPATH=. python benchmarks/summary.py [--turns 200] [--limit 500]

Both memories play the same scripted conversation (deterministic, seeded)
with the same ``max_token_limit``. Each gets its own counting fake LLM that
records every prompt and answers with a deterministic summary (the last
``SUMMARY_WORDS`` words of the old summary plus the new human lines), so
both summaries have the same size and the prompts are comparable. Both count
tokens the same way, offline: LangChain's ``get_num_tokens_from_messages``
with ``custom_get_token_ids`` backed by tiktoken ``cl100k_base`` (its default
GPT-2 tokenizer is downloaded from a hub and fails offline); ours is given
that same model as ``token_counter``.

Printed: LLM calls, summary prompt sizes in tokens (mean / max / total),
what each memory shows verbatim on average (the price of folding deeper),
and wall time per turn. A second table sweeps ``low_water`` and the length
of the turns, since the saving is about ``exchange tokens / ((1 - low_water)
* max_token_limit)`` of LangChain's calls.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.llms import LLM
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import Field

from memories import SummaryBufferMemory
from memories.kernel.tokens import load_encoding

warnings.filterwarnings("ignore", message=".*deprecated.*")
warnings.filterwarnings("ignore", category=DeprecationWarning)

from langchain_classic.memory import ConversationSummaryBufferMemory  # noqa: E402

SEED = 20240601
SUMMARY_WORDS = 60
TARGET_RATIO = 0.15

Turn = tuple[str, str]

_SUBJECTS = [
    "my sister Ana", "the garden", "our trip to Porto", "the new laptop", "my running plan",
    "the quarterly report", "a birthday dinner", "the leaking tap", "my Spanish lessons",
    "the dog's vet visit", "the book club", "a job interview on Monday", "the car insurance",
    "my grandmother's recipe", "the budget for March", "the team offsite",
]  # fmt: skip
_ASKS = [
    "Can you remind me what we said about {s}?", "I need help with {s}.",
    "What should I do next about {s}?", "Any ideas for {s}?", "Quick question on {s}.",
    "I changed my mind about {s}, what now?", "How long will {s} take?",
]  # fmt: skip
_DETAILS = [
    "It has to be done by Friday.", "I have about 40 euros for it.", "Ana thinks it is too much.",
    "I am free after 6 pm.", "Last time it went badly.", "Keep it simple please.",
    "I would rather not call them.", "The deadline moved to the 14th.",
]  # fmt: skip
_ANSWERS = [
    "For {s}, start with the smallest step today.", "Sure, here is a plan for {s}.",
    "We said {s} could wait until next week.", "A checklist will help with {s}.",
    "I would split {s} into two parts.", "Good news: {s} is mostly done.",
]  # fmt: skip
_POINTS = [
    "Write down the three open questions first.", "Ask Ana to confirm the date.",
    "Set a reminder for Thursday morning.", "Compare two options before paying anything.",
    "Keep the receipt in the shared folder.", "Block one hour in your calendar for it.",
    "Then check back with me and we adjust the plan.", "That keeps the cost under your budget.",
]  # fmt: skip


def make_turns(n: int, *, scale: int = 1, seed: int = SEED) -> list[Turn]:
    """``n`` deterministic chat exchanges: a short ask, a reply of one to three sentences.

    ``scale`` repeats the detail and point sentences to make longer turns.
    """
    rng = random.Random(seed)
    turns = []
    for _ in range(n):
        subject = rng.choice(_SUBJECTS)
        ask = rng.choice(_ASKS).format(s=subject)
        details = " ".join(rng.choice(_DETAILS) for _ in range(rng.randint(0, 1) * scale))
        answer = rng.choice(_ANSWERS).format(s=subject)
        points = " ".join(rng.choice(_POINTS) for _ in range(rng.randint(0, 2) * scale))
        turns.append((f"{ask} {details}".strip(), f"{answer} {points}".strip()))
    return turns


# -- the counting fake LLM ------------------------------------------------------------


def _summarize(prompt: str) -> str:
    """A deterministic summary: the last words of the old summary and the new human lines."""
    current = prompt.rsplit("Current summary:\n", 1)[1]
    summary, _, rest = current.partition("\n\nNew lines of conversation:\n")
    new_lines = rest.rsplit("\n\nNew summary:", 1)[0]
    asks = [
        line.removeprefix("Human: ")
        for line in new_lines.splitlines()
        if line.startswith("Human: ")
    ]
    words = f"{summary} {' '.join(asks)}".split()
    return " ".join(words[-SUMMARY_WORDS:])


class CountingLLM(LLM):
    """Records every summary prompt and answers it deterministically."""

    prompts: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "counting-fake"

    def _call(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> str:
        self.prompts.append(prompt)
        return _summarize(prompt)


def counting_llm() -> CountingLLM:
    encoding = load_encoding()
    return CountingLLM(custom_get_token_ids=lambda text: encoding.encode(text))


# -- one run ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """What one memory did over the whole conversation."""

    calls: int
    prompt_tokens: list[int]
    verbatim_tokens: list[int]
    """Tokens of the turns shown verbatim after each turn (summary excluded)."""
    ms_per_turn: float


def play(memory: Any, llm: CountingLLM, turns: Sequence[Turn]) -> Result:
    encoding = load_encoding()
    verbatim = []
    started = time.perf_counter()
    for human, ai in turns:
        memory.save_context({"input": human}, {"output": ai})
        shown: list[BaseMessage] = memory.buffer
        turns_shown = [m for m in shown if not isinstance(m, SystemMessage)]
        verbatim.append(llm.get_num_tokens_from_messages(turns_shown))
    elapsed = time.perf_counter() - started
    return Result(
        calls=len(llm.prompts),
        prompt_tokens=[len(encoding.encode(p)) for p in llm.prompts],
        verbatim_tokens=verbatim,
        ms_per_turn=1000 * elapsed / len(turns),
    )


def run_langchain(turns: Sequence[Turn], limit: int) -> Result:
    llm = counting_llm()
    memory = ConversationSummaryBufferMemory(llm=llm, max_token_limit=limit, return_messages=True)
    return play(memory, llm, turns)


def run_ours(turns: Sequence[Turn], limit: int, low_water: float | None = None) -> Result:
    llm = counting_llm()
    options: dict[str, Any] = {} if low_water is None else {"low_water": low_water}
    memory = SummaryBufferMemory(
        llm=llm, max_token_limit=limit, token_counter=llm, return_messages=True, **options
    )
    return play(memory, llm, turns)


# -- report -------------------------------------------------------------------------------


def _stats(values: Sequence[int]) -> tuple[float, int, int]:
    return (statistics.fmean(values), max(values), sum(values)) if values else (0.0, 0, 0)


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.1%}" if theirs else "n/a"


def main_table(turns: Sequence[Turn], limit: int) -> bool:
    theirs = run_langchain(turns, limit)
    ours = run_ours(turns, limit)
    t_mean, t_max, t_total = _stats(theirs.prompt_tokens)
    o_mean, o_max, o_total = _stats(ours.prompt_tokens)
    rows: list[tuple[str, str, str, str]] = [
        ("LLM calls", f"{theirs.calls}", f"{ours.calls}", _ratio(ours.calls, theirs.calls)),
        ("prompt tokens, mean", f"{t_mean:.0f}", f"{o_mean:.0f}", _ratio(o_mean, t_mean)),
        ("prompt tokens, max", f"{t_max}", f"{o_max}", _ratio(o_max, t_max)),
        ("prompt tokens, total", f"{t_total}", f"{o_total}", _ratio(o_total, t_total)),
        (
            "verbatim tokens shown, mean",
            f"{statistics.fmean(theirs.verbatim_tokens):.0f}",
            f"{statistics.fmean(ours.verbatim_tokens):.0f}",
            _ratio(
                statistics.fmean(ours.verbatim_tokens), statistics.fmean(theirs.verbatim_tokens)
            ),
        ),
        (
            "wall time per turn (ms)",
            f"{theirs.ms_per_turn:.2f}",
            f"{ours.ms_per_turn:.2f}",
            _ratio(ours.ms_per_turn, theirs.ms_per_turn),
        ),
    ]
    default_low = SummaryBufferMemory.model_fields["low_water"].default
    print(
        f"\n{len(turns)} turns, max_token_limit={limit}; ours with the default "
        f"low_water={default_low} (folds down to {int(limit * default_low)} tokens)\n"
    )
    _print_table(("", "LangChain", "memories", "ours/theirs"), rows)
    ok = ours.calls <= TARGET_RATIO * theirs.calls
    verdict = "met" if ok else "NOT met"
    print(f"\nTarget: at most {TARGET_RATIO:.0%} of LangChain's LLM calls: {verdict}.")
    return ok


def sweep_table(n: int, limit: int) -> None:
    rows = []
    for scale, label in ((1, "short"), (2, "medium"), (4, "long")):
        turns = make_turns(n, scale=scale)
        exchange = statistics.fmean(
            counting_llm().get_num_tokens_from_messages(_as_messages(t)) for t in turns
        )
        theirs = run_langchain(turns, limit)
        cells = [f"{label} ({exchange:.0f})", f"{theirs.calls}"]
        for low in (0.8, 0.6, 0.4, 0.2):
            ours = run_ours(turns, limit, low)
            cells.append(f"{ours.calls} ({_ratio(ours.calls, theirs.calls)})")
        rows.append(tuple(cells))
    print(
        f"\nSweep: LLM calls over {n} turns at max_token_limit={limit}, "
        "by turn length and low_water\n"
    )
    _print_table(
        ("turns (tokens/exchange)", "LangChain", "lw 0.8", "lw 0.6", "lw 0.4", "lw 0.2"), rows
    )


def _as_messages(turn: Turn) -> list[BaseMessage]:
    return [HumanMessage(turn[0]), AIMessage(turn[1])]


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    print(line(header))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument("--no-sweep", action="store_true", help="only the main table")
    args = parser.parse_args(argv)
    turns = make_turns(args.turns)
    words = [len(f"{h} {a}".split()) for h, a in turns]
    print(
        f"Scripted conversation: {len(turns)} exchanges of {min(words)}-{max(words)} words "
        f"(mean {statistics.fmean(words):.0f}), seed {SEED}; python {sys.version.split()[0]}"
    )
    ok = main_table(turns, args.limit)
    if not args.no_sweep:
        sweep_table(args.turns, args.limit)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
