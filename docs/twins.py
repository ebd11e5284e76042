"""A griffe extension: the API pages show twins made from a loop of steps as the methods they are.

``search, asearch = twins(_search_steps)`` (:mod:`memories.kernel.steps`) is, to
griffe, an assignment it does not record. At run time it makes two methods with
the steps function's signature, returning what the loop returns; this gives the
page those.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

import griffe


class Twins(griffe.Extension):
    """Turns each ``name, aname = twins(_name_steps)`` of a class or module body into two."""

    def on_class_members(self, *, node: ast.AST | Any, cls: griffe.Class, **kwargs: Any) -> None:
        _add_twins(node, cls)

    def on_module_members(self, *, node: ast.AST | Any, mod: griffe.Module, **kwargs: Any) -> None:
        _add_twins(node, mod)


def _add_twins(node: ast.AST | Any, owner: griffe.Class | griffe.Module) -> None:
    """The methods (or a module's functions) the ``twins`` lines of ``node`` make."""
    for statement in getattr(node, "body", ()):
        made = _twins_made(statement)
        if made is None or made[1].startswith("__"):  # a private pair: not on the API pages
            continue
        names, steps_name = made
        steps = owner.members[steps_name]
        for name, asynchronous in zip(names, (False, True), strict=True):
            owner.set_member(name, _method(owner, steps, name, statement, asynchronous))


def _twins_made(statement: ast.stmt) -> tuple[list[str], str] | None:
    """``([name, aname], "_name_steps")`` of a ``name, aname = twins(_name_steps)`` line."""
    if not isinstance(statement, ast.Assign) or not isinstance(statement.value, ast.Call):
        return None
    call, (target,) = statement.value, statement.targets
    if not (isinstance(call.func, ast.Name) and call.func.id == "twins"):
        return None
    assert isinstance(target, ast.Tuple) and isinstance(call.args[0], ast.Name)
    return [str(getattr(e, "id", "")) for e in target.elts], call.args[0].id


def _method(
    owner: griffe.Class | griffe.Module,
    steps: Any,
    name: str,
    statement: ast.stmt,
    asynchronous: bool,
) -> griffe.Function:
    """The method ``name`` made from ``steps``, documented as ``steps`` is."""
    returns = steps.returns  # Steps[T]: the method returns T
    if isinstance(returns, griffe.ExprSubscript):
        returns = returns.slice
    method = griffe.Function(
        name,
        lineno=statement.lineno,
        endlineno=statement.end_lineno,
        parameters=griffe.Parameters(*(copy.copy(p) for p in steps.parameters)),
        returns=returns,
        parent=owner,
    )
    role = "meth" if isinstance(owner, griffe.Class) else "func"
    text = f"Async :{role}:`{name.removeprefix('a')}`." if asynchronous else steps.docstring.value
    method.docstring = griffe.Docstring(
        text,
        lineno=statement.lineno,
        parent=method,
        parser=steps.docstring.parser,
        parser_options=steps.docstring.parser_options,
    )
    if asynchronous:
        method.labels.add("async")
    return method
