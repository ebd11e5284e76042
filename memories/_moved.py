"""Module paths from before the layout by floors, kept importable: one finder, one table.

The flat ``memories/`` of versions up to 0.x became folders by floor (see
``docs/architecture.md``). Code and pickles that name an old path, such as
``from memories.summary import SummaryMemory`` or ``memories.vector.outbox``,
still work: importing an old path gives the module it moved to, the very same
module object (never a second copy of its classes). New code imports the new
paths, or better the public names from ``memories``.

Type checkers do not see these aliases; they see the new paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import CodeType, ModuleType

__all__ = ["MOVED", "install"]

#: Old module path -> the module it moved to.
MOVED: dict[str, str] = {
    "memories._langchain": "memories.core.langchain",
    "memories.base": "memories.core.base",
    "memories.buffer": "memories.short_term.buffer",
    "memories.cli": "memories.faces.cli",
    "memories.collection": "memories.long_term.collection",
    "memories.collection.extraction": "memories.long_term.collection.extraction",
    "memories.collection.memory": "memories.long_term.collection.memory",
    "memories.collection.records": "memories.long_term.collection.records",
    "memories.collection.rules": "memories.long_term.collection.rules",
    "memories.combined": "memories.core.combined",
    "memories.commands": "memories.faces.commands",
    "memories.config": "memories.core.config",
    "memories.demo": "memories.faces.demo",
    "memories.embeddings": "memories.kernel.embeddings",
    "memories.examples": "memories.long_term.examples",
    "memories.exchange": "memories.faces.exchange",
    "memories.extractive": "memories.short_term.summary.extractive",
    "memories.history": "memories.stores.history",
    "memories.history.base": "memories.stores.history.base",
    "memories.history.edits": "memories.stores.history.edits",
    "memories.history.langchain": "memories.stores.history.langchain",
    "memories.history.memory": "memories.stores.history.memory",
    "memories.history.readonly": "memories.stores.history.readonly",
    "memories.history.records": "memories.stores.history.records",
    "memories.history.sql": "memories.stores.history.sql",
    "memories.imports": "memories.kernel.imports",
    "memories.instructions": "memories.long_term.instructions",
    "memories.instructions.memory": "memories.long_term.instructions.memory",
    "memories.instructions.reflection": "memories.long_term.instructions.reflection",
    "memories.kernel.parts": "memories.core.parts",
    "memories.kernel.state": "memories.core.state",
    "memories.keys": "memories.kernel.keys",
    "memories.llm": "memories.kernel.llm",
    "memories.messages": "memories.kernel.messages",
    "memories.namespaces": "memories.kernel.namespaces",
    "memories.paths": "memories.kernel.paths",
    "memories.profile": "memories.long_term.profile",
    "memories.profile.memory": "memories.long_term.profile.memory",
    "memories.profile.patching": "memories.kernel.patching",
    "memories.profile.schema": "memories.long_term.profile.schema",
    "memories.profile.store": "memories.stores.documents",
    "memories.profile.stored": "memories.long_term.stored",
    "memories.profile.update": "memories.long_term.profile.update",
    "memories.prompts": "memories.short_term.summary.prompts",
    "memories.recall": "memories.stores.recall",
    "memories.recall.config": "memories.stores.recall.config",
    "memories.recall.fusion": "memories.stores.recall.fusion",
    "memories.recall.lexical": "memories.stores.recall.lexical",
    "memories.recall.neighbours": "memories.stores.recall.neighbours",
    "memories.recall.ranking": "memories.stores.recall.ranking",
    "memories.recall.scores": "memories.stores.recall.scores",
    "memories.recall.speakers": "memories.stores.recall.speakers",
    "memories.recall.text": "memories.stores.recall.text",
    "memories.recall.types": "memories.stores.recall.types",
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
    "memories.vector.memory": "memories.long_term.vector.memory",
    "memories.vector.outbox": "memories.stores.vector.outbox",
    "memories.vector.records": "memories.stores.vector.records",
    "memories.vector.retriever": "memories.long_term.vector.retriever",
    "memories.vector.scoring": "memories.stores.vector.scoring",
    "memories.vector.turns": "memories.long_term.vector.turns",
    "memories.vector.writes": "memories.stores.vector.writes",
    "memories.window": "memories.short_term.window",
}


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module path and loads it as the module it moved to."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__
        return module

    def get_code(self, fullname: str) -> CodeType | None:
        """The moved module's code, so ``python -m memories.cli`` runs ``memories.faces.cli``."""
        spec = importlib.util.find_spec(MOVED[fullname])
        loader = None if spec is None else spec.loader
        if not isinstance(loader, importlib.abc.InspectLoader):
            return None
        return loader.get_code(MOVED[fullname])

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
