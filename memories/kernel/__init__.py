"""The kernel: the machinery written once, knowing no memory class and no store.

- :mod:`~memories.kernel.steps`: I/O loops written once as generators of
  steps, driven by a sync runner and an async runner that hold the lock.
- :mod:`~memories.kernel.background`: the one background component (a
  debounced job per key) with one ``flush`` / ``close`` / ``status``.
- :mod:`~memories.kernel.capabilities`: what a memory class declares it can do.
- :mod:`~memories.kernel.conversation`: ask a model, check its reply, send the
  errors back a bounded number of times.
- The shared parts: messages (:mod:`~memories.kernel.messages`), input and
  output keys (:mod:`~memories.kernel.keys`), token counting
  (:mod:`~memories.kernel.tokens`), models (:mod:`~memories.kernel.llm`),
  embeddings (:mod:`~memories.kernel.embeddings`), JSON patches
  (:mod:`~memories.kernel.patching`), namespaces
  (:mod:`~memories.kernel.namespaces`), the data directory
  (:mod:`~memories.kernel.paths`) and optional imports with their install
  hints (:mod:`~memories.kernel.imports`).
"""
