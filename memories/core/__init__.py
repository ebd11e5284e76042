"""The contract every memory shares: the base classes, composition, building from configuration.

- :mod:`~memories.core.base`: :class:`BaseMemory` (LangChain's classic memory
  interface, sync and async) and :class:`ChatMemory` (a memory over a chat history).
- :mod:`~memories.core.parts` and :mod:`~memories.core.state`: what a memory class
  composes (a model to call, background work, a token counter) and its derived
  state read with the log's changes.
- :mod:`~memories.core.combined`: memories made of other memories.
- :mod:`~memories.core.config`: the registry of memory and history types, and
  memories built from a dict or a YAML / TOML file, one per session if asked.
"""
