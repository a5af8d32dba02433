"""The downlink program, loaded once for the ATSSS tests that run it in the kernel; every test
starts from empty maps (the sessions it added are removed). The namespace whose addresses are the
paths' local ones, for the tests whose confined tenants create sessions. A store of a test's own.
`slots_given_again`: a freed path slot given again at once."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from netapp.atsss import admission
from netapp.service.store import Store
from tests.atsss.atsss import AtsssProgram
from tests.utils.kernel import addresses_namespace


@pytest.fixture(scope="module")
def atsss() -> Iterator[AtsssProgram]:
    program = AtsssProgram()
    try:
        yield program
    finally:
        program.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def slots_given_again() -> Iterator[None]:
    """The store gives a path slot a change emptied to the next path at once, with no wait since,
    as it does once more than admission.PASSED_OVER are retired: the case of the tests about what a
    slot's next holder must not see of the last (its counters, its packets). A patch of its own: a
    test's `monkeypatch.undo()` leaves it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(admission, "PASSED_OVER", -1)
        yield


# The paths' `local` addresses the tests give: 192.0.2.1-16 and 2001:db8::1-10 (hex).
NODE_LOCALS = [f"192.0.2.{n}" for n in range(1, 17)] + [f"2001:db8::{n:x}" for n in range(1, 17)]


@pytest.fixture(scope="session")
def node_ns() -> Iterator[str]:
    """A namespace whose addresses are NODE_LOCALS: the node's own, which a confined tenant's path's
    `local` must be (netapp.atsss.scope). A service given it as its netns checks the paths against
    them, as a node checks its sessions against its interfaces'."""
    with addresses_namespace("dpp-locals", NODE_LOCALS) as name:
        yield name
