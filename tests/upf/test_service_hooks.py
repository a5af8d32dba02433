"""The UPF inside the service (NetAppService.serve_function, as `netapp serve` composes them): a
reload holds the lock its replays of buffered frames hold, and /readyz tells the entries an undo
left wrong until the next change reconciles them. Over the fake data plane (the applier's maps and
the service's); tests/upf/test_punt_datapath.py replays through a real program."""

from __future__ import annotations

import pytest

from netapp.service.contract import DataplaneUnavailable
from netapp.upf.abi import QFI_ANY, UplinkKey
from netapp.upf.buffering import Buffering
from tests.upf.test_applier import _other, cramped  # noqa: F401 - cramped: the fixture
from tests.upf.test_datapath import TEID, session
from tests.upf.test_buffering import BUFF_NOCP, FORW, Recorder, frame, stands, with_far
from tests.utils.service import ADMIN, fake_service


def test_entries_an_undo_left_wrong_show_in_readyz_until_the_next_change_heals_them(tmp_path, cramped):  # noqa: F811
    """An undo refused for one entry (test_applier's case): /readyz's `upf` check names it
    (informing: the endpoint still answers, and its next change reconciles first); ok once healed."""
    fake, upf = cramped
    buffering = Buffering(upf, Recorder())
    service = fake_service(tmp_path)
    try:
        service.serve_function("upf", buffering)
        assert service.health().checks["upf"] == "ok"
        fake.refused.add(bytes(UplinkKey(teid=TEID + 1, qfi=QFI_ANY)))
        with pytest.raises(DataplaneUnavailable):
            buffering.apply(None, _other(2, TEID + 1, "10.45.0.8", "2001:db8:45::8"))
        health = service.health()
        assert health.ready and "left 1 entries of the UPF's maps wrong (dpp_upf_uplink" in health.checks["upf"]

        buffering.reconcile([session()])  # what the next change of netapp.upf.sessions runs first
        assert service.health().checks["upf"] == "ok"
    finally:
        service.close()
        buffering.close()


class LockNoting(Recorder):
    """A Recorder noting, at each replay, whether the lock a reload takes (`program_lock`) is held."""

    def __init__(self) -> None:
        super().__init__()
        self.lock_held: list[bool] = []
        self.lock = None

    def upf_replay(self, data: bytes, ifindex: int) -> None:
        self.lock_held.append(self.lock.locked())
        super().upf_replay(data, ifindex)


def test_a_reload_holds_the_lock_the_upf_s_replays_hold(tmp_path):
    """A replay runs the program by its fd (dpp_upf_replay), which the reload closes once the new
    program is in: the reload holds the lock every replay holds, so no replay runs in between."""
    recorder = LockNoting()
    buffering = Buffering(recorder, recorder)
    recorder.lock = buffering.program_lock
    service = fake_service(tmp_path)
    try:
        buffering.apply(None, with_far(BUFF_NOCP))
        buffering.take([frame(1)])
        buffering.apply(with_far(BUFF_NOCP), with_far(FORW))
        stands(buffering)
        assert recorder.lock_held == [True], "a replay holds it"

        reload, held = service.dataplane.reload, []

        def reload_noted(**options):  # noqa: ANN003, ANN202
            held.append((buffering.program_lock.locked(), service.lock._is_owned()))  # type: ignore[attr-defined]
            return reload(**options)

        service.dataplane.reload = reload_noted  # type: ignore[method-assign]
        service.serve_function("upf", buffering)
        service.reload_dataplane(ADMIN)
        assert held == [(True, True)], "and so does a reload, after the service's"
    finally:
        service.close()
        buffering.close()
