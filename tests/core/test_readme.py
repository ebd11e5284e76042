"""Issues 16 and 24: every Python block of the README and of the docs site runs as written.

Each block runs on its own, in a fresh folder, offline, with the data directory
inside that folder. Only ```python blocks run: ```bash, ```yaml and ```toml
blocks are shown, not run (they are commands and files, not Python).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


def page_name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


BLOCKS = [
    pytest.param(code, f"{page_name(page)} block {i}", id=f"{page_name(page)}-block-{i}")
    for page in PAGES
    for i, code in enumerate(python_blocks(page))
]


def test_the_readme_has_one_runnable_example() -> None:
    assert len(python_blocks(README)) >= 1


def test_the_docs_have_python_blocks_on_every_memory_page() -> None:
    assert DOCS.is_dir()
    for page in sorted((DOCS / "memories").glob("*.md")):
        assert python_blocks(page), f"{page_name(page)} shows no Python example"
    assert sum(len(python_blocks(page)) for page in PAGES) >= 25


@pytest.mark.parametrize(("code", "where"), BLOCKS)
def test_a_docs_block_runs_as_written(
    code: str,
    where: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORIES_DATA_DIR", str(tmp_path / "data"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LangChain's deprecation notices for its classic chains
        exec(compile(code, where, "exec"), {"__name__": "readme"})


# -- issue 36: the pages that list the memories list every class the code has ----------------

_UNITS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
_UNITS += "fifteen sixteen seventeen eighteen nineteen"
_TENS = "_ _ twenty thirty forty fifty"


def number_word(n: int) -> str:
    """``21`` -> ``"twenty-one"`` (up to 59)."""
    units, tens = _UNITS.split(), _TENS.split()
    if n < 20:
        return units[n]
    return tens[n // 10] + ("" if n % 10 == 0 else "-" + units[n % 10])


def memory_classes() -> set[str]:
    """The class names of every memory type this library registers (a config ``type`` each)."""
    from memories.core.config import MEMORY_TYPES

    return {name for module, name in MEMORY_TYPES.values() if module.startswith("memories.")}


def section(page: Path, heading: str) -> str:
    text = page.read_text(encoding="utf-8")
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def test_choosing_lists_every_memory_class_and_counts_them() -> None:
    """It said "Fifteen memories", left out EntityMemory and listed 17 of the 21 classes."""
    classes = memory_classes()
    listed = set(
        re.findall(r"`(\w+Memory)\b", section(DOCS / "choosing.md", "## All the memories"))
    )
    assert sorted(classes - listed) == []
    opening = (DOCS / "choosing.md").read_text(encoding="utf-8").split("\n\n")[1]
    assert opening.startswith(f"{number_word(len(classes)).capitalize()} memory classes")
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    assert f"which of the {number_word(len(classes))}," in index


def test_the_readme_table_lists_every_memory_class() -> None:
    table = README.read_text(encoding="utf-8").split("| short name |", 1)[1].split("\n\n", 1)[0]
    assert sorted(memory_classes() - set(re.findall(r"`(\w+Memory)\b", table))) == []


# -- issue 36: the README says what the library is first, and its commands run as written ------


def test_the_readme_says_what_it_is_in_two_lines_then_gives_the_two_commands() -> None:
    """Its first lines were two ``make`` commands before a word of what the library is."""
    title, description, commands = README.read_text(encoding="utf-8").split("\n\n")[:3]
    assert title == "# memories"
    assert 1 <= len(description.splitlines()) <= 2 and "LangChain" in description
    lines = commands.splitlines()
    assert lines[0] == "```bash" and lines[-1] == "```"
    assert [line.split("#")[0].strip() for line in lines[1:-1]] == ["make demo", "make test"]


def test_the_readmes_figures_name_what_they_are_compared_with() -> None:
    """ "(4.1 GB at 1,500 before)": before what? A peer or a version is named instead."""
    text = README.read_text(encoding="utf-8")
    unnamed = [s for s in re.split(r"(?<=[.;(])\s", text) if re.search(r"\d.*\bbefore\b", s)]
    assert unnamed == []


def test_the_readmes_serve_commands_name_the_config_make_demo_writes() -> None:
    """`memories serve --config memories.yaml` named a file that exists nowhere."""
    from memories.faces.demo import config_path

    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    (db,) = re.findall(r"^\tmemories demo --db (\S+)$", makefile, re.M)
    made = {config_path(Path(db)).as_posix()}
    named = re.findall(r"memories serve --config (\S+)", README.read_text(encoding="utf-8"))
    assert named and all(path in made or (ROOT / path).is_file() for path in named), named


def test_the_readme_installs_from_the_checkout_what_the_registry_does_not_have() -> None:
    """`pip install 'chat-memories[server]'`: the registry has no chat-memories."""
    text = README.read_text(encoding="utf-8")
    assert "pip install 'chat-memories" not in text
    assert "pip install -e '.[server]'" in text


def test_the_readmes_migration_example_prints_what_the_memory_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It printed nothing but LangChain's deprecation warning."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORIES_DATA_DIR", str(tmp_path / "data"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(python_blocks(README)[0], "README block 0", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out == "{'history': \"Human: Hi, I'm Ada.\\nAI: Hello Ada!\"}\n"
