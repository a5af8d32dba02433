"""The one error the packaging steps raise: its message names the input at fault."""

from __future__ import annotations


class PackagingError(Exception):
    """An input is missing or invalid, or a build step failed; the message says which."""
