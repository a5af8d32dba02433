"""Shared pytest fixtures; factories live in tests/utils/."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from netapp.telemetry.loopback import PORTS_ENV, loopback_ports
from tests.utils.intents import INTERFACES

# Under CI (CI set, as .ci/run's callers set it) each property test draws the same examples every
# run, so that a landing is decided by the change, not by the draw; elsewhere each run draws anew
# (the examples that explore, and find what a fixed draw never will, are a developer's runs).
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes tens of seconds (deselect with -m 'not slow')")
    _own_loopback_ports()


def _own_loopback_ports() -> None:
    """Each pytest-xdist worker picks its servers' loopback ports (free_loopback_port) from a slice
    of the range of its own, so that two workers never pick the same port, one of them for a server
    that has not bound it yet. Children (`netapp serve`, the demo) inherit the slice."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not count or PORTS_ENV in os.environ:
        return
    ports = loopback_ports()
    size = len(ports) // int(count)
    first = ports.start + int(worker.removeprefix("gw")) * size
    os.environ[PORTS_ENV] = f"{first}-{first + size - 1}"


@pytest.fixture(autouse=True)
def no_client_file_of_the_user(tmp_path_factory, monkeypatch) -> None:
    """`netapp` commands run by tests read no client file of whoever runs them (a running demo
    writes one): NETAPP_CLIENT_CONFIG names one that does not exist. Tests of the file set their own."""
    monkeypatch.setenv("NETAPP_CLIENT_CONFIG", str(tmp_path_factory.getbasetemp() / "no-client.yaml"))


@pytest.fixture
def interfaces() -> dict[str, int]:
    """A host-independent interface table (name -> ifindex)."""
    return dict(INTERFACES)
