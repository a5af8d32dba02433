"""The recovery program, loaded once for the FRER tests that run it in the kernel."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.frer.frer import FrerProgram


@pytest.fixture(scope="module")
def frer() -> Iterator[FrerProgram]:
    program = FrerProgram()
    try:
        yield program
    finally:
        program.close()
