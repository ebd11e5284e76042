"""Every skip in the suite says what to install, so a fresh machine knows what it missed."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

#: Words of a skip reason that mean something is missing from the machine.
MISSING = ("installed", " extra", " package", "no postgresql", "could not import")


def _reasons(call: ast.Call) -> list[ast.expr]:
    given = [k.value for k in call.keywords if k.arg == "reason"]
    name = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    if name == "skip" and call.args:
        given.append(call.args[0])
    return given


def _unexplained(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr not in ("importorskip", "skip", "skipif"):
            continue
        reasons = _reasons(node)
        where = f"{path.relative_to(TESTS.parent)}:{node.lineno}"
        if node.func.attr == "importorskip" and not reasons:
            found.append(f"{where}: importorskip without a reason naming the pip command")
        for reason in reasons:
            if isinstance(reason, ast.Constant) and isinstance(reason.value, str):
                text = reason.value.lower()
                if any(w in text for w in MISSING) and "install" not in text.replace(
                    "installed", ""
                ):
                    found.append(f"{where}: {reason.value!r} does not say how to install it")
    return found


def test_every_skip_for_something_missing_names_the_command_that_installs_it() -> None:
    found = [line for path in sorted(TESTS.rglob("*.py")) for line in _unexplained(path)]
    assert found == []
