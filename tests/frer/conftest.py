"""The recovery program, loaded once for the FRER tests that run it in the kernel; the fake node of the
service's tests (tests/frer/fake.py), for those that do not define their own."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.frer.fake import FakeFrerNode
from tests.frer.frer import FrerProgram


@pytest.fixture(scope="module")
def frer() -> Iterator[FrerProgram]:
    program = FrerProgram()
    try:
        yield program
    finally:
        program.close()


@pytest.fixture
def node(tmp_path) -> Iterator[FakeFrerNode]:
    node = FakeFrerNode(tmp_path / "netapp.db")
    yield node
    node.close()
