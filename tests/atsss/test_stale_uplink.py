"""A path and its uplink entry that no stored session has (left by an undo the maps refused, here
written as it would have left them) in the kernel (xdp_atsss under BPF_PROG_TEST_RUN): the entry
alone takes its UE's packets on to the data network, decapsulated; the service's reconcile (as a
start's, or the change after such a refusal) deletes it and empties the slot, and the packets are
then counted as of no known path. A stored session's paths and entries stay."""

from __future__ import annotations

from ctypes import c_uint32

from netapp.atsss.abi import UplinkReason
from tests.atsss.atsss import XDP_PASS, PathSpec, uplink_key
from tests.atsss.test_changes_in_flight import CAROL
from tests.atsss.test_replaced_paths import kernel_service, spec  # noqa: F401 (the fixture)
from tests.atsss.test_uplink import counted, ue_up
from tests.atsss.uplink import decapsulated, uplink_frame
from tests.utils.object_tables import ObjectTables

LEFT_UE = "10.60.0.99"  # the UE of a session the store does not have
LEFT = PathSpec("192.0.2.40", "198.51.100.40", sport=5040, dport=6040)
LEFT_SLOT = 40


def test_a_reconcile_takes_away_the_uplink_of_a_path_no_session_has(atsss, kernel_service):
    service, _ = kernel_service
    kept, _ = service.put_session(CAROL, "ue5", spec((1, 2)))
    atsss.add_path(LEFT_SLOT, LEFT, ue=LEFT_UE)
    try:
        inner = ue_up(LEFT_UE)
        before = atsss.uplink_counts()
        assert atsss.run(uplink_frame(LEFT, inner, seq=1)) == (XDP_PASS, decapsulated(inner)), \
            "the case: the entry alone takes the UE's packet on, decapsulated"
        service.reconcile()
        verdict, out = atsss.run(uplink_frame(LEFT, inner, seq=2))
        assert verdict == XDP_PASS and out == uplink_frame(LEFT, inner, seq=2), "passed as it came"
        assert counted(atsss, before) == {UplinkReason.DECAPSULATED: 1, UplinkReason.UNKNOWN_PATH: 1}
        paths = ObjectTables(atsss.obj).table("dpp_atsss_paths")
        assert paths.get(c_uint32(LEFT_SLOT)).family == 0, "the slot emptied"
        assert [paths.get(c_uint32(slot)).family for slot in kept.slots] == [4, 4], "the session's paths stay"
    finally:  # the entry taken out of the module's program even when the test fails
        if ObjectTables(atsss.obj).table("dpp_atsss_uplink").get(uplink_key(LEFT)) is not None:
            atsss.delete_uplink(LEFT)
