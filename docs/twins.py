"""A griffe extension: the API pages show a twin made from a loop of steps as the method it is.

``search: ClassVar = sync_twin(_search_steps)`` (:mod:`memories.kernel.steps`) reads,
to griffe, as an attribute. At run time it is a method with the steps function's
signature and docstring, returning what the loop returns; this gives the page that.
"""

from __future__ import annotations

import copy
from typing import Any

import griffe

#: The makers of twins, and whether the twin they make is async.
MAKERS = {"sync_twin": False, "async_twin": True}


class Twins(griffe.Extension):
    """Turns each ``name = sync_twin(f)`` / ``async_twin(f)`` of a class into a method."""

    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        for name, member in list(cls.members.items()):
            value = getattr(member, "value", None)
            if not isinstance(value, griffe.ExprCall) or str(value.function) not in MAKERS:
                continue
            steps = cls.members[str(value.arguments[0])]
            returns = steps.returns  # Steps[T]: the method returns T
            if isinstance(returns, griffe.ExprSubscript):
                returns = returns.slice
            asynchronous = MAKERS[str(value.function)]
            text = f"Async :meth:`{name[1:]}`." if asynchronous else steps.docstring.value
            twin = griffe.Function(
                name,
                lineno=member.lineno,
                endlineno=member.endlineno,
                parameters=griffe.Parameters(*(copy.copy(p) for p in steps.parameters)),
                returns=returns,
                parent=cls,
            )
            twin.docstring = griffe.Docstring(
                text,
                lineno=member.lineno,
                parent=twin,
                parser=steps.docstring.parser,
                parser_options=steps.docstring.parser_options,
            )
            if asynchronous:
                twin.labels.add("async")
            cls.set_member(name, twin)
