"""The demo's sessions, restarts and the count of the memories' own model calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_core.language_models import FakeListChatModel

from memories import BufferMemory, ConfigError, register_memory
from memories.core.config import MEMORY_TYPES
from memories.faces.demo import DEMO_LLM, DEMO_MEMORIES, SCRIPT, SESSIONS, run_demo
from tests.probes import python


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


# -- issue 16: the demo makes its point, draws it, and cleans up --------------------------


def test_the_verdict_is_computed_from_the_text() -> None:
    from memories.faces.demo import preference_verdict

    assert preference_verdict("Human: I prefer tea over coffee, green tea especially.") == (
        "✗ only tea"
    )
    assert preference_verdict("I prefer tea over coffee. Actually I've switched to coffee") == (
        "✓ coffee"
    )
    assert preference_verdict('{"drink": "black coffee, no sugar"}') == "✓ coffee"
    assert preference_verdict("Maya lives in Lisbon.") == "- neither"


def test_the_table_shows_the_question_the_verdict_and_full_text_on_request() -> None:
    from memories.faces.demo import DemoResult, format_results, full_text

    long = "Human: I prefer tea over coffee, green tea especially. " * 30
    results = [
        DemoResult("window (k=3)", long, 500, 0, 0.01),
        DemoResult("profile", "{}", 2, 3, 0.0),
    ]
    table = format_results(results, width=100)
    assert "And what do I drink these days?" in table
    assert "✗ only tea" in table and "- neither" in table and " …" in table
    assert max(len(line) for line in table.splitlines()) <= 100
    assert full_text(results, "window").endswith(long)  # whole, by the label's first word
    with pytest.raises(ConfigError, match="use one of window, profile"):
        full_text(results, "vector")


def test_a_skipped_rows_install_command_keeps_its_brackets_in_the_table() -> None:
    """Issue 36: rich took ``[chroma]`` for markup; the row said ``pip install 'chat-memories'``."""
    from memories.faces.demo import DemoResult, format_results

    hint = "(skipped: Chroma vector memory needs an optional dependency: run "
    hint += "`pip install 'chat-memories[chroma]'`.)"
    table = format_results([DemoResult("vector [k=3]", hint, 0, 0, 0.0)], width=200)
    assert "pip install 'chat-memories[chroma]'" in table
    assert "vector [k=3]" in table


def test_make_demo_installs_the_extra_of_the_command_it_prints_last() -> None:
    """Issue 36: the demo ends with ``memories serve``, which ``make demo`` did not install."""
    import re

    from memories.kernel.imports import EXTRAS

    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text(encoding="utf-8")
    (prerequisites,) = re.findall(r"^demo:(.*)$", makefile, re.M)
    extras: set[str] = set()
    for target in prerequisites.split():
        (recipe,) = re.findall(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.M)
        for listed in re.findall(r"-e \"\.\[([\w,]+)\]\"", recipe):
            extras.update(listed.split(","))
    assert EXTRAS["memories.faces.server.app"] in extras  # memories serve
    assert EXTRAS["memories.long_term.vector"] in extras  # the demo's vector memories


def test_the_plot_is_an_image_of_the_expected_size(tmp_path: Path) -> None:
    import matplotlib.image

    from memories.faces.demo import DemoResult, plot_results

    results = [
        DemoResult(
            "buffer", "x", 10, 0, 0.0, tokens_per_turn=(5, 10, 15), calls_per_turn=(0, 0, 0)
        ),
        DemoResult("summary", "y", 8, 2, 0.0, tokens_per_turn=(5, 8, 8), calls_per_turn=(0, 1, 2)),
    ]
    picture = plot_results(results, tmp_path / "demo.png")
    pixels = matplotlib.image.imread(picture)
    assert pixels.shape[:2] == (450, 1200)
    assert pixels.std() > 0.01  # lines were drawn, not a blank canvas


def test_run_demo_records_each_turn_and_removes_its_temporary_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (result,) = run_demo(memories={"window": {"type": "window", "k": 1}})
    assert list(tmp_path.iterdir()) == []  # the temporary folder is gone
    assert len(result.tokens_per_turn) == len(SCRIPT) == len(result.calls_per_turn)
    assert result.tokens_per_turn[0] == 0 and result.tokens_per_turn[-1] == result.tokens


def test_the_html_report_holds_every_injection_whole_and_the_picture(tmp_path: Path) -> None:
    from memories.faces.demo import DemoResult, html_report

    long = "I prefer <tea> over coffee. " * 40
    results = [DemoResult("buffer", long, 10, 0, 0.0, (1, 2), (0, 0))]
    page = html_report(results, tmp_path / "demo.html").read_text(encoding="utf-8")
    assert page.count("I prefer &lt;tea&gt; over coffee.") == 40  # whole, escaped
    assert "data:image/png;base64,iVBOR" in page and "And what do I drink these days?" in page


# -- issue 24: a main job that ends clean --------------------------------------------------


def test_the_demo_command_ends_clean_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """`memories demo` on a fresh machine: no traceback or failure on stderr, no file left.

    It ended in the background writer's tracebacks (the temporary folder was
    removed while the example memory's writes were queued), and left
    onnxruntime's `.ses` and tiktoken's `data-gym-cache` in $TMPDIR.
    """
    import os

    import memories
    from memories.kernel.paths import DATA_DIR_ENV

    folders = {name: tmp_path / name for name in ("tmp", "home", "data")}
    for folder in folders.values():
        folder.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        # What a fresh machine has not set: caches, opt-outs, a model for the replies.
        if k not in {"ORT_DISABLE_TELEMETRY", "TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR",
                     "XDG_CACHE_HOME", "MEMORIES_LLM"}
    }  # fmt: skip
    tree = str(Path(memories.__file__).resolve().parents[1])  # this tree, not an installed one
    env.update(
        TMPDIR=str(folders["tmp"]),
        HOME=str(folders["home"]),
        PYTHONPATH=os.pathsep.join([tree, env.get("PYTHONPATH", "")]),
        **{DATA_DIR_ENV: str(folders["data"])},
    )
    done = python("-m", "memories.faces.cli", "demo", timeout=600, cwd=tmp_path, env=env)
    assert "The last question" in done.stdout
    noise = [line for line in done.stderr.splitlines() if "Traceback" in line or "failed" in line]
    assert noise == [], done.stderr
    for name, folder in folders.items():
        left = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
        assert left == [], f"the demo left files in {name}: {left}"


# -- issue 27: the demo's data opens in the inspector ---------------------------------------


def test_a_file_the_demo_did_not_write_is_never_replaced(tmp_path: Path) -> None:
    mine = tmp_path / "demo.yaml"
    mine.write_text("type: buffer\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="a file the demo did not write"):
        run_demo(tmp_path / "demo.db", memories={"window": {"type": "window", "k": 1}})
    assert mine.read_text(encoding="utf-8") == "type: buffer\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.yaml"]  # nothing ran


def test_the_config_names_only_the_memories_that_ran_and_opens_on_their_data(
    tmp_path: Path,
) -> None:
    from memories import create_memory
    from memories.core.combined import leaves_of
    from memories.faces.demo import config_path

    register_memory(
        "ghost", "no_such_module_for_the_demo", "Ghost", pip_command="pip install ghost"
    )
    try:
        rows = {"window (k=1)": {"type": "window", "k": 1}, "ghost": {"type": "ghost"}}
        run_demo(tmp_path / "demo.db", memories=rows)
    finally:
        MEMORY_TYPES.pop("ghost")
    assert config_path(tmp_path / "demo.db") == tmp_path / "demo.yaml"
    (window,) = leaves_of(create_memory(tmp_path / "demo.yaml"))
    assert window.memory_key == "window"
    assert len(window.chat_memory.messages) == 2 * len(SCRIPT)
    # A --db whose name ends in .yaml keeps its config apart.
    assert config_path(tmp_path / "d.yaml") == tmp_path / "d.yaml.yaml"


def test_without_db_the_closing_lines_say_db_keeps_the_data(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import memories.faces.demo as demo
    from memories.faces.cli import main

    monkeypatch.setattr(demo, "DEMO_MEMORIES", {"window": {"type": "window", "k": 1}})
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "--db PATH keeps it" in out and "memories serve --config" in out


def test_a_relative_db_gives_a_config_that_opens_from_any_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from memories import create_memory
    from memories.core.combined import leaves_of

    (tmp_path / "run").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "run")
    run_demo(Path("demo.db"), memories={"window (k=1)": {"type": "window", "k": 1}})
    monkeypatch.chdir(tmp_path / "elsewhere")
    (window,) = leaves_of(create_memory(tmp_path / "run" / "demo.yaml"))
    assert len(window.chat_memory.messages) == 2 * len(SCRIPT)
    assert list((tmp_path / "elsewhere").iterdir()) == []
