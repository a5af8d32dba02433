"""Shared pytest fixtures; factories live in tests/utils/."""

from __future__ import annotations

import pytest

from tests.utils.intents import INTERFACES


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes tens of seconds (deselect with -m 'not slow')")


@pytest.fixture
def interfaces() -> dict[str, int]:
    """A host-independent interface table (name -> ifindex)."""
    return dict(INTERFACES)
