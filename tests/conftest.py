"""Shared pytest fixtures; factories live in tests/utils/."""

from __future__ import annotations

import pytest

from tests.utils.intents import INTERFACES


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes tens of seconds (deselect with -m 'not slow')")


@pytest.fixture(autouse=True)
def no_client_file_of_the_user(tmp_path_factory, monkeypatch) -> None:
    """`netapp` commands run by tests read no client file of whoever runs them (a running demo
    writes one): NETAPP_CLIENT_CONFIG names one that does not exist. Tests of the file set their own."""
    monkeypatch.setenv("NETAPP_CLIENT_CONFIG", str(tmp_path_factory.getbasetemp() / "no-client.yaml"))


@pytest.fixture
def interfaces() -> dict[str, int]:
    """A host-independent interface table (name -> ifindex)."""
    return dict(INTERFACES)
