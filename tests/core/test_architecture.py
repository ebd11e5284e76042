"""The architecture's rules, checked on the source: what a review would otherwise have to find.

- The core never imports an adapter at import time, and its import graph has no cycle.
- Arrows run downward only: a module imports modules of its own floor or a lower one
  (:data:`FLOORS`), at import time or inside a function.
- Async methods are not hand-written copies of their sync twins: a loop is
  written once (``memories.kernel.steps``) or delegated (``to_thread``).
- Tools read declared capabilities, never ``hasattr`` on a memory or a class name.
- docs/architecture.md names every module (by its file, or a package's by its folder) and
  nothing that is gone.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "memories"
ADAPTERS = ROOT / "integrations"
#: Lines of async twins that still repeat their sync twin but for ``await`` (issue 9 allows 60).
MAX_TWIN_LINES = 60
#: How alike (difflib's ratio of normalised lines) an async body must be to count as a copy:
#: a copy that drifted (lost a lock, a check) still counts.
TWIN_SIMILARITY = 0.75


def _modules(folder: Path, package: str) -> Iterator[tuple[str, Path]]:
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(folder).with_suffix("").parts
        name = ".".join((package, *parts)).removesuffix(".__init__")
        yield name, path


def _source_files() -> list[tuple[str, Path]]:
    return [*_modules(CORE, "memories"), *_modules(ADAPTERS, "memories.integrations")]


#: The floors, lowest first: each module prefix on the floor it belongs to. The adapters in
#: ``integrations/`` stand at two heights: the outside systems memories store and embed
#: with (Chroma, the ONNX MiniLM model), which lower floors import lazily, and the
#: frameworks that use memories (agents, LangGraph), which are faces.
FLOORS: tuple[tuple[str, ...], ...] = (
    (
        "memories.errors",
        "memories._version",
        "memories._moved",
        "memories.kernel",
        "memories.integrations.minilm",
        "memories.integrations._onnx_int8",
    ),
    ("memories.stores", "memories.integrations.chroma"),
    ("memories.core",),
    ("memories.short_term", "memories.long_term"),
    ("memories", "memories.faces", "memories.integrations", "memories.testing"),
)


def floor_of(module: str) -> int:
    """The floor of ``module``: the one whose longest prefix names it."""
    matches = [
        (len(prefix), height)
        for height, prefixes in enumerate(FLOORS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    assert matches, f"{module} is on no floor: add it to FLOORS"
    return max(matches)[1]


def _all_imports(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """``(line, module)`` of every import of a ``memories`` module, wherever it stands."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        yield from ((node.lineno, n) for n in names if n.split(".")[0] == "memories")


def test_arrows_run_downward_only() -> None:
    upward = [
        f"{module}:{line} imports {target}"
        for module, path in _source_files()
        for line, target in _all_imports(ast.parse(path.read_text(encoding="utf-8")))
        if floor_of(target) > floor_of(module)
    ]
    assert upward == []


def test_floors_have_folders_and_no_module_is_left_beside_them() -> None:
    """``memories/`` holds the floors' folders and only the package's own few modules."""
    loose = sorted(p.name for p in CORE.glob("*.py"))
    assert loose == ["__init__.py", "_moved.py", "_version.py", "errors.py", "testing.py"]
    assert not any(p.is_symlink() for p in CORE.rglob("*"))


def _import_time_imports(tree: ast.Module, module: str) -> set[str]:
    """Modules imported when ``module`` is imported: top level, outside ``if TYPE_CHECKING``."""
    found: set[str] = set()
    package = module if module.endswith("__init__") else module.rsplit(".", 1)[0]

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)

    visit(tree.body)
    return found


def _imports_anywhere(tree: ast.Module, module: str) -> set[str]:
    """Every module ``module`` may import: at import time and inside functions alike.

    Only what ``if TYPE_CHECKING`` guards is left out (it never runs). An
    import moved into a function still ties two modules together: a circle
    through one is a circle all the same.
    """
    bodies: list[ast.stmt] = []

    def collect(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                collect(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            bodies.append(node)
        for child in ast.iter_child_nodes(node):
            collect(child)

    collect(tree)
    return _import_time_imports(ast.Module(body=bodies, type_ignores=[]), module)


def _graph(*, inside_functions: bool = False) -> dict[str, set[str]]:
    files = dict(_source_files())
    reader = _imports_anywhere if inside_functions else _import_time_imports
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        imports = reader(ast.parse(path.read_text(encoding="utf-8")), module)
        graph[module] = {name for name in imports if name in files and name != module}
    return graph


def test_the_core_imports_no_adapter_at_import_time() -> None:
    offenders = {
        module: sorted(n for n in imports if n.startswith("memories.integrations"))
        for module, imports in _graph().items()
        if not module.startswith("memories.integrations")
    }
    assert {m: i for m, i in offenders.items() if i} == {}


def test_the_import_graph_has_no_cycle() -> None:
    graph = _graph(inside_functions=True)
    # A package's __init__ importing its own submodules is how packages work, not a cycle.
    edges = {
        m: {n for n in targets if not (m.endswith(".__init__") or n.startswith(m + "."))}
        for m, targets in graph.items()
    }
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                walk(target, [*path, target])
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            walk(module, [module])
    assert cycles == []


def _normalised(body: list[ast.stmt]) -> list[str]:
    """A body's lines with every difference an async twin is allowed to have removed."""
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    text = "\n".join(ast.unparse(statement) for statement in body)
    text = re.sub(r"\bawait\s+", "", text)
    text = re.sub(r"\basync (with|for)\b", r"\1", text)
    text = re.sub(r"\b(_?)a([a-z][a-z_0-9]*)\(", r"\1\2(", text)
    text = re.sub(r"\barun\(", "run(", text)
    return [line.strip() for line in text.splitlines() if line.strip()]


def async_twins() -> list[tuple[str, int]]:
    """``(place, lines)`` of each async method of 4+ lines that repeats its sync twin.

    A twin is the sync method of the same name without the ``a``; "repeats"
    means at least :data:`TWIN_SIMILARITY` of their lines are the same once
    ``await``, ``async`` and the ``a`` of async method names are set aside.
    """
    found = []
    for module, path in _source_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]
        for scope in scopes:
            functions = {
                n.name: n
                for n in scope.body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            }
            for name, node in functions.items():
                if not isinstance(node, ast.AsyncFunctionDef):
                    continue
                twin_name = re.sub(r"^(_?)a", r"\1", name)
                twin = functions.get(twin_name)
                if twin is None or twin is node or isinstance(twin, ast.AsyncFunctionDef):
                    continue
                lines = _normalised(node.body)
                same = difflib.SequenceMatcher(None, lines, _normalised(twin.body)).ratio()
                if len(lines) >= 4 and same >= TWIN_SIMILARITY:
                    found.append((f"{module}.{getattr(scope, 'name', '')}.{name}", len(lines)))
    return found


def test_async_twins_are_written_once() -> None:
    twins = async_twins()
    assert sum(lines for _, lines in twins) <= MAX_TWIN_LINES, twins


def test_the_twin_finder_finds_a_twin() -> None:
    sync, asynchronous = ast.parse(
        "def fold(self):\n    s = self.h.load_state(1)\n    e = self.h.entries(s)\n"
        "    self.h.save_state(1, e)\n    return e\n"
        "async def afold(self):\n    s = await self.h.aload_state(1)\n"
        "    e = await self.h.aentries(s)\n    await self.h.asave_state(1, e)\n    return e\n"
    ).body
    assert isinstance(sync, ast.FunctionDef) and isinstance(asynchronous, ast.AsyncFunctionDef)
    assert _normalised(sync.body) == _normalised(asynchronous.body)


@pytest.mark.parametrize(
    "pattern",
    [r"hasattr\(\s*(memory|member|leaf|m)\b", r"\.__name__\s*(==|!=|in\b)"],
)
def test_tools_read_capabilities_not_types(pattern: str) -> None:
    offenders = [
        f"{module}:{number}"
        for module, path in _source_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(pattern, line)
    ]
    assert offenders == []


#: ``memories/...`` or ``integrations/...``, a module (``.py``) or a folder (``/``), as the page
#: writes them (not inside another path such as ``tests/integrations/``).
_PAGE_PATH = re.compile(r"(?<![\w/.-])((?:memories|integrations)/[\w/]*?(?:\.py|/))(?![\w/])")
#: The folders that are floors (or the package itself): their modules are named by file.
_FLOOR_FOLDERS = {
    "memories/",
    "integrations/",
    *(f"memories/{floor}/" for floor in ("kernel", "stores", "core", "short_term", "long_term")),
    "memories/faces/",
}


def test_the_architecture_page_names_every_module_and_nothing_gone() -> None:
    """docs/architecture.md names each module: a floor's own by its file, a package's by its folder.

    It also names no module or folder that is gone, so the page follows every move.
    """
    named = set(_PAGE_PATH.findall((ROOT / "docs" / "architecture.md").read_text("utf-8")))
    modules = [
        p.relative_to(ROOT).as_posix() for p in (*CORE.rglob("*.py"), *ADAPTERS.rglob("*.py"))
    ]
    unnamed = []
    for module in sorted(modules):
        folder = module.rsplit("/", 1)[0] + "/"
        if folder in _FLOOR_FOLDERS:
            covered = module in named
        else:  # a package of a floor: its top folder below the floor names it
            floor = max((f for f in _FLOOR_FOLDERS if folder.startswith(f)), key=len)
            covered = floor + folder[len(floor) :].split("/")[0] + "/" in named
        if not covered:
            unnamed.append(module)
    assert unnamed == [], f"add these to docs/architecture.md's map: {unnamed}"
    gone = sorted(path for path in named if not (ROOT / path).exists())
    assert gone == [], f"docs/architecture.md names what is no longer there: {gone}"
