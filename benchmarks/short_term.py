"""Per-turn cost of the short-term memories, side by side with LangChain's classic ones.

Run from the repository root::

    PYTHONPATH=. python benchmarks/short_term.py [--quick]

One turn is ``save_context`` followed by ``load_memory_variables``, timed with
``time.perf_counter_ns``. Each run of N turns:

1. prefills the history with the first N - (warm-up + measured) scripted turns
   through ``chat_memory.add_messages``, identically for both libraries, so a
   10,000-turn buffer run does not pay 10,000 ever-growing turns. LangChain's
   token buffer gets only the last ``LANGCHAIN_TOKEN_PREFILL`` of those
   messages: its in-memory history is pruned in place, so that tail is all it
   would hold after N real turns (given the whole prefix, its first save would
   prune 20,000 messages one ``pop(0)`` and one full re-count at a time);
2. plays the warm-up turns untimed;
3. times the measured turns: the median and p95 are the cost AT N turns, not
   the average on the way there.

Both libraries use their default in-memory history (plus ours on
``SQLiteHistory``, which has no working LangChain peer: see
:func:`persistent_prune_demo`) and their default string output. Both count
tokens with tiktoken ``cl100k_base``; LangChain through a ``FakeListLLM``
whose ``custom_get_token_ids`` is that encoding.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from langchain_core.language_models import FakeListLLM
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from memories.core.base import ChatMemory
from memories.kernel.tokens import load_encoding
from memories.short_term.buffer import BufferMemory
from memories.short_term.token_buffer import TokenBufferMemory
from memories.short_term.window import WindowMemory
from memories.stores.history.base import ChatHistory
from memories.stores.history.memory import InMemoryHistory
from memories.stores.history.sql import SQLiteHistory
from memories.stores.sql import get_engine

warnings.filterwarnings("ignore", message=".*deprecated.*")
warnings.filterwarnings("ignore", message=".*langchain-community.*")

from langchain_classic.memory import (  # noqa: E402  (after the deprecation filters)
    ConversationBufferMemory,
    ConversationBufferWindowMemory,
    ConversationTokenBufferMemory,
)

WINDOW_K = 5
TOKEN_LIMIT = 500
SEED = 20240601
LANGCHAIN_TOKEN_PREFILL = 128
"""Messages prefilled into LangChain's token buffer: well over its limit, pruned by warm-up."""

BIG_TOKEN_LIMIT = 2000
"""LangChain's default limit: an extra row at the small size, to show how the ratio scales."""

KINDS = ("buffer", "window", "token_buffer")
LABELS = {
    "buffer": "buffer",
    "window": f"window k={WINDOW_K}",
    "token_buffer": f"token buffer {TOKEN_LIMIT}",
    "token_buffer_big": f"token buffer {BIG_TOKEN_LIMIT}",
}
LIMITS = {"token_buffer": TOKEN_LIMIT, "token_buffer_big": BIG_TOKEN_LIMIT}

Turn = tuple[str, str]


class Plan(NamedTuple):
    """How one run of ``turns`` turns is played."""

    turns: int
    """Total turns in the conversation when the last measured turn ends."""
    warmup: int
    """Untimed live turns before the measured ones."""
    measured: int
    """Timed live turns: the last ones of the run."""

    @property
    def prefilled(self) -> int:
        """Turns written straight into the history with ``add_messages``."""
        return self.turns - self.warmup - self.measured


class Stats(NamedTuple):
    """Per-turn cost over a run's measured turns."""

    median_us: float
    """Median save+load time of one turn, in microseconds."""
    p95_us: float
    """95th percentile of the same."""
    mean_messages: float
    """Mean number of messages the load showed."""
    cpu_median_us: float
    """Median thread CPU time of one turn: blind to other processes preempting this one."""


class Row(NamedTuple):
    """One line of the results table."""

    kind: str
    """A key of ``LABELS``."""
    history: str
    """``memory`` or ``sqlite``."""
    turns: int
    """Conversation length at the measured turns."""
    ours: Stats
    """Our memory."""
    langchain: Stats | None
    """LangChain's equivalent, when it has one on this history."""


# -- scripted conversation ---------------------------------------------------------

_TOPICS = (
    "the quarterly budget",
    "my flight to Lisbon",
    "the database migration",
    "a birthday dinner",
    "the onboarding docs",
    "our marketing plan",
    "the failing CI job",
    "a job interview",
    "the kitchen renovation",
    "my running schedule",
    "the API rate limits",
    "a vegetarian menu",
    "the lease renewal",
    "the customer churn report",
    "a Python decorator",
    "the team offsite",
)
_ASKS = (
    "Can you help me with {t}?",
    "What do you think about {t}?",
    "I need a quick summary of {t}.",
    "How should I approach {t} this week?",
    "Remind me what we decided about {t}.",
    "Is there a faster way to handle {t}?",
    "Could you draft a short note on {t}?",
)
_DETAILS = (
    "I only have about an hour before the meeting.",
    "My manager wants it by Friday.",
    "Last time we tried this it went badly.",
    "Keep it simple and practical please.",
    "I'm not sure the numbers add up.",
    "The deadline moved up by two days.",
    "We also have to keep costs under control.",
    "Please list the steps in order.",
    "Sarah said she would review it tomorrow morning.",
    "I prefer options that need no new tools.",
)
_ANSWERS = (
    "Sure, here is a practical way to handle {t}.",
    "Good question: {t} has a few moving parts.",
    "Based on what you told me earlier, {t} looks manageable.",
    "Let's break {t} into smaller steps.",
    "Here is a short plan for {t}.",
)
_POINTS = (
    "First, write down the constraints you already know.",
    "Then check which parts depend on other people and ask them early.",
    "Keep a short list of open questions and review it every morning.",
    "If the estimate looks too optimistic, add a buffer of about twenty percent.",
    "It helps to share a draft early, even if it is rough.",
    "Automate the repetitive parts so you can focus on the decisions.",
    "Compare the two cheapest options side by side before committing.",
    "Make sure everyone agrees on what done means before you start.",
    "You can always revisit the plan once the first results come in.",
    "Finally, block time in your calendar so the work actually happens.",
)


def _text(rng: random.Random, opener: Sequence[str], fill: Sequence[str], end: str) -> str:
    """5-80 words: an opening sentence on a topic, then filler sentences, cut to length."""
    target = rng.randint(5, 80)
    words = rng.choice(opener).format(t=rng.choice(_TOPICS)).split()
    while len(words) < target:
        words += rng.choice(fill).split()
    text = " ".join(words[:target])
    return text if text[-1] in ".?!" else text.rstrip(",;:") + end


def make_turns(n: int, seed: int = SEED) -> list[Turn]:
    """``n`` deterministic (human input, AI output) pairs of 5-80 words each, no newlines."""
    rng = random.Random(seed)
    return [
        (_text(rng, _ASKS, _DETAILS, "?"), _text(rng, _ANSWERS, _POINTS, ".")) for _ in range(n)
    ]


def _messages(turns: Sequence[Turn]) -> list[BaseMessage]:
    return [m for human, ai in turns for m in (HumanMessage(human), AIMessage(ai))]


# -- memories under test ---------------------------------------------------------------


def make_ours(kind: str, history: ChatHistory) -> ChatMemory:
    """Our memory of ``kind`` on ``history``."""
    if kind == "buffer":
        return BufferMemory(chat_memory=history)
    if kind == "window":
        return WindowMemory(chat_memory=history, k=WINDOW_K)
    return TokenBufferMemory(chat_memory=history, max_token_limit=LIMITS[kind])


def make_langchain(kind: str, llm: FakeListLLM) -> Any:
    """LangChain's classic memory of ``kind`` on its default in-memory history."""
    if kind == "buffer":
        return ConversationBufferMemory()
    if kind == "window":
        return ConversationBufferWindowMemory(k=WINDOW_K)
    return ConversationTokenBufferMemory(llm=llm, max_token_limit=LIMITS[kind])


def counting_llm() -> FakeListLLM:
    """A fake LLM that counts tokens with the same tiktoken encoding as ours (offline-safe)."""
    encoding = load_encoding("cl100k_base")
    return FakeListLLM(responses=["ok"], custom_get_token_ids=lambda text: encoding.encode(text))


# -- timing ------------------------------------------------------------------------------


def _shown_messages(value: str) -> int:
    # Both libraries render ``get_buffer_string``: one line per message, and the
    # scripted texts hold no newline, so counting lines counts messages for free.
    return value.count("\n") + 1 if value else 0


def time_run(memory: Any, turns: Sequence[Turn], plan: Plan, *, prefill_tail: int | None) -> Stats:
    """Prefill, warm up, then time the measured turns of one memory.

    Args:
        prefill_tail: prefill only this many of the last prefix messages (None: all).
    """
    prefix = _messages(turns[: plan.prefilled])
    if prefill_tail is not None:
        prefix = prefix[-prefill_tail:]
    if prefix:
        memory.chat_memory.add_messages(prefix)
    live = turns[plan.prefilled : plan.turns]
    for human, ai in live[: plan.warmup]:
        memory.save_context({"input": human}, {"output": ai})
        memory.load_memory_variables({"input": human})
    gc.collect()
    times: list[int] = []
    cpu_times: list[int] = []
    shown: list[int] = []
    clock, cpu_clock = time.perf_counter_ns, time.thread_time_ns
    for human, ai in live[plan.warmup :]:
        cpu_start = cpu_clock()
        start = clock()
        memory.save_context({"input": human}, {"output": ai})
        value = memory.load_memory_variables({"input": human})["history"]
        times.append(clock() - start)
        cpu_times.append(cpu_clock() - cpu_start)
        shown.append(_shown_messages(value))
    return _stats(times, cpu_times, shown)


def _stats(times_ns: Sequence[int], cpu_ns: Sequence[int], shown: Sequence[int]) -> Stats:
    ordered = sorted(times_ns)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return Stats(
        statistics.median(ordered) / 1e3,
        p95 / 1e3,
        statistics.fmean(shown),
        statistics.median(cpu_ns) / 1e3,
    )


# -- the comparison --------------------------------------------------------------------


def in_memory_rows(
    sizes: Sequence[int], turns: Sequence[Turn], warmup: int, measured: int
) -> list[Row]:
    """Ours and LangChain's, each on its default in-memory history."""
    llm = counting_llm()
    cases = [(kind, n) for kind in KINDS for n in sizes] + [("token_buffer_big", sizes[0])]
    rows = []
    for kind, n in cases:
        plan = Plan(n, warmup, measured)
        ours = time_run(make_ours(kind, InMemoryHistory()), turns, plan, prefill_tail=None)
        tail = LANGCHAIN_TOKEN_PREFILL if kind in LIMITS else None
        theirs = time_run(make_langchain(kind, llm), turns, plan, prefill_tail=tail)
        rows.append(Row(kind, "memory", n, ours, theirs))
    return rows


def locomo_turns(path: Path) -> list[Turn]:
    """Real chat turns: LoCoMo's dev conversations, consecutive turns paired (human, AI)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    texts = [
        turn["text"].replace("\n", " ")
        for sample in data
        for key, session in sorted(sample["conversation"].items())
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]
    return list(zip(texts[0::2], texts[1::2], strict=False))


def locomo_rows(path: Path, warmup: int, measured: int) -> list[Row]:
    """Token buffer 500 at 1,000 turns on real conversation text, ours vs LangChain's."""
    turns = locomo_turns(path)
    n = min(1_000, len(turns))
    plan = Plan(n, warmup, measured)
    ours = time_run(make_ours("token_buffer", InMemoryHistory()), turns, plan, prefill_tail=None)
    theirs = time_run(
        make_langchain("token_buffer", counting_llm()),
        turns,
        plan,
        prefill_tail=LANGCHAIN_TOKEN_PREFILL,
    )
    return [Row("token_buffer", "locomo", n, ours, theirs)]


def sqlite_rows(
    sizes: Sequence[int], turns: Sequence[Turn], plans: Callable[[str, int], Plan], folder: Path
) -> list[Row]:
    """Ours on ``SQLiteHistory``, one fresh file per run."""
    rows = []
    for kind in KINDS:
        for n in sizes:
            history = SQLiteHistory(folder / f"{kind}-{n}.db")
            try:
                stats = time_run(make_ours(kind, history), turns, plans(kind, n), prefill_tail=None)
            finally:
                get_engine(history.url).dispose()
            rows.append(Row(kind, "sqlite", n, stats, None))
    return rows


def persistent_prune_demo(turns: Sequence[Turn], folder: Path) -> str:
    """One line: LangChain's token buffer on a persistent history never prunes it."""
    reason = ""
    try:
        from langchain_community.chat_message_histories.sql import SQLChatMessageHistory

        history: Any = SQLChatMessageHistory(
            session_id="demo", connection=f"sqlite:///{folder / 'langchain.db'}"
        )
        name = "SQLChatMessageHistory"
    except Exception as exc:  # an optional import: any failure means "not available"
        from langchain_community.chat_message_histories.file import FileChatMessageHistory

        first_line = str(exc).split(". ")[0]
        reason = f" (SQLChatMessageHistory is not importable: {first_line})"
        history = FileChatMessageHistory(str(folder / "langchain.json"))
        name = "FileChatMessageHistory"
    llm = counting_llm()
    memory = ConversationTokenBufferMemory(
        llm=llm, max_token_limit=TOKEN_LIMIT, chat_memory=history
    )
    # Kept short: each save re-counts the whole unpruned copy once per message popped.
    demo = turns[:40]
    for human, ai in demo:
        memory.save_context({"input": human}, {"output": ai})
    kept = len(history.messages)
    tokens = llm.get_num_tokens_from_messages(memory.buffer_as_messages)
    return (
        f"LangChain ConversationTokenBufferMemory(max_token_limit={TOKEN_LIMIT}) on "
        f"langchain_community {name}{reason}: after {len(demo)} turns the history holds "
        f"{kept} messages and load shows {tokens} tokens - its pop(0) prune ran on a copy."
    )


# -- report --------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def print_table(rows: Sequence[Row]) -> None:
    """The results, one line per (memory, history, turns)."""
    header = (
        "memory",
        "turns",
        "ours median µs",
        "ours p95",
        "langchain median",
        "langchain p95",
        "ratio",
        "msgs/turn ours",
        "msgs/turn lc",
        "cpu median ours",
        "cpu median lc",
    )
    lines = []
    for row in rows:
        suffix = {"sqlite": " (sqlite)", "locomo": " (LoCoMo)"}.get(row.history, "")
        label = LABELS[row.kind] + suffix
        lc = row.langchain
        ratio = None if lc is None else lc.median_us / row.ours.median_us
        lines.append(
            (
                label,
                f"{row.turns:,}",
                _fmt(row.ours.median_us),
                _fmt(row.ours.p95_us),
                _fmt(lc and lc.median_us),
                _fmt(lc and lc.p95_us),
                "-" if ratio is None else f"{ratio:.1f}x",
                _fmt(row.ours.mean_messages),
                _fmt(lc and lc.mean_messages),
                _fmt(row.ours.cpu_median_us),
                _fmt(lc and lc.cpu_median_us),
            )
        )
    widths = [max(len(str(c)) for c in col) for col in zip(header, *lines, strict=True)]
    for i, line in enumerate([header, *lines]):
        cells = [
            c.ljust(w) if j == 0 else c.rjust(w)
            for j, (c, w) in enumerate(zip(line, widths, strict=True))
        ]
        print(" | ".join(cells))
        if i == 0:
            print("-+-".join("-" * w for w in widths))


def check_targets(rows: Sequence[Row], small: int, large: int) -> bool:
    """Print PASS/FAIL for each target; True when all pass."""

    def find(kind: str, n: int) -> Row:
        return next(r for r in rows if (r.kind, r.history, r.turns) == (kind, "memory", n))

    results = []
    tb = find("token_buffer", small)
    assert tb.langchain is not None
    speedup = tb.langchain.median_us / tb.ours.median_us
    cpu_speedup = tb.langchain.cpu_median_us / tb.ours.cpu_median_us
    results.append(
        (
            speedup >= 25,
            f"token buffer >= 25x faster than LangChain's at {small:,} turns "
            f"(limit {TOKEN_LIMIT}): {speedup:.1f}x (CPU-time medians: {cpu_speedup:.1f}x)",
        )
    )
    for kind in ("window", "token_buffer"):
        big, base = find(kind, large).ours, find(kind, small).ours
        growth = big.median_us / base.median_us
        results.append(
            (
                growth <= 1.5,
                f"{LABELS[kind]}: our cost at {large:,} turns <= 1.5x at {small:,}: "
                f"{growth:.2f}x (CPU time: {big.cpu_median_us / base.cpu_median_us:.2f}x)",
            )
        )
    buffer_growth = find("buffer", large).ours.median_us / find("buffer", small).ours.median_us
    for ok, text in results:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    print(
        f"INFO  buffer: {buffer_growth:.1f}x from {small:,} to {large:,} turns "
        "(it shows the whole history, so it grows with it by design; no flatness claimed)"
    )
    return all(ok for ok, _ in results)


# -- profile ---------------------------------------------------------------------------------

# (label, depth, path suffix, function name): cumulative time of the matching functions.
ProfileLine = tuple[str, int, str, str]
BASE = "memories/core/base.py"
TOKEN_BUFFER = "memories/short_term/token_buffer.py"

_IN_MEMORY_TREE: tuple[ProfileLine, ...] = (
    ("save_context", 0, BASE, "save_context"),
    ("_turn: key selection + HumanMessage/AIMessage", 1, BASE, "_turn"),
    ("InMemoryHistory.append (deep copy)", 1, "history/memory.py", "append"),
    ("_update -> _refreshing", 1, TOKEN_BUFFER, "_update"),
    ("load_memory_variables", 0, BASE, "load_memory_variables"),
    (
        "_selection (its own _refreshing + reads)",
        1,
        TOKEN_BUFFER,
        "_selection",
    ),
    ("_format -> get_buffer_string", 1, BASE, "_format"),
    (
        "inside both: _refreshing (x2 per turn)",
        0,
        TOKEN_BUFFER,
        "_refreshing",
    ),
    ("state_key (json.dumps + sha1)", 1, BASE, "state_key"),
    ("TokenWindow.from_state", 1, TOKEN_BUFFER, "from_state"),
    ("TokenWindow.to_state", 1, TOKEN_BUFFER, "to_state"),
    ("_advance (count new + fold)", 1, TOKEN_BUFFER, "_advance"),
    ("TiktokenCounter.__call__", 2, "memories/kernel/tokens.py", "__call__"),
    ("tiktoken Encoding.encode", 3, "tiktoken/core.py", "encode"),
    ("TokenWindow.advance", 2, TOKEN_BUFFER, "advance"),
    ("history.entries (all callers)", 0, "history/memory.py", "entries"),
)

_SQLITE_TREE: tuple[ProfileLine, ...] = (
    ("save_context", 0, BASE, "save_context"),
    ("SQLHistory.append", 1, "history/sql.py", "append"),
    ("_update -> _refreshing", 1, TOKEN_BUFFER, "_update"),
    ("load_memory_variables", 0, BASE, "load_memory_variables"),
    (
        "_selection (its own _refreshing + reads)",
        1,
        TOKEN_BUFFER,
        "_selection",
    ),
    ("by history method (all callers):", 0, "", ""),
    ("entries", 1, "history/sql.py", "entries"),
    ("load_state", 1, "history/sql.py", "load_state"),
    ("save_state (delete + insert)", 1, "history/sql.py", "save_state"),
    ("append", 1, "history/sql.py", "append"),
    ("across them:", 0, "", ""),
    ("begin + commit (2 generator steps a transaction)", 1, "history/sql.py", "_transaction"),
    ("statement building (select/insert/where/values)", 1, "sql/base.py", "_generative"),
    ("compile cache-key lookup", 1, "sql/elements.py", "_compile_w_cache"),
    ("load_message (JSON -> message)", 1, "memories/kernel/messages.py", "load_message"),
    ("TiktokenCounter.__call__", 1, "memories/kernel/tokens.py", "__call__"),
)


def _warm_token_buffer(history: ChatHistory, turns: Sequence[Turn]) -> TokenBufferMemory:
    """A token buffer at the 1,000-turn state: 900 prefilled turns, then 100 live ones."""
    memory = TokenBufferMemory(chat_memory=history, max_token_limit=TOKEN_LIMIT)
    memory.chat_memory.add_messages(_messages(turns[:900]))
    for human, ai in turns[900:1000]:
        memory.save_context({"input": human}, {"output": ai})
        memory.load_memory_variables({"input": human})
    return memory


def _print_profile(
    memory: ChatMemory, turns: Sequence[Turn], tree: Sequence[ProfileLine], top: int
) -> None:
    """Time, then profile, ``turns``; print the tree of cumulative shares and the top own times."""
    half = len(turns) // 2
    # Unprofiled split first: cProfile's overhead inflates small calls.
    save_ns, load_ns = [], []
    clock = time.perf_counter_ns
    for human, ai in turns[:half]:
        t0 = clock()
        memory.save_context({"input": human}, {"output": ai})
        t1 = clock()
        memory.load_memory_variables({"input": human})
        load_ns.append(clock() - t1)
        save_ns.append(t1 - t0)
    save_us, load_us = statistics.median(save_ns) / 1e3, statistics.median(load_ns) / 1e3
    real = save_us + load_us

    profiled = turns[half:]
    profiler = cProfile.Profile()
    profiler.enable()
    for human, ai in profiled:
        memory.save_context({"input": human}, {"output": ai})
        memory.load_memory_variables({"input": human})
    profiler.disable()
    stats = pstats.Stats(profiler)
    table: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    total: float = stats.total_tt  # type: ignore[attr-defined]

    print(
        f"Unprofiled median: save_context {save_us:.1f} µs + load_memory_variables "
        f"{load_us:.1f} µs = {real:.1f} µs/turn. cProfile over {len(profiled)} turns "
        f"({total / len(profiled) * 1e6:.0f} µs/turn with its overhead); cumulative share "
        "of a turn, scaled to the unprofiled cost:"
    )
    for label, depth, suffix, name in tree:
        if not name:
            print(f"  {'  ' * depth}{label}")
            continue
        found = [
            v
            for (path, _, func), v in table.items()
            if func == name and path.replace("\\", "/").endswith(suffix)
        ]
        share = sum(v[3] for v in found) / total
        calls = sum(v[1] for v in found) / len(profiled)
        print(
            f"  {'  ' * depth}{label:<{50 - 2 * depth}} {100 * share:5.1f}%  "
            f"~{share * real:7.1f} µs  {calls:4.1f} calls/turn"
        )
    print("  top functions by own time:")
    ranked = sorted(table.items(), key=lambda item: item[1][2], reverse=True)[:top]
    for (path, line, func), v in ranked:
        where = "builtin" if path == "~" else f"{'/'.join(Path(path).parts[-2:])}:{line}"
        print(
            f"    {100 * v[2] / total:5.1f}%  {v[1] / len(profiled):5.1f} calls/turn  "
            f"{func} ({where})"
        )


def profile_token_buffer(turns: Sequence[Turn], n_turns: int, folder: Path) -> None:
    """Where our token buffer's per-turn time goes at the 1,000-turn state, both histories."""
    profiled = turns[1000 : 1000 + n_turns]
    print("Profile: our token buffer (limit 500), InMemoryHistory, at 1,000 turns")
    memory = _warm_token_buffer(InMemoryHistory(), turns)
    _print_profile(memory, profiled, _IN_MEMORY_TREE, top=10)
    print()
    print("Profile: our token buffer (limit 500), SQLiteHistory, at 1,000 turns")
    history = SQLiteHistory(folder / "profile.db")
    try:
        memory = _warm_token_buffer(history, turns)
        _print_profile(memory, profiled[: max(50, n_turns // 5)], _SQLITE_TREE, top=6)
    finally:
        get_engine(history.url).dispose()


def _load_note() -> str:
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0]
    note = f"load average {load:.1f} on {cores} cores"
    if load > cores:
        note += (
            " - the machine is shared and busy: wall-clock p95s include preemption by other "
            "processes; CPU-time medians are given as a cross-check"
        )
    return note


# -- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, short slices")
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json",
        help="LoCoMo JSON for an extra row on real chat turns (skipped when missing)",
    )
    args = parser.parse_args(argv)

    if args.quick:
        sizes, warmup, measured, profile_turns = (300, 3000), 20, 50, 400
    else:
        sizes, warmup, measured, profile_turns = (1_000, 10_000), 100, 200, 2000
    # A SQLite buffer load reads and parses the whole log (~1 s at 20,000 messages).
    sqlite_buffer_plan = (2, 10) if not args.quick else (1, 5)

    def sqlite_plan(kind: str, n: int) -> Plan:
        w, m = sqlite_buffer_plan if kind == "buffer" else (warmup, measured)
        return Plan(n, w, m)

    started = time.perf_counter()
    turns = make_turns(max(max(sizes), 1000 + profile_turns))
    words = [len(t.split()) for pair in turns for t in pair]
    print(
        f"short-term memory benchmark{' (--quick)' if args.quick else ''}: "
        f"{len(turns):,} scripted turns, {min(words)}-{max(words)} words/message "
        f"(mean {statistics.fmean(words):.0f}), seed {SEED}; python {sys.version.split()[0]}"
    )
    print(
        f"Method: per run, the history is prefilled with the first N-{warmup + measured} turns "
        "via chat_memory.add_messages (both libraries; LangChain's token buffer gets only the "
        f"last {LANGCHAIN_TOKEN_PREFILL} messages, all its in-place pruning would keep), then "
        f"{warmup} untimed warm-up turns, then {measured} timed turns (save_context + "
        "load_memory_variables, perf_counter_ns). SQLite buffer runs time "
        f"{sqlite_buffer_plan[1]} turns after {sqlite_buffer_plan[0]} warm-up."
    )
    print(_load_note())
    print(
        "Token counting: both tiktoken cl100k_base, but LangChain counts get_buffer_string "
        "of each message ('Human: ...'), ours counts role + text + 3 framing tokens, and ours "
        "starts the window on a human message: compare the msgs/turn columns."
    )
    print()

    with tempfile.TemporaryDirectory(prefix="memories-bench-") as tmp:
        folder = Path(tmp)
        rows = in_memory_rows(sizes, turns, warmup, measured)
        rows += sqlite_rows(sizes, turns, sqlite_plan, folder)
        if args.data.is_file():
            rows += locomo_rows(args.data, warmup, measured)
        print_table(rows)
        print(
            "ratio = LangChain median / ours median (higher: ours faster). cpu median = thread "
            "CPU time per turn (µs): excludes waiting for the disk and for other processes."
        )
        print(persistent_prune_demo(turns, folder))
        print()
        passed = check_targets(rows, sizes[0], sizes[-1])
        if args.quick:
            print(f"(--quick: sizes {sizes[0]:,}/{sizes[-1]:,}, not the targets' 1,000/10,000)")
        print()
        profile_token_buffer(turns, profile_turns, folder)
    print(f"\n{_load_note()}; total {time.perf_counter() - started:.0f} s")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
