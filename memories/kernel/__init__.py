"""The kernel every memory composes: the machinery written once.

- :mod:`~memories.kernel.steps`: I/O loops written once as generators of
  steps, driven by a sync runner and an async runner that hold the lock.
- :mod:`~memories.kernel.background`: the one background component (a
  debounced job per key) with one ``flush`` / ``close`` / ``status``.
- :mod:`~memories.kernel.capabilities`: what a memory class declares it can do.
- :mod:`~memories.kernel.state`: a memory's derived state as this process saw it
  last, read with the log's changes in one statement.

The model layer (:mod:`memories.llm`), token counting (:mod:`memories.tokens`),
namespaces (:mod:`memories.namespaces`), SQL setup (:mod:`memories.sql`) and
the registry (:mod:`memories.config`) are the kernel's other parts.
"""
