"""The README's main job: one scripted conversation through a chain, per memory type.

Runs offline on embedded defaults: each memory keeps its history in a SQLite
file, token counts come from bundled tiktoken data, and with no ``--llm`` the
assistant's replies are scripted (a fake chat model), so no key or network is
needed. With ``--llm provider:model`` a real model answers instead.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseLanguageModel, FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage

from memories.core.base import BaseMemory
from memories.core.config import create_memory, memory_class
from memories.errors import ConfigError, MissingDependencyError
from memories.kernel.imports import install_hint
from memories.kernel.tokens import TiktokenCounter

__all__ = [
    "DEMO_LLM",
    "DEMO_MEMORIES",
    "DEMO_NAMESPACE",
    "INSTRUCTION_REVISIONS",
    "PROFILE_PATCHES",
    "SCRIPT",
    "SESSIONS",
    "DemoModel",
    "DemoResult",
    "config_path",
    "demo_config",
    "format_results",
    "full_text",
    "html_report",
    "plot_results",
    "preference_verdict",
    "run_demo",
]

#: (user says, scripted assistant reply), in three sessions of one user. The
#: app restarts between sessions: each memory is rebuilt from its config and
#: reads its state back from the SQLite file.
SESSIONS: list[list[tuple[str, str]]] = [
    [
        ("Hi! I'm Maya, a marine biologist living in Lisbon.", "Nice to meet you, Maya!"),
        ("I mostly study octopus behaviour in tide pools.", "Octopuses are fascinating."),
        ("I prefer tea over coffee, green tea especially.", "Noted: green tea."),
    ],
    [
        ("Next month I'm going to a conference in Tokyo.", "Exciting, enjoy Tokyo!"),
        ("My sister Ines is coming with me.", "Travelling with Ines sounds fun."),
        ("Can you remind me to pack my field notebook?", "I'll remember the notebook."),
    ],
    [
        ("Actually I've switched to coffee lately, black, no sugar.", "Got it: black coffee now."),
        ("The conference moved to Kyoto, same dates.", "Kyoto it is, same dates."),
        ("What do you know about me so far?", "You're Maya, a marine biologist in Lisbon."),
        ("And what do I drink these days?", "Black coffee, no sugar."),
    ],
]

#: The whole conversation, in order.
SCRIPT: list[tuple[str, str]] = [turn for session in SESSIONS for turn in session]

#: The user's namespace: every long-term memory of the demo keeps what it knows of her there.
DEMO_NAMESPACE: tuple[str, ...] = ("users", "maya")


@dataclass(frozen=True)
class DemoModel:
    """A config value the demo replaces with a model: ``--llm``'s (its calls counted), else
    ``offline()``'s stand-in, else none (the memory's offline default)."""

    offline: Callable[[], BaseLanguageModel] | None = None
    """Makes the offline stand-in, once per demo row."""


#: The demo's model, or the memory's offline default.
DEMO_LLM = DemoModel()


def _op(op: str, path: str, value: Any = None) -> dict[str, Any]:
    return {"op": op, "path": path, "value": value}


#: What a model would write into the profile after each turn of :data:`SCRIPT`.
PROFILE_PATCHES: list[list[dict[str, Any]]] = [
    [
        _op("add", "/name", "Maya"),
        _op("add", "/job", "marine biologist"),
        _op("add", "/city", "Lisbon"),
    ],
    [_op("add", "/research", "octopus behaviour in tide pools")],
    [_op("add", "/drink", "green tea")],
    [_op("add", "/plans", ["conference in Tokyo next month"])],
    [_op("add", "/family", {"sister": "Ines"}), _op("add", "/plans/-", "travel with Ines")],
    [_op("add", "/plans/-", "pack the field notebook")],
    [_op("replace", "/drink", "black coffee, no sugar")],
    [_op("replace", "/plans/0", "conference in Kyoto next month")],
    [],
    [],
]


def scripted_profile_model() -> BaseLanguageModel:
    """The offline stand-in for the profile's model: replies :data:`PROFILE_PATCHES` in order."""
    from memories.kernel.patching import PATCH_TOOL_NAME
    from memories.testing import ScriptedChatModel

    calls = [
        {"name": PATCH_TOOL_NAME, "args": {"operations": ops}, "id": f"patch-{i}"}
        for i, ops in enumerate(PROFILE_PATCHES)
    ]
    return ScriptedChatModel(responses=[AIMessage("", tool_calls=[c]) for c in calls], echo=False)


#: What a model would make of the conversation as the agent's instructions, at
#: every fourth turn: rules of behaviour (procedural memory), not facts.
INSTRUCTION_REVISIONS: list[str] = [
    "You are a friendly assistant. Keep replies to one or two sentences, and use the user's name.",
    "You are a friendly assistant. Keep replies to one or two sentences, and use the "
    "user's name. When the user changes a preference or a plan, the new one replaces the old.",
]
DEMO_INSTRUCTIONS = "You are a friendly assistant."


def scripted_instructions_model() -> BaseLanguageModel:
    """The offline stand-in for the instructions' model: :data:`INSTRUCTION_REVISIONS` in order."""
    from memories.testing import ScriptedChatModel

    replies = [
        json.dumps({"revisions": [{"prompt": "main", "text": text, "reason": "the chat so far"}]})
        for text in INSTRUCTION_REVISIONS
    ]
    return ScriptedChatModel(responses=replies, echo=False)


#: The memory configs the demo compares. Each is put on the demo's SQLite file
#: (its history, or its store) under a session named after the row.
DEMO_MEMORIES: dict[str, dict[str, Any]] = {
    "buffer": {"type": "buffer"},
    "window (k=3)": {"type": "window", "k": 3},
    "token_buffer (120)": {"type": "token_buffer", "max_token_limit": 120},
    "summary": {"type": "summary", "llm": DEMO_LLM},
    "summary_buffer (120)": {"type": "summary_buffer", "max_token_limit": 120, "llm": DEMO_LLM},
    "vector (k=3)": {"type": "vector", "k": 3},
    "collection (k=3)": {"type": "collection", "k": 3, "memory_key": "history", "llm": DEMO_LLM},
    "examples (k=2)": {"type": "examples", "k": 2, "memory_key": "history"},
    "instructions": {
        "type": "instructions",
        "prompts": DEMO_INSTRUCTIONS,
        "policy": "every_n",
        "every_n": 4,
        "memory_key": "history",
        "llm": DemoModel(offline=scripted_instructions_model),
    },
    "profile": {
        "type": "profile",
        "memory_key": "history",
        "llm": DemoModel(offline=scripted_profile_model),
    },
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
    tokens_per_turn: tuple[int, ...] = ()
    """Tokens the memory injected at each turn, in order."""
    calls_per_turn: tuple[int, ...] = ()
    """The memory's own model calls so far, after each turn."""

    @property
    def knows(self) -> str:
        """Whether the last injection holds the user's current drink, or only the stale one."""
        return preference_verdict(self.injected)


#: The conversation's point: the user switched from tea to coffee in the last
#: session. Phrases that say each (the current one wins when both are there).
CURRENT_PREFERENCE = ("coffee", ("switched to coffee", "black coffee"))
STALE_PREFERENCE = ("tea", ("green tea", "tea over coffee"))
#: The last question, whose answer needs the current preference.
LAST_QUESTION = SCRIPT[-1][0]


def preference_verdict(text: str) -> str:
    """``"✓ coffee"``: the text holds the current drink; ``"✗ only tea"``: only the old one."""
    lowered = " ".join(text.lower().split())
    (current, says_current), (stale, says_stale) = CURRENT_PREFERENCE, STALE_PREFERENCE
    if any(phrase in lowered for phrase in says_current):
        return f"✓ {current}"
    if any(phrase in lowered for phrase in says_stale):
        return f"✗ only {stale}"
    return "- neither"


def run_demo(
    db_path: Path | None = None,
    *,
    llm: BaseLanguageModel | None = None,
    memories: dict[str, dict[str, Any]] | None = None,
) -> list[DemoResult]:
    """Run :data:`SESSIONS` through a ``ConversationChain`` once per memory config.

    Args:
        db_path: the SQLite file of the histories; the Chroma folder and the
            config of every memory that ran (:func:`demo_config`) go beside it.
            Default: a temporary folder, removed when the demo ends.
        llm: a real model for the replies and for memories that take one;
            None gives scripted replies and each memory's offline default.
        memories: label -> memory config (default :data:`DEMO_MEMORIES`).
    """
    if db_path is None:  # a temporary folder, removed with everything the demo wrote
        with tempfile.TemporaryDirectory(prefix="memories-demo-") as folder:
            where = Path(folder) / "demo.db"
            return run_demo(where, llm=llm, memories=memories)
    from langchain_classic.chains import ConversationChain

    memories = memories or DEMO_MEMORIES
    written = config_path(db_path)
    _check_replaceable(written)  # before anything is cleared
    counter = TiktokenCounter()
    results: list[DemoResult] = []
    ran: list[str] = []
    for name, config in memories.items():
        calls = _CallCounter()
        try:
            placed = _placed(config, db_path, name.split(" ")[0])
        except MissingDependencyError as exc:
            results.append(DemoResult(name, f"(skipped: {exc})", 0, 0, 0.0))
            continue
        ran.append(name)
        options = _with_llm(placed, llm, calls)
        cleared = create_memory(options)
        cleared.clear()
        _close(cleared)
        model = llm or FakeListChatModel(responses=[r for _, r in SCRIPT])
        timing, calls_per_turn = _Timing(counter), []
        for session in SESSIONS:
            # A new process: the memory is rebuilt from its config and reads its file.
            memory = timing.wrap(create_memory(options))
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # ConversationChain's own deprecation notice
                    chain = ConversationChain(llm=model, memory=memory)
                for user, _ in session:
                    chain.invoke({"input": user})
                    calls_per_turn.append(calls.count)
            finally:
                # The process ends: its deferred work (background writes, summary
                # folds) finishes before the demo's temporary folder is removed.
                _close(memory)
        text = _injected_text(timing.last_loaded)
        results.append(
            DemoResult(
                name=name,
                injected=text,
                tokens=counter([HumanMessage(text)]) if text else 0,
                llm_calls=calls.count,
                seconds=timing.seconds,
                tokens_per_turn=tuple(timing.tokens_per_load),
                calls_per_turn=tuple(calls_per_turn),
            )
        )
    config = demo_config({name: memories[name] for name in ran}, db_path.name)
    written.write_text(CONFIG_HEADER + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return results


#: The first lines of the config the demo writes; also how a later run knows
#: that a file at that path is the demo's own, and may replace it.
CONFIG_HEADER = """\
# Written by `memories demo`: the memories it ran, on the data it left beside this file.
# Open it with `memories serve --config THIS_FILE` (or `memories inspect`).
# The demo's model is left out: memories it updated (the profile, the instructions;
# scripted offline, or --llm) are opened here with policy manual, so reading them calls
# no model. To chat on with them, give them an `llm` and their policy back.
"""


def config_path(db_path: Path) -> Path:
    """Where the demo writes its config: beside ``db_path``, named like it (``demo.yaml``)."""
    path = db_path.with_suffix(".yaml")
    return path if path != db_path else db_path.with_name(db_path.name + ".yaml")


def demo_config(memories: dict[str, dict[str, Any]], db_name: str = "demo.db") -> dict[str, Any]:
    """One ``combined`` config of the demo's ``memories``, placed where the demo put their data.

    Paths are relative to the config beside ``db_name``; each memory gets its own
    ``memory_key`` (a combined memory refuses one twice). The models are left out, so a
    memory that needs one gets ``policy: manual``: an inspector calls no model.
    """
    leaves: list[dict[str, Any]] = []
    keys: set[str] = set()
    for name, config in memories.items():
        session = name.split(" ")[0]
        key = session if session not in keys else f"{session}_{len(keys) + 1}"
        keys.add(key)
        placed = _placed(config, Path(db_name), session)
        leaf = {k: v for k, v in placed.items() if not isinstance(v, DemoModel)}
        if any(isinstance(v, DemoModel) and v.offline for v in placed.values()):
            leaf["policy"] = "manual"
        leaf["memory_key"] = key
        leaves.append(leaf)
    # Tuples (namespaces) as YAML lists: a round trip through JSON.
    return dict(json.loads(json.dumps({"type": "combined", "memories": leaves})))


def _check_replaceable(path: Path) -> None:
    """Refuse to overwrite a file at ``path`` that an earlier demo did not write."""
    if not path.exists():
        return
    try:
        ours = path.read_text(encoding="utf-8").startswith(CONFIG_HEADER.splitlines()[0])
    except (OSError, UnicodeDecodeError):
        ours = False
    if not ours:
        raise ConfigError(
            f"The demo writes its config to {str(path)!r}, but a file the demo did not write "
            "is there: move it, or give --db another name."
        )


def _close(memory: Any) -> None:
    """Finish a memory's deferred work, as a process does before it ends."""
    if isinstance(memory, BaseMemory):  # a LangChain memory defers nothing
        memory.close()


def _placed(config: dict[str, Any], db_path: Path, session: str) -> dict[str, Any]:
    """The config with its data put on the demo's SQLite file: its history under ``session``,
    its long-term store in the user's namespace (:data:`DEMO_NAMESPACE`)."""
    fields = getattr(memory_class(config["type"]), "model_fields", {})
    placed = dict(config)
    if "chat_memory" in fields:
        placed.setdefault(
            "history", {"type": "sqlite", "path": str(db_path), "session_id": session}
        )
    if "url" in fields:
        placed.setdefault("url", f"sqlite:///{db_path}")
    if "namespace" in fields:
        placed.setdefault("namespace", DEMO_NAMESPACE)
    if "path" in fields:  # the vector memory's Chroma folder
        placed.setdefault("path", str(db_path.with_suffix(".chroma")))
    return placed


def _with_llm(
    config: dict[str, Any], llm: BaseLanguageModel | None, calls: _CallCounter
) -> dict[str, Any]:
    """The config with each :class:`DemoModel` replaced by a call-counting model (or dropped)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, DemoModel):
            model = llm if llm is not None else value.offline() if value.offline else None
            if model is not None:
                out[key] = model.model_copy(update={"callbacks": [calls]})
        elif isinstance(value, dict):
            out[key] = _with_llm(value, llm, calls)
        elif isinstance(value, list):
            out[key] = [_with_llm(v, llm, calls) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = value
    return out


def _injected_text(variables: dict[str, Any]) -> str:
    return "\n".join(str(v) for v in variables.values())


class _CallCounter(BaseCallbackHandler):
    """Counts the model calls a memory makes itself (summaries, profile updates)."""

    def __init__(self) -> None:
        self.count = 0

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], **kwargs: Any) -> None:
        self.count += 1

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[Any]], **kwargs: Any
    ) -> None:
        self.count += 1


class _Timing:
    """Times memories' save/load calls by wrapping their methods."""

    def __init__(self, counter: TiktokenCounter) -> None:
        self.counter = counter
        self.seconds = 0.0
        self.last_loaded: dict[str, Any] = {}
        self.tokens_per_load: list[int] = []

    def wrap(self, memory: BaseMemory) -> BaseMemory:
        def timed(method: Callable[..., Any]) -> Callable[..., Any]:
            def call(*args: Any) -> Any:
                start = time.perf_counter()
                try:
                    return method(*args)
                finally:
                    self.seconds += time.perf_counter() - start

            return call

        load = timed(memory.load_memory_variables)

        def timed_load(inputs: dict[str, Any]) -> dict[str, Any]:
            self.last_loaded = load(inputs)
            text = _injected_text(self.last_loaded)
            self.tokens_per_load.append(self.counter([HumanMessage(text)]) if text else 0)
            return self.last_loaded

        object.__setattr__(memory, "save_context", timed(memory.save_context))
        object.__setattr__(memory, "load_memory_variables", timed_load)
        return memory


def format_results(results: Sequence[DemoResult], *, width: int | None = None) -> str:
    """The comparison table a person reads at a glance (rich, wrapped to the terminal).

    A row per memory: :func:`preference_verdict`, tokens, its own model calls and time,
    and the first four lines of what it injects.
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # The terminal's width, but room for the text column even in a narrow or piped one.
    width = width or max(shutil.get_terminal_size().columns, 110)
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    table = Table(title=f"The last question: {LAST_QUESTION!r}", title_justify="left")
    table.add_column("memory", no_wrap=True)
    table.add_column("knows the\nnew drink", no_wrap=True)
    table.add_column("tokens", justify="right")
    table.add_column("LLM calls", justify="right", no_wrap=True)
    table.add_column("time ms", justify="right", no_wrap=True)
    table.add_column("what it injects into the last prompt", overflow="fold")
    for r in results:
        shown = " | ".join(r.injected.splitlines()) or "(nothing)"
        table.add_row(  # text, not markup: a skipped row's "chat-memories[chroma]" stays whole
            escape(r.name), r.knows, str(r.tokens), str(r.llm_calls), f"{r.seconds * 1000:.0f}",
            escape(_clipped(shown, max(30, console.width - 64) * 4)),
        )  # fmt: skip
    console.print(table)
    return console.export_text().rstrip()


def _clipped(text: str, characters: int) -> str:
    """``text``, cut at a word to about ``characters`` and marked when cut."""
    if len(text) <= characters:
        return text
    return text[:characters].rsplit(" ", 1)[0] + " …"


def full_text(results: Sequence[DemoResult], name: str) -> str:
    """One row's injection, whole (``memories demo --show NAME``; a prefix of the label will do).

    Raises:
        ConfigError: no row has that name.
    """
    for r in results:
        if r.name == name or r.name.split(" ")[0] == name:
            return f"{r.name} ({r.knows}, {r.tokens} tokens):\n{r.injected}"
    names = ", ".join(r.name.split(" ")[0] for r in results)
    raise ConfigError(f"--show {name!r}: no memory of that name in the demo; use one of {names}.")


def plot_results(results: Sequence[DemoResult], path: str | Path) -> Path:
    """Draw prompt tokens per turn and cumulative LLM calls, one line per memory, to an image.

    Raises:
        MissingDependencyError: matplotlib is not installed (the ``plot`` extra).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no window
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependencyError("memories demo --plot", install_hint("plot")) from exc
    figure, (tokens, calls) = plt.subplots(1, 2, figsize=(12, 4.5), dpi=100)
    for r in results:
        turns = range(1, len(r.tokens_per_turn) + 1)
        tokens.plot(turns, r.tokens_per_turn, marker="o", markersize=3, label=r.name)
        calls.plot(range(1, len(r.calls_per_turn) + 1), r.calls_per_turn, marker="o",
                   markersize=3, label=r.name)  # fmt: skip
    tokens.set(title="What each memory adds to the prompt", xlabel="turn", ylabel="tokens")
    calls.set(title="The memory's own LLM calls, so far", xlabel="turn", ylabel="calls")
    tokens.legend(fontsize=8)
    figure.tight_layout()
    target = Path(path)
    figure.savefig(target)
    plt.close(figure)
    return target


def html_report(results: Sequence[DemoResult], path: str | Path) -> Path:
    """The table (every injection whole) and the picture, in one self-contained HTML file.

    Raises:
        MissingDependencyError: matplotlib is not installed (the ``plot`` extra).
    """
    import base64
    import html

    target = Path(path)
    with tempfile.TemporaryDirectory(prefix="memories-demo-") as folder:
        picture = base64.b64encode(plot_results(results, Path(folder) / "p.png").read_bytes())
    rows = "".join(
        f"<tr><td>{html.escape(r.name)}</td><td>{html.escape(r.knows)}</td>"
        f"<td>{r.tokens}</td><td>{r.llm_calls}</td><td>{r.seconds * 1000:.0f}</td>"
        f"<td><pre>{html.escape(r.injected)}</pre></td></tr>"
        for r in results
    )
    target.write_text(
        "<!doctype html><meta charset='utf-8'><title>memories demo</title>"
        "<style>body{font-family:sans-serif}td,th{border:1px solid #ccc;padding:4px;"
        "vertical-align:top}pre{white-space:pre-wrap;margin:0}</style>"
        f"<h1>memories demo</h1><p>The last question: {html.escape(LAST_QUESTION)}</p>"
        f"<img alt='prompt tokens and LLM calls per turn' src='data:image/png;base64,"
        f"{picture.decode()}'><table><tr><th>memory</th><th>knows the new drink</th>"
        f"<th>tokens</th><th>LLM calls</th><th>time ms</th><th>what it injects</th></tr>"
        f"{rows}</table>",
        encoding="utf-8",
    )
    return target
