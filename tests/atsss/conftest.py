"""The downlink program, loaded once for the ATSSS tests that run it in the kernel; every test
starts from empty maps (the sessions it added are removed)."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.atsss.atsss import AtsssProgram


@pytest.fixture(scope="module")
def atsss() -> Iterator[AtsssProgram]:
    program = AtsssProgram()
    try:
        yield program
    finally:
        program.close()
