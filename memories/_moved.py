"""Module paths from before the layout by floors, kept importable: one finder, one table.

Importing an old path (``memories.summary``, ``memories.vector.outbox``) gives
the very module it moved to, never a second copy of its classes, so old
imports and pickles keep working. Type checkers see only the new paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import CodeType, ModuleType

__all__ = ["MOVED", "install", "moved_to"]

#: Old module path -> the module it moved to. A package that moved whole moves
#: its modules with it (:func:`moved_to`): only those that went elsewhere are listed.
MOVED: dict[str, str] = {
    "memories._langchain": "memories.core.langchain",
    "memories.base": "memories.core.base",
    "memories.buffer": "memories.short_term.buffer",
    "memories.cli": "memories.faces.cli",
    "memories.collection": "memories.long_term.collection",
    "memories.combined": "memories.core.combined",
    "memories.commands": "memories.faces.commands",
    "memories.config": "memories.core.config",
    "memories.demo": "memories.faces.demo",
    "memories.embeddings": "memories.kernel.embeddings",
    "memories.examples": "memories.long_term.examples",
    "memories.exchange": "memories.faces.exchange",
    "memories.extractive": "memories.short_term.summary.extractive",
    "memories.history": "memories.stores.history",
    "memories.imports": "memories.kernel.imports",
    "memories.instructions": "memories.long_term.instructions",
    "memories.kernel.parts": "memories.core.parts",
    "memories.kernel.state": "memories.core.state",
    "memories.keys": "memories.kernel.keys",
    "memories.llm": "memories.kernel.llm",
    "memories.messages": "memories.kernel.messages",
    "memories.namespaces": "memories.kernel.namespaces",
    "memories.paths": "memories.kernel.paths",
    "memories.profile": "memories.long_term.profile",
    "memories.profile.patching": "memories.kernel.patching",
    "memories.profile.store": "memories.stores.documents",
    "memories.profile.stored": "memories.long_term.stored",
    "memories.prompts": "memories.short_term.summary.prompts",
    "memories.recall": "memories.stores.recall",
    "memories.runnable": "memories.faces.runnable",
    "memories.scoping": "memories.core.config",
    "memories.sql": "memories.stores.sql",
    "memories.stores.document_ttl": "memories.stores.documents.ttl",
    "memories.stores.entity_graph_store": "memories.stores.entities.temporal_graph",
    "memories.stores.entity_redis": "memories.stores.entities.redis_summaries",
    "memories.stores.entity_store": "memories.stores.entities.summaries",
    "memories.stores.graph_store": "memories.stores.entities.triples",
    "memories.stores.profile_store": "memories.stores.documents",
    "memories.summarizer": "memories.short_term.summary.summarizer",
    "memories.summary": "memories.short_term.summary.memory",
    "memories.summary_state": "memories.short_term.summary.state",
    "memories.summary_triggers": "memories.short_term.summary.triggers",
    "memories.token_buffer": "memories.short_term.token_buffer",
    "memories.tokens": "memories.kernel.tokens",
    "memories.tools": "memories.faces.tools",
    "memories.vector": "memories.long_term.vector",
    "memories.vector.backend": "memories.stores.vector.backend",
    "memories.vector.chroma_backend": "memories.stores.vector.chroma_backend",
    "memories.vector.documents": "memories.long_term.indexed",
    "memories.vector.filters": "memories.stores.vector.filters",
    "memories.vector.index": "memories.stores.vector.pending",
    "memories.vector.langchain_backend": "memories.stores.vector.langchain_backend",
    "memories.vector.outbox": "memories.stores.vector.outbox",
    "memories.vector.records": "memories.stores.vector.records",
    "memories.vector.scoring": "memories.stores.vector.scoring",
    "memories.vector.writes": "memories.stores.vector.writes",
    "memories.window": "memories.short_term.window",
}


def moved_to(name: str, /) -> str | None:
    """The module the old path ``name`` moved to: its entry, else its moved package's module."""
    if name in MOVED:
        return MOVED[name]
    package, _, module = name.rpartition(".")
    parent = moved_to(package) if package else None
    return None if parent is None else f"{parent}.{module}"


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module path and loads it as the module it moved to."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        new = moved_to(fullname)
        if new is None or (fullname not in MOVED and importlib.util.find_spec(new) is None):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(str(moved_to(spec.name)))
        spec.loader_state = module.__spec__
        return module

    def get_code(self, fullname: str) -> CodeType | None:
        """The moved module's code, so ``python -m memories.cli`` runs ``memories.faces.cli``."""
        new = str(moved_to(fullname))
        spec = importlib.util.find_spec(new)
        loader = None if spec is None else spec.loader
        if not isinstance(loader, importlib.abc.InspectLoader):
            return None
        return loader.get_code(new)

    def exec_module(self, module: ModuleType) -> None:
        # Loading set the alias's spec on the real module: give it its own back.
        alias = module.__spec__
        if alias is not None and alias.loader is self:
            module.__spec__ = alias.loader_state


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once), ahead of the path finder.

    First, because an old path such as ``memories.vector.memory`` would
    otherwise be found as a file under the new package its parent names and
    loaded a second time.
    """
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
