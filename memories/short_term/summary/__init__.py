"""The running summary: the summary memories and the machinery only they use.

- :mod:`~memories.short_term.summary.memory`: :class:`SummaryMemory`,
  :class:`SummaryBufferMemory` and LangChain's ``ConversationSummaryBufferMemory``.
- :mod:`~memories.short_term.summary.state`: the summary and cursor kept beside the log.
- :mod:`~memories.short_term.summary.triggers`: when to fold turns into the summary.
- :mod:`~memories.short_term.summary.summarizer`: one summary call, by a model or
  extractive (:mod:`~memories.short_term.summary.extractive`) without one.
- :mod:`~memories.short_term.summary.prompts`: LangChain's summary prompt and ours.
"""

# The package's face is exactly the memory module's public names.
from memories.short_term.summary.memory import *  # noqa: F403
from memories.short_term.summary.memory import __all__ as __all__
