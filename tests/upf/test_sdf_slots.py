"""The slots of PDRs with SDF filters (dpp_upf_sdf_pdrs) sized at load like the UPF's other capacity
maps (setting dataplane.map_sizes): the applier gives out as many as the map holds, and a PDR in the
last slot is carried out by the data path (BPF_PROG_TEST_RUN, the output compared byte for byte)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from netapp.core.config import DataplaneSettings, Settings
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.service.function_rules import FunctionRules
from netapp.service.state import ServiceState
from netapp.upf.abi import MAX_UPF_SDF_PDRS
from netapp.upf.applier import BpfApplier
from tests.upf import test_datapath as datapath
from tests.upf.test_sdf_datapath import N9_PEER, N9_TEID, dns_session, encapsulated, sdf_applier, ue_udp, uplink

SLOTS = 100_001  # slots 1 .. 100,000


def _applier(dataplane: Dataplane) -> BpfApplier:
    state = ServiceState(Settings(auth_disabled=True), dataplane, None, lambda: datetime.now(timezone.utc))
    return sdf_applier(dataplane, state)


def test_the_slot_count_is_the_maps_size():
    assert _applier(Dataplane(FakeDpp())).sdf_slots == MAX_UPF_SDF_PDRS
    assert _applier(Dataplane(FakeDpp(map_sizes={"dpp_upf_sdf_pdrs": 8}))).sdf_slots == 8
    assert DataplaneSettings(map_sizes={"dpp_upf_sdf_pdrs": SLOTS}).map_sizes == {"dpp_upf_sdf_pdrs": SLOTS}
    with pytest.raises(ValueError, match="dataplane.map_sizes.dpp_upf_sdf_pdrs: 0 entries"):
        DataplaneSettings(map_sizes={"dpp_upf_sdf_pdrs": 0})


def test_a_pdr_in_the_last_slot_of_a_map_sized_at_load_is_carried_out():
    with datapath.instance(map_sizes={"dpp_upf_sdf_pdrs": SLOTS}) as dataplane:
        assert dataplane.map_size("dpp_upf_sdf_pdrs") == SLOTS
        applier = _applier(dataplane)
        assert applier.sdf_slots == SLOTS
        last = dns_session().model_copy(update={"sdf_slots": {1: SLOTS - 1, 3: SLOTS - 2}})
        applier.apply(None, last)
        try:
            out = dataplane.test_run(uplink(53), datapath.N3_IF)
            assert out.data == encapsulated(bytes(ue_udp(53)), N9_TEID, N9_PEER, pdu_type=1)
        finally:
            applier.apply(last, None)

