"""The policer program, loaded once for the QoS tests that run it in the kernel."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.qos.police import PoliceProgram


@pytest.fixture(scope="module")
def police() -> Iterator[PoliceProgram]:
    program = PoliceProgram()
    try:
        yield program
    finally:
        program.close()
