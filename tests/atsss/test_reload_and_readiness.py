"""ATSSS inside the service (NetAppService.serve_function, as `netapp serve` composes them): a
reload requeues its groups of ports under ATSSS's own lock, and /readyz tells a heal it owes. Over
the fake data plane; tests/atsss/test_pipeline_stage.py reloads a real one."""

from __future__ import annotations

import errno
import threading

import pytest

from netapp.atsss.service import Atsss
from netapp.atsss.table import AtsssMaps
from netapp.dataplane.errors import DataplaneError
from netapp.service.contract import DataplaneUnavailable
from tests.atsss.test_changes_in_flight import ADMIN
from tests.atsss.test_replaced_paths import spec
from tests.atsss.test_replaced_paths_undo import a_refused_undo_leaving_slots_full
from tests.utils.service import fake_service


def test_an_owed_heal_shows_in_readyz_until_the_next_change_heals_it(tmp_path):
    """A refused undo leaves the maps unlike the store: /readyz's `atsss` check says so (informing:
    the service still takes requests, and the next change heals), and says ok once a change has."""
    service = fake_service(tmp_path)
    try:
        _, atsss = a_refused_undo_leaving_slots_full(service.store)
        service.serve_function("atsss", atsss)
        health = service.health()
        assert health.ready, health.checks
        assert "the next change reconciles them first" in health.checks["atsss"]

        atsss.put_session(ADMIN, "b", spec((3, 4), ue="10.45.0.9", name="b"))
        assert service.health().checks["atsss"] == "ok"
    finally:
        service.close()


class LocksSeen(AtsssMaps):
    """AtsssMaps noting, each time a reload requeues the groups, whether ATSSS's lock and the
    service's (held by this thread) were held."""

    def watching(self, atsss_lock: threading.Lock, service_lock: threading.RLock) -> None:
        self.locks, self.seen = (atsss_lock, service_lock), []

    def note(self, what: str) -> None:
        atsss_lock, service_lock = self.locks
        self.seen.append((what, atsss_lock.locked(), service_lock._is_owned()))  # type: ignore[attr-defined]

    def requeue(self, program_fd) -> None:  # noqa: ANN001
        self.note("requeue")
        super().requeue(program_fd)


def test_a_reload_holds_atsss_s_lock_and_the_service_s_through_the_reload_and_the_requeue(tmp_path):
    """The reload closes the old programs, whose fds a change writes into its groups' DEVMAP
    entries, and the requeue reads each group's ports and writes them back: both under ATSSS's lock
    (taken first, as its MTS changes take it before the service's), so no change writes a group with
    a closed program's fd, nor between the requeue's read and its write (written over with the ports
    read before it). Before, the reload held the service's lock only."""
    service = fake_service(tmp_path)
    try:
        maps = LocksSeen(service.dataplane.table)
        atsss = Atsss(service.store, maps, program_fd=service.dataplane.program_fd)
        maps.watching(atsss._lock, service.lock)
        reload = service.dataplane.reload

        def reload_noted(**options):  # noqa: ANN003, ANN202
            maps.note("reload")
            return reload(**options)

        service.dataplane.reload = reload_noted  # type: ignore[method-assign]
        service.serve_function("atsss", atsss)
        service.reload_dataplane(ADMIN)
        assert maps.seen == [("reload", True, True), ("requeue", True, True)]
    finally:
        service.close()


class RefusingRequeue(AtsssMaps):
    def requeue(self, program_fd) -> None:  # noqa: ANN001
        raise DataplaneError(errno.ENOMEM, "dpp_table_inner_set(dpp_atsss_tx[0])")


def test_a_requeue_refused_after_the_switch_says_the_program_was_replaced(tmp_path):
    """The new program runs by then: the 503 says so (not "the previous one still runs") and asks
    for another reload, which retries the requeue."""
    service = fake_service(tmp_path)
    try:
        atsss = Atsss(service.store, RefusingRequeue(service.dataplane.table), program_fd=service.dataplane.program_fd)
        service.serve_function("atsss", atsss)
        with pytest.raises(DataplaneUnavailable, match=r"the program was replaced \(id \d+ -> \d+\).*reload again"):
            service.reload_dataplane(ADMIN)
    finally:
        service.close()
