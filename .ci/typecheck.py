"""mypy over the installed layout: ``memories`` and the adapters as ``memories.integrations``.

The adapters live in the top-level ``integrations/`` folder and install as
``memories.integrations`` (setup.cfg's ``package_dir``). mypy has no option
that maps a folder to another package name, so this driver hands it the
adapters' files under their installed module names; everything else comes
from ``[tool.mypy]`` in pyproject.toml.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mypy import build
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    sources, options = process_options(sys.argv[1:])
    for path in sorted((ROOT / "integrations").rglob("*.py")):
        parts = path.relative_to(ROOT / "integrations").with_suffix("").parts
        module = ".".join(("memories.integrations", *parts)).removesuffix(".__init__")
        sources.append(BuildSource(str(path), module))
    try:
        messages = build.build(sources, options).errors
    except build.CompileError as exc:
        messages = exc.messages
    for line in messages:
        print(line)
    files = len(sources)
    if messages:
        print(f"mypy: {len(messages)} message(s) in {files} source files")
        return 1
    print(f"Success: no issues found in {files} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
