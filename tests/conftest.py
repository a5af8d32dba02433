"""Shared pytest fixtures; factories live in tests/utils/."""

from __future__ import annotations

import pytest

from tests.utils.intents import INTERFACES


@pytest.fixture
def interfaces() -> dict[str, int]:
    """A host-independent interface table (name -> ifindex)."""
    return dict(INTERFACES)
