"""The web inspector and its JSON API: ``memories serve --config memories.yaml``.

:class:`~memories.faces.server.service.Inspector` reads what a config's memories
hold (and, opened with ``allow_writes=True``, edits, deletes, rolls back and
retries); :func:`~memories.faces.server.app.create_app` serves it as
pages and JSON (the ``server`` extra: Starlette, uvicorn, Jinja2).
"""

from __future__ import annotations

from memories.faces.server.errors import NotFound, ReadOnly
from memories.faces.server.service import Inspector

__all__ = ["Inspector", "NotFound", "ReadOnly"]
