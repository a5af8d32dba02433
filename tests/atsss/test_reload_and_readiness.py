"""ATSSS inside the service (NetAppService.serve_function, as `netapp serve` composes them): a
reload requeues its groups of ports under ATSSS's own lock, and /readyz tells a heal it owes. Over
the fake data plane; tests/atsss/test_pipeline_stage.py reloads a real one."""

from __future__ import annotations

import threading

from netapp.atsss.service import Atsss
from netapp.atsss.table import AtsssMaps
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

    def requeue(self, program_fd) -> None:  # noqa: ANN001
        atsss_lock, service_lock = self.locks
        self.seen.append((atsss_lock.locked(), service_lock._is_owned()))  # type: ignore[attr-defined]
        super().requeue(program_fd)


def test_a_reload_requeues_the_groups_under_atsss_s_lock_after_the_service_s(tmp_path):
    """The requeue reads each group's ports and writes them back: under ATSSS's lock, so a change
    of a redundant session's ports cannot fall between the read and the write (and be written over
    with the ports read before it); and not under the service's lock, which ATSSS takes after its own."""
    service = fake_service(tmp_path)
    try:
        maps = LocksSeen(service.dataplane.table)
        atsss = Atsss(service.store, maps, program_fd=service.dataplane.program_fd)
        maps.watching(atsss._lock, service.lock)
        service.serve_function("atsss", atsss)
        service.reload_dataplane(ADMIN)
        assert maps.seen == [(True, False)]
    finally:
        service.close()
