"""Shared pytest fixtures; factories live in tests/utils/."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from netapp.telemetry.loopback import PORTS_ENV, loopback_ports
from tests.utils.intents import INTERFACES

SLICED_ENV = "DPP_LOOPBACK_PORTS_OF"  # the worker whose slice DPP_LOOPBACK_PORTS is

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
    that has not bound it yet. Children (`netapp serve`, the demo) inherit the slice. A worker that
    replaces a crashed one (a new id past the count) shares the slice of the worker its id comes
    round to."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not count or os.environ.get(SLICED_ENV) == worker:
        return
    ports = loopback_ports()  # the range set for the whole run, if one is
    size = len(ports) // int(count)
    if size < 1:
        raise pytest.UsageError(f"{PORTS_ENV}: {len(ports)} loopback ports for {count} workers")
    first = ports.start + int(worker.removeprefix("gw")) % int(count) * size
    os.environ[PORTS_ENV], os.environ[SLICED_ENV] = f"{first}-{first + size - 1}", worker
