"""URR slots of the data path's usage counters: given with the session like TEIDs, stored with it, so
that a restart gives out none in use; freed with the URR or the session. As many as dpp_upf_usage
holds, which its size at load (setting dataplane.map_sizes) says."""

from __future__ import annotations

import pytest

from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.upf import store as rows
from netapp.upf.abi import MAX_UPF_URRS, Output, Role
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.compiler import Site
from netapp.upf.pfcp.ies import Cause
from tests.upf.smf import cause, establishment_ies, find, ie
from tests.upf.test_datapath import N3_IP, session
from tests.utils.kernel import require_kernel

SLOTS = 4  # slots 1..3


@pytest.fixture
def counted(endpoint, associated):
    """The endpoint restarted over an applier that counts on SLOTS slots, its SMF associated."""
    endpoint.applier.urr_slots = SLOTS
    endpoint.restart()
    associated.upf = endpoint.server.address
    return associated


def _establish(smf, cp_seid: int) -> int:
    response = smf.ask("PFCPSessionEstablishmentReq", establishment_ies(cp_seid), seid=0)
    assert cause(response) == Cause.REQUEST_ACCEPTED
    return find(response, 57)["Data"]["SEID"].get_val()


def _slots(endpoint) -> dict[int, dict[int, int]]:
    return {seid: dict(session.urr_slots) for seid, session in endpoint.upf.sessions.items()}


def test_a_restart_gives_out_no_slot_in_use(endpoint, counted):
    first = _establish(counted, 1)
    endpoint.restart()
    counted.upf = endpoint.server.address
    second = _establish(counted, 2)
    assert _slots(endpoint) == {first: {1: 1}, second: {1: 2}}
    stored = {session.seid: session.urr_slots for session, _ in rows.load_sessions(endpoint.store)}
    assert stored == _slots(endpoint)


def test_slots_are_freed_with_the_urr_and_the_session_and_given_again(endpoint, counted):
    first, second = _establish(counted, 1), _establish(counted, 2)
    add = [ie(6, [ie(81, {"Val": 2}), ie(62, {"VOLUM": 1})])]  # Create URR 2 (no trigger)
    assert cause(counted.ask("PFCPSessionModificationReq", add, seid=first)) == Cause.REQUEST_ACCEPTED
    assert _slots(endpoint)[first] == {1: 1, 2: 3}
    assert cause(counted.ask("PFCPSessionEstablishmentReq", establishment_ies(3), seid=0)) == (
        Cause.NO_RESOURCES_AVAILABLE
    ), "three slots in use: none is free"

    assert cause(counted.ask("PFCPSessionDeletionReq", [], seid=second)) == Cause.REQUEST_ACCEPTED
    third = _establish(counted, 3)
    assert _slots(endpoint)[third] == {1: 2}
    remove = [ie(17, [ie(81, {"Val": 2})])]  # Remove URR 2
    assert cause(counted.ask("PFCPSessionModificationReq", remove, seid=first)) == Cause.REQUEST_ACCEPTED
    assert _slots(endpoint)[first] == {1: 1}
    fourth = _establish(counted, 4)
    assert _slots(endpoint)[fourth] == {1: 3}


def test_a_slot_given_up_is_not_given_to_another_urr_in_the_same_change(endpoint, counted):
    """Were URR 2 given URR 1's slot as URR 1 goes, the applier would see the slot neither freed nor
    given: URR 2 would start from URR 1's counts. The slot is free from the next change on."""
    first, second, third = (_establish(counted, cp_seid) for cp_seid in (1, 2, 3))  # slots 1, 2, 3: all
    swap = [ie(17, [ie(81, {"Val": 1})]), ie(6, [ie(81, {"Val": 2}), ie(62, {"VOLUM": 1})]),  # Remove 1, Create 2
            *(ie(9, [ie(56, {"Val": pdr_id}), ie(81, {"Val": 2})]) for pdr_id in range(1, 5))]  # the PDRs count on 2
    assert cause(counted.ask("PFCPSessionModificationReq", swap, seid=first)) == Cause.NO_RESOURCES_AVAILABLE
    assert _slots(endpoint) == {first: {1: 1}, second: {1: 2}, third: {1: 3}}
    assert cause(counted.ask("PFCPSessionDeletionReq", [], seid=third)) == Cause.REQUEST_ACCEPTED
    assert cause(counted.ask("PFCPSessionModificationReq", swap, seid=first)) == Cause.REQUEST_ACCEPTED
    assert _slots(endpoint)[first] == {2: 3}


def test_sessions_stored_without_slots_get_them_when_a_data_path_counts(endpoint, associated):
    seid = _establish(associated, 1)
    assert _slots(endpoint) == {seid: {}}, "no data path: no slot"
    endpoint.applier.urr_slots = SLOTS
    endpoint.restart()
    assert _slots(endpoint) == {seid: {1: 1}}
    assert next(iter(rows.load_sessions(endpoint.store)))[0].urr_slots == {1: 1}


def test_a_refused_request_gives_no_slot(endpoint, counted):
    endpoint.applier.fail = True
    response = counted.ask("PFCPSessionEstablishmentReq", establishment_ies(1), seid=0)
    assert cause(response) == Cause.SYSTEM_FAILURE
    endpoint.applier.fail = False
    seid = _establish(counted, 2)
    assert _slots(endpoint)[seid] == {1: 1}


def _applier(dataplane):
    site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP, output=Output.PASS)
    return BpfApplier(dataplane.table, site, iface_entries({5: (Role.N3, 0), 6: (Role.N6, 1)}, N3_IP, None))


def test_the_slot_count_is_the_usage_maps_size():
    assert _applier(Dataplane(FakeDpp())).urr_slots == MAX_UPF_URRS
    assert _applier(Dataplane(FakeDpp(map_sizes={"dpp_upf_usage": SLOTS}))).urr_slots == SLOTS


def test_the_slot_count_follows_the_size_the_map_was_loaded_with():
    require_kernel()
    slots = (1 << 20) + 1
    with Dataplane.open(map_sizes={"dpp_upf_usage": slots}) as dataplane:
        applier = _applier(dataplane)
        assert applier.urr_slots == slots
        last = session().model_copy(update={"urr_slots": {1: slots - 1}})
        applier.apply(None, last)  # the last slot is one of the map's: its counters are zeroed
        assert applier.usage([slots - 1])[slots - 1].ul_packets == 0
