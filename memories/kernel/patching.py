"""JSON Patch as a model writes it: reading replies, checking and applying operations.

Pure functions: nothing here calls a model or a database. Every error message
is written to be shown to the model on a retry, so it names the operation, the
path and what to do instead.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jsonpatch
import jsonpointer
from langchain_core.messages import BaseMessage

from memories.errors import InvalidProfileError
from memories.kernel.conversation import operations_tool, proposed_items, reply_text

__all__ = [
    "OPERATIONS",
    "PATCH_TOOL",
    "PATCH_TOOL_NAME",
    "Section",
    "apply_operations",
    "check_operations",
    "escape_pointer",
    "extract_operations",
    "json_copy",
    "parse_patch",
    "plan_sections",
    "reply_text",
]

#: The six RFC 6902 operations.
OPERATIONS = ("add", "remove", "replace", "move", "copy", "test")

PATCH_TOOL_NAME = "update_profile"

#: The tool a tool-calling model is given (OpenAI function format, which
#: every langchain-core ``bind_tools`` accepts).
PATCH_TOOL: dict[str, Any] = operations_tool(
    PATCH_TOOL_NAME,
    "Change the profile with RFC 6902 JSON Patch operations. "
    "Call it with an empty list when nothing should change.",
    {
        "type": "object",
        "properties": {
            "op": {"type": "string", "enum": list(OPERATIONS)},
            "path": {"type": "string", "description": "JSON Pointer"},
            "from": {"type": "string", "description": "for move and copy"},
            "value": {"description": "for add, replace and test"},
        },
        "required": ["op", "path"],
    },
    about="RFC 6902 operations, applied in order.",
)

_NOT_JSON = (
    "Your reply is not a JSON array of operations. Reply with only the array, for example "
    '[{"op": "replace", "path": "/some/field", "value": "new value"}], '
    "or [] when nothing should change."
)


def extract_operations(reply: BaseMessage | str) -> list[Any]:
    """The operations a reply proposes: from its ``update_profile`` tool calls, else its text.

    The text may be a bare JSON array (what small local models produce most
    reliably), in a code fence or after a sentence, ``{"operations": [...]}`` or
    ``{"patch": [...]}``, or one operation.

    Raises:
        LLMError: the reply holds no operations list (prose, another tool).
    """
    return proposed_items(
        reply, PATCH_TOOL_NAME, _NOT_JSON, keys=("operations", "patch"), single="op"
    )


def check_operations(
    operations: Sequence[Any],
    *,
    allow_root: bool = True,
    allowed: Callable[[str], bool] | None = None,
    scope: str = "",
) -> list[dict[str, Any]]:
    """The operations, each checked for shape before anything is applied.

    Args:
        allow_root: whether an operation may replace or remove the whole document.
        allowed: a test every ``path`` and ``from`` must pass (a section's paths).
        scope: how to name the allowed paths in the error message.

    Raises:
        InvalidProfileError: one line per bad operation.
    """
    problems: list[str] = []
    for index, op in enumerate(operations):
        where = f"operation {index} {_short(op)}"
        if not isinstance(op, dict):
            problems.append(f"{where} is not an object with 'op' and 'path'.")
            continue
        name = op.get("op")
        if name not in OPERATIONS:
            problems.append(f"{where} has op {name!r}; use one of {', '.join(OPERATIONS)}.")
            continue
        paths = [("path", op.get("path"))]
        if name in ("move", "copy"):
            paths.append(("from", op.get("from")))
        if name in ("add", "replace", "test") and "value" not in op:
            problems.append(f"{where} has no 'value'.")
        for member, path in paths:
            if not isinstance(path, str) or (path and not path.startswith("/")):
                problems.append(
                    f"{where} has {member} {path!r}; it must be a JSON Pointer such as '/name'."
                )
            elif path == "" and not allow_root and (member == "path" or name == "move"):
                problems.append(
                    f"{where} replaces the whole document; change fields one at a time instead."
                )
            elif allowed is not None and not allowed(path):
                problems.append(f"{where} touches {path!r}, outside {scope}; leave it alone.")
    if problems:
        raise InvalidProfileError("\n".join(problems))
    return list(operations)


def apply_operations(document: Any, operations: Sequence[dict[str, Any]]) -> Any:
    """A copy of ``document`` with the operations applied in order (RFC 6902).

    Raises:
        InvalidProfileError: an operation does not apply (a path that does not
            exist, an index out of range, a failed ``test``); names which one.
    """
    result = copy.deepcopy(document)
    for index, op in enumerate(operations):
        try:
            result = jsonpatch.JsonPatch([op]).apply(result, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise InvalidProfileError(
                f"operation {index} {_short(op)} cannot be applied: {exc}. Paths of 'replace', "
                "'remove', 'move' and 'copy' must exist; 'add' creates a field whose parent "
                "exists, and '/array/-' appends to an array."
            ) from exc
    return result


def _short(op: Any) -> str:
    text = json.dumps(op, ensure_ascii=False, default=str)
    return text if len(text) <= 160 else text[:157] + "..."


# -- sections of a large document --------------------------------------------


def escape_pointer(key: str) -> str:
    """One JSON Pointer segment for an object key."""
    return key.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True)
class Section:
    """A part of a large profile that one model call sees and may change."""

    pointers: tuple[str, ...]
    """JSON Pointers of the values shown; operations must stay inside them."""
    owned: tuple[str, ...]
    """Every pointer of every section of the plan, to tell new fields from others' fields."""
    adds_new: bool
    """Whether this section may also add fields that no section holds yet."""

    def view(self, document: Any) -> dict[str, Any]:
        """``{pointer: value}`` for the values this section shows."""
        return {p: jsonpointer.resolve_pointer(document, p) for p in self.pointers}

    def allows(self, path: str) -> bool:
        """Whether an operation on ``path`` stays inside this section."""
        if any(_within(path, p) for p in self.pointers):
            return True
        return self.adds_new and not any(_within(path, q) or _within(q, path) for q in self.owned)

    def describe(self) -> str:
        """The paths as they are named in prompts and errors."""
        shown = ", ".join(self.pointers)
        return f"the paths shown to you ({shown})"


def _within(path: str, pointer: str) -> bool:
    return path == pointer or path.startswith(pointer + "/")


def plan_sections(
    document: dict[str, Any], budget: int, count: Callable[[str], int]
) -> list[Section] | None:
    """Split a document over ``budget`` tokens into sections that each fit (None: the whole fits).

    Objects over budget split into their fields, recursively, packed in document
    order into as few sections as fit; a part that cannot split (a long array or
    string) gets a section of its own even over budget.
    """
    if count(_dump(document)) <= budget:
        return None
    parts = _parts("", document, budget, count)
    groups: list[list[str]] = []
    total = budget + 1
    for pointer, tokens in parts:
        if total + tokens > budget:
            groups.append([])
            total = 0
        groups[-1].append(pointer)
        total += tokens
    owned = tuple(p for p, _ in parts)
    return [
        Section(pointers=tuple(group), owned=owned, adds_new=index == 0)
        for index, group in enumerate(groups)
    ]


def _parts(
    pointer: str, value: Any, budget: int, count: Callable[[str], int]
) -> list[tuple[str, int]]:
    tokens = count(_dump({pointer: value}))
    if pointer and (tokens <= budget or not isinstance(value, dict) or not value):
        return [(pointer, tokens)]
    return [
        part
        for key, child in value.items()
        for part in _parts(f"{pointer}/{escape_pointer(key)}", child, budget, count)
    ]


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def json_copy(value: Any, what: str) -> Any:
    """A deep copy of ``value`` through JSON (so it is exactly what will be stored).

    Raises:
        InvalidProfileError: ``value`` is not JSON-serialisable.
    """
    try:
        return json.loads(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError) as exc:
        raise InvalidProfileError(f"The {what} must be JSON-serialisable: {exc}") from exc


def parse_patch(patch: Any) -> list[dict[str, Any]]:
    """RFC 6902 operations from a list of them, their JSON text, or a ``jsonpatch.JsonPatch``.

    Raises:
        InvalidProfileError: not JSON, not a list, or an operation of the wrong shape.
    """
    if isinstance(patch, jsonpatch.JsonPatch):
        patch = patch.patch
    if isinstance(patch, str):
        try:
            patch = json.loads(patch)
        except ValueError as exc:
            raise InvalidProfileError(f"The patch is not JSON: {exc}") from exc
    if not isinstance(patch, list):
        raise InvalidProfileError(
            f"A patch is a list of RFC 6902 operations; got {type(patch).__name__}."
        )
    return check_operations(json_copy(patch, "patch"))
