"""Files that hold secrets: written whole or not at all, readable by their owner only."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional


def write_private(path: Path, text: str, dir_mode: Optional[int] = None) -> None:
    """Replace `path` atomically (a reader sees the old file or the new one) with `text`, mode 0600.
    Missing parent directories are created, with `dir_mode` if given."""
    if dir_mode is None:
        path.parent.mkdir(parents=True, exist_ok=True)
    else:
        path.parent.mkdir(mode=dir_mode, parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
