"""libdpp's errors as Python exceptions: DataplaneError carries the errno, the operation and a hint."""

from __future__ import annotations

import errno as errno_codes
import os
from typing import Optional


class DataplaneError(Exception):
    """A libdpp call failed: `errno` (positive), the operation, and what it means."""

    def __init__(self, errno: int, op: str, message: Optional[str] = None, hint: str = ""):
        self.errno = errno
        self.op = op
        self.message = message or os.strerror(errno)
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        name = errno_codes.errorcode.get(self.errno, str(self.errno))
        text = f"{self.op}: {self.message} ({name})"
        return f"{text}; {self.hint}" if self.hint else text


class LibraryNotFoundError(DataplaneError):
    """libdpp.so could not be found or loaded."""


def check(rc: int, op: str, hint: str = "") -> int:
    """Turn libdpp's negative-errno convention into DataplaneError; return rc otherwise."""
    if rc < 0:
        raise DataplaneError(-rc, op, hint=hint)
    return rc


def check_batch(rc: int, op: str, done: int, total: int) -> None:
    if rc < 0:
        error = DataplaneError(-rc, op, f"{os.strerror(-rc)} after {done} of {total}")
        error.done = done  # type: ignore[attr-defined]
        raise error
