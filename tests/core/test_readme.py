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
