"""The distribution as a user installs it: one top-level package, adapters inside it.

A wheel is built from this checkout and installed (normal, not editable) into
a fresh virtual environment that borrows the dependencies of the environment
running the tests (a venv's, not only the base interpreter's). The
probes run from a user's project folder that has an ``integrations/``
package of its own, the ordinary Django app layout that broke the first wave.
"""

from __future__ import annotations

import json
import shutil
import sys
import sysconfig
import venv
from pathlib import Path
from site import getsitepackages

import pytest

import memories
from memories.kernel.imports import DISTRIBUTION
from tests.probes import python

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

# What a checkout may hold that the wheel is not built from.
LEFT_BEHIND = (".git", "build", "*.egg-info", "site", "__pycache__", ".*_cache", ".hypothesis")

PROBE = """
import json, sys
import integrations.models                      # the user's own package
import memories, memories.integrations.chroma   # ours, inside memories
from memories import SummaryMemory
from memories.testing import ScriptedChatModel
memory = SummaryMemory(llm=ScriptedChatModel(responses=["a summary"]), max_token_limit=5)
memory.save_context({"input": "hello there, how are you today?"}, {"output": "fine, thanks"})
print(json.dumps({
    "memories": memories.__file__,
    "adapters": memories.integrations.chroma.__file__,
    "users": integrations.models.__file__,
    "user_value": integrations.models.VALUE,
    "version": memories.__version__,
    "summary": memory.buffer,
}))
"""


def borrowing_venv(env_dir: Path) -> Path:
    """A venv at ``env_dir`` that sees this environment's packages; its python.

    ``system_site_packages`` lends only the base interpreter's, which inside a
    venv (``make test`` in a fresh one) lacks every dependency: a ``.pth`` file
    adds this environment's site folders after the new venv's own.
    """
    venv.create(env_dir, system_site_packages=True, with_pip=False)
    venv_python = env_dir / "bin" / "python"
    purelib = python(
        "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", interpreter=venv_python
    )
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    ours.update(getsitepackages())
    lent = Path(purelib.stdout.strip()) / "_borrowed_from_the_test_environment.pth"
    lent.write_text("".join(f"{folder}\n" for folder in sorted(ours)))
    return venv_python


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv holding this checkout's wheel."""
    work = tmp_path_factory.mktemp("packaging")
    wheels = work / "wheels"
    # Built from a copy: setuptools writes build/ and an egg-info into the tree it builds.
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*LEFT_BEHIND))
    python(
        "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels),
        str(source), timeout=300,
    )  # fmt: skip
    (wheel,) = wheels.glob("*.whl")
    assert wheel.name.startswith(DISTRIBUTION.replace("-", "_") + "-")
    venv_python = borrowing_venv(work / "venv")
    python(
        "-m", "pip", "--python", str(venv_python), "install", "-q", "--no-deps", str(wheel),
        timeout=300,
    )  # fmt: skip
    return venv_python


def test_the_wheel_has_one_top_level_package_and_ships_py_typed(installed: Path) -> None:
    site = Path(
        python(
            "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", interpreter=installed
        ).stdout.strip()
    )
    record = next(site.glob("chat_memories-*.dist-info")) / "RECORD"
    tops = {line.split("/", 1)[0] for line in record.read_text().splitlines()}
    assert {t for t in tops if not t.endswith(".dist-info") and t != ".."} == {"memories"}
    assert (site / "memories" / "py.typed").is_file()
    assert (site / "memories" / "integrations" / "chroma" / "store.py").is_file()
    assert not (site / "integrations").exists()


def test_every_source_module_is_installed(installed: Path) -> None:
    site = installed.parents[1] / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    package = site / "site-packages" / "memories"
    sources = {p.relative_to(ROOT / "memories") for p in (ROOT / "memories").rglob("*.py")}
    sources |= {
        "integrations" / p.relative_to(ROOT / "integrations")
        for p in (ROOT / "integrations").rglob("*.py")
    }
    shipped = {p.relative_to(package) for p in package.rglob("*.py")}
    assert sources - shipped == set(), "add the missing packages to setup.cfg [options] packages"


def test_a_project_with_its_own_integrations_package_keeps_it(
    installed: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / "integrations").mkdir(parents=True)
    (project / "integrations" / "__init__.py").write_text("")
    (project / "integrations" / "models.py").write_text('VALUE = "the project\'s own"\n')
    result = python("-c", PROBE, interpreter=installed, cwd=project)
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    site = str(installed.parents[1])
    assert seen["memories"].startswith(site) and seen["adapters"].startswith(site)
    assert seen["users"] == str(project / "integrations" / "models.py")
    assert seen["user_value"] == "the project's own"
    assert seen["version"] == memories.__version__
    assert seen["summary"] == "a summary"


def test_import_integrations_outside_the_repository_finds_nothing_of_ours(
    installed: Path, tmp_path: Path
) -> None:
    result = python(
        "-c", "import integrations", interpreter=installed, cwd=tmp_path, timeout=60, check=False
    )
    assert result.returncode != 0
    assert "No module named 'integrations'" in result.stderr


def test_the_command_reports_its_version(installed: Path, tmp_path: Path) -> None:
    result = python(
        "-m", "memories.faces.cli", "--version", interpreter=installed, cwd=tmp_path, timeout=60
    )
    assert memories.__version__ in result.stdout and DISTRIBUTION in result.stdout
