"""The library's version: one place, read by setup.cfg, ``memories.__version__`` and the CLI."""

__version__ = "0.2.0"
