"""Stand-in commands for the setup scripts' tests: small shell scripts first on PATH, in place of
the tools that would take minutes or the network (go, apt)."""

from __future__ import annotations

import os
from pathlib import Path


def on_path(directory: Path, scripts: dict[str, str]) -> dict[str, str]:
    """The environment with each script of `scripts` (command name -> text) an executable in
    `directory`, which comes first on PATH."""
    directory.mkdir()
    for name, text in scripts.items():
        (directory / name).write_text(text)
        (directory / name).chmod(0o755)
    return {**os.environ, "PATH": f"{directory}:{os.environ['PATH']}"}
