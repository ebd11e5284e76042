"""The running summary: the summary memories and the machinery only they use.

:mod:`~memories.short_term.summary.memory` holds the memories; ``state``,
``triggers``, ``summarizer``, ``extractive`` and ``prompts`` what they fold with.
"""

# The package's face is exactly the memory module's public names.
from memories.short_term.summary.memory import *  # noqa: F403
from memories.short_term.summary.memory import __all__ as __all__
