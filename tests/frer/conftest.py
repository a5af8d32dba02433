"""The recovery program, loaded once for the FRER tests that run it in the kernel; FRER's maps in
the fake data plane's (tests/frer/fake.py) for the control plane's tests."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.frer.fake import add_frer_maps
from tests.frer.frer import FrerProgram


@pytest.fixture(scope="module")
def frer() -> Iterator[FrerProgram]:
    program = FrerProgram()
    try:
        yield program
    finally:
        program.close()


@pytest.fixture
def fake_frer_maps(monkeypatch: pytest.MonkeyPatch) -> None:
    add_frer_maps(monkeypatch)
