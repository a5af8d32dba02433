"""UE IPv4 addresses the UPF assigns (CHV4, 29.244 8.2.62) from upf.ue_pools, over real PFCP on
loopback with an SMF that speaks pycrate."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from typing import Iterator, Optional

import pytest

from netapp.core.config import Settings, UpfSettings
from netapp.service.store import Store
from netapp.upf.models import RuleError
from netapp.upf.pfcp.ies import Cause, IEType, RuleType
from netapp.upf.pools import Pools
from netapp.upf.runtime import start_pfcp
from tests.upf.conftest import Endpoint
from tests.upf.smf import (
    Smf,
    cause,
    create_far,
    create_pdr,
    create_qer,
    create_urr,
    find,
    fseid,
    ie,
    ies_of,
    node_id,
    recovery,
    value,
)

POOL = "10.45.0.0/30"  # two addresses to give: 10.45.0.1, 10.45.0.2


def _request(cp_seid: int) -> list:
    """Two uplink PDRs (one CHOOSE ID) and two downlink ones, each asking for the UE's address (CHV4)."""
    return [
        node_id(),
        fseid(cp_seid),
        create_pdr(1, 1, access=True, choose_id=1, ue=None, flow=None),
        create_pdr(2, 1, access=True, choose_id=1, ue=None),
        create_pdr(3, 2, access=False, ue=None, flow=None),
        create_pdr(4, 2, access=False, ue=None),
        create_far(1, core=True),
        create_far(2, core=False),
        create_qer(),
        create_urr(),
    ]


@contextlib.contextmanager
def _associated(tmp_path, ue_pools: Optional[dict[str, str]]) -> Iterator[tuple[Endpoint, Smf]]:
    """An endpoint with these upf.ue_pools, an SMF associated."""
    endpoint = Endpoint(tmp_path / "netapp.db", ue_pools=ue_pools)
    smf = Smf(endpoint.server.address)
    try:
        assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
        yield endpoint, smf
    finally:
        smf.close()
        endpoint.close()


@pytest.fixture
def pooled(tmp_path):
    with _associated(tmp_path, {"internet": POOL}) as associated:
        yield associated


def _establish(smf: Smf, cp_seid: int):
    return smf.ask("PFCPSessionEstablishmentReq", _request(cp_seid), seid=0)


def _created_ues(response) -> dict[int, dict]:
    """PDR id -> the UE IP Address of its Created PDR, as pycrate reads it."""
    created = {}
    for item in ies_of(response):
        if item["Type"].get_val() == 8:
            ue = find(item["Data"], 93)
            if ue is not None:
                created[value(find(item["Data"], 56))["Val"]] = value(ue)
    return created


def test_chv4_gives_the_session_one_address_of_the_pool_returned_in_created_pdrs(pooled):
    endpoint, smf = pooled
    response = _establish(smf, 0x51)
    assert cause(response) == Cause.REQUEST_ACCEPTED
    created = _created_ues(response)
    assert set(created) == {1, 2, 3, 4}, "a Created PDR with the UE IP Address for each PDR that said CHV4"
    addresses = {socket.inet_ntoa(ue["IPv4Addr"]) for ue in created.values()}
    assert len(addresses) == 1, "the PDRs of one session share its UE's address"
    address = addresses.pop()
    assert ipaddress.IPv4Address(address) in ipaddress.IPv4Network(POOL)
    assert all(ue["V4"] == 1 and ue["CHV4"] == 0 for ue in created.values())
    assert [created[pdr_id]["SD"] for pdr_id in (1, 3)] == [0, 1], "the S/D flag as the request's"
    session = endpoint.upf.sessions[find(response, 57)["Data"]["SEID"].get_val()]
    assert session.pdrs[3].pdi.ue_ip.ipv4 == address and session.pdrs[3].pdi.ue_ip.choose_ipv4
    assert endpoint.applier.calls == [(None, session)], "the data path gets the address like a given one"


def test_the_address_survives_a_restart_and_is_freed_with_its_session(pooled):
    endpoint, smf = pooled
    first = _establish(smf, 0x51)
    second = _establish(smf, 0x52)
    given = [socket.inet_ntoa(next(iter(_created_ues(r).values()))["IPv4Addr"]) for r in (first, second)]
    assert sorted(given) == ["10.45.0.1", "10.45.0.2"], "neither the network nor the broadcast address"
    full = _establish(smf, 0x53)
    assert cause(full) == Cause.ALL_DYNAMIC_ADDRESSES_OCCUPIED
    assert value(find(full, 40)) == IEType.UE_IP_ADDRESS, "the offending IE"
    assert len(endpoint.upf.sessions) == 2, "nothing half-created"
    endpoint.restart()
    smf.upf = endpoint.server.address
    assert cause(_establish(smf, 0x53)) == Cause.ALL_DYNAMIC_ADDRESSES_OCCUPIED, "the stored addresses are held"
    first_seid = find(first, 57)["Data"]["SEID"].get_val()
    deleted = smf.ask("PFCPSessionDeletionReq", [], seid=first_seid)
    assert cause(deleted) == Cause.REQUEST_ACCEPTED
    third = _establish(smf, 0x53)
    assert cause(third) == Cause.REQUEST_ACCEPTED
    assert socket.inet_ntoa(next(iter(_created_ues(third).values()))["IPv4Addr"]) == given[0], "freed, given again"


def test_the_session_names_the_address_it_was_given_and_holds_it_while_a_pdr_names_it(pooled):
    """The SMF names the UE address the UPF assigned in a PDR it adds later (V4, no CHV4): accepted,
    and the address stays the session's once the PDRs that asked for it are gone, a restart too;
    another session may not name it."""
    endpoint, smf = pooled
    first = _establish(smf, 0x51)
    address = socket.inet_ntoa(next(iter(_created_ues(first).values()))["IPv4Addr"])
    seid = find(first, 57)["Data"]["SEID"].get_val()
    naming = [create_pdr(5, 2, access=False, ue=address, flow=None)]
    assert cause(smf.ask("PFCPSessionModificationReq", naming, seid=seid)) == Cause.REQUEST_ACCEPTED
    removed = [ie(15, [ie(56, {"Val": pdr_id})]) for pdr_id in (1, 2, 3, 4)]  # every PDR that said CHV4
    assert cause(smf.ask("PFCPSessionModificationReq", removed, seid=seid)) == Cause.REQUEST_ACCEPTED
    second = _establish(smf, 0x52)  # the pool's other address
    assert cause(second) == Cause.REQUEST_ACCEPTED
    assert cause(_establish(smf, 0x53)) == Cause.ALL_DYNAMIC_ADDRESSES_OCCUPIED
    endpoint.restart()
    smf.upf = endpoint.server.address
    assert cause(_establish(smf, 0x53)) == Cause.ALL_DYNAMIC_ADDRESSES_OCCUPIED, "held after a restart"
    other = find(second, 57)["Data"]["SEID"].get_val()
    taken = smf.ask("PFCPSessionModificationReq", [create_pdr(6, 2, access=False, ue=address, flow=None)], seid=other)
    assert cause(taken) == Cause.RULE_CREATION_MODIFICATION_FAILURE, "not another session's to name"


def _given_address(response) -> str:
    assert cause(response) == Cause.REQUEST_ACCEPTED
    return socket.inet_ntoa(next(iter(_created_ues(response).values()))["IPv4Addr"])


@pytest.fixture
def pooled_wide(tmp_path):
    """A pool of six addresses to give (10.45.0.1 to .6)."""
    with _associated(tmp_path, {"internet": "10.45.0.0/29"}) as associated:
        yield associated


def test_a_refused_request_does_not_move_the_next_address_to_give(pooled_wide):
    _, smf = pooled_wide
    assert _given_address(_establish(smf, 0x51)) == "10.45.0.1"
    missing_far = [create_pdr(9, 9, access=False, ue=None, flow=None) if item["Type"] == 1 and
                   item["Data"][0]["Data"]["Val"] == 4 else item for item in _request(0x52)]
    refused = smf.ask("PFCPSessionEstablishmentReq", missing_far, seid=0)  # its address chosen, then FAR 9 missing
    assert cause(refused) == Cause.RULE_CREATION_MODIFICATION_FAILURE
    assert _given_address(_establish(smf, 0x53)) == "10.45.0.2"


def test_after_a_restart_an_address_freed_is_given_again_as_late_as_before(pooled_wide):
    """The next address is looked for after the newest stored session's, as it was before the
    restart: not from the start of the pool, where the address freed last lies."""
    endpoint, smf = pooled_wide
    first, _ = _establish(smf, 0x51), _establish(smf, 0x52)
    assert cause(smf.ask("PFCPSessionDeletionReq", [], seid=find(first, 57)["Data"]["SEID"].get_val())) == 1
    endpoint.restart()
    smf.upf = endpoint.server.address
    assert _given_address(_establish(smf, 0x53)) == "10.45.0.3"


def test_chv4_passes_over_an_address_a_session_stored_before_the_pool_was_given(tmp_path):
    """The SMF gave 10.45.0.1 before upf.ue_pools had a pool there: CHV4 gives the next one."""
    with _associated(tmp_path, None) as (endpoint, smf):
        assert cause(smf.ask("PFCPSessionEstablishmentReq", _given(0x51, "10.45.0.1"), seid=0)) == 1
        endpoint.ue_pools = {"internet": POOL}
        endpoint.restart()
        smf.upf = endpoint.server.address
        assert _given_address(_establish(smf, 0x52)) == "10.45.0.2"


def _given(cp_seid: int, ue: str) -> list:
    """A session whose SMF gives the UE's address itself (no CHV4)."""
    return [node_id(), fseid(cp_seid), create_pdr(1, 1, access=True, choose_id=1, ue=ue),
            create_pdr(3, 2, access=False, ue=ue), create_far(1, core=True), create_far(2, core=False),
            create_qer(), create_urr()]


def test_a_ue_address_another_session_has_is_refused_naming_the_pdr(pooled):
    """Its downlink would take the other session's packets down its own tunnel: perhaps another SMF's."""
    endpoint, smf = pooled
    other = Smf(endpoint.server.address, local="127.0.0.2")
    try:
        assert cause(other.ask("PFCPAssociationSetupReq", [node_id("127.0.0.2"), recovery(7)])) == Cause.REQUEST_ACCEPTED
        assert cause(smf.ask("PFCPSessionEstablishmentReq", _given(1, "10.60.0.9"), seid=0)) == Cause.REQUEST_ACCEPTED
        taken = other.ask("PFCPSessionEstablishmentReq", [node_id("127.0.0.2"), *_given(2, "10.60.0.9")[1:]], seid=0)
        assert cause(taken) == Cause.RULE_CREATION_MODIFICATION_FAILURE
        failed = value(find(taken, 114))
        assert (failed["RuleIDType"], failed["RuleIDVal"], value(find(taken, 40))) == (0, 3, IEType.UE_IP_ADDRESS)
        assert len(endpoint.upf.sessions) == 1, "nothing half-created"
        assert cause(other.ask("PFCPSessionEstablishmentReq", [node_id("127.0.0.2"), *_given(2, "10.60.0.10")[1:]],
                               seid=0)) == Cause.REQUEST_ACCEPTED
    finally:
        other.close()


def _no_instance(pdr: dict) -> dict:
    """The PDR without its PDI's Network Instance."""
    pdi = next(child for child in pdr["Data"] if child["Type"] == 2)
    pdi["Data"] = [child for child in pdi["Data"] if child["Type"] != 22]
    return pdr


@pytest.mark.parametrize("unnamed", ["first", "second"])
def test_a_pdr_naming_no_network_instance_is_judged_in_the_data_paths_default_one(tmp_path, unnamed):
    """`netapp serve`'s endpoint (netapp.upf.runtime) with one N6 instance and no pools: a downlink
    PDR naming no network instance is in that instance, as the data path keys it, whichever SMF
    names it and whichever leaves it out."""
    settings = Settings(state_dir=tmp_path, auth_disabled=True,
                        pfcp={"address": "127.0.0.1:0", "n3_ipv4": "127.0.0.2", "peers": ["127.0.0.0/8"]},
                        upf={"n6_interfaces": {"n6": "internet"}, "peer_networks": ["0.0.0.0/0"]})
    store = Store.open(settings.db_path, synchronous="NORMAL")
    server = start_pfcp(settings, store)
    smfs = [Smf(server.address), Smf(server.address, local="127.0.0.2")]
    try:
        for number, smf in enumerate(smfs, start=1):
            setup = smf.ask("PFCPAssociationSetupReq", [node_id(f"127.0.0.{number}"), recovery(number)])
            assert cause(setup) == Cause.REQUEST_ACCEPTED
        requests = [[node_id(f"127.0.0.{number}"), *_given(number, "10.60.0.9")[1:]] for number in (1, 2)]
        leaving_out = requests[0 if unnamed == "first" else 1]
        leaving_out[3] = _no_instance(leaving_out[3])  # the downlink PDR
        assert cause(smfs[0].ask("PFCPSessionEstablishmentReq", requests[0], seid=0)) == Cause.REQUEST_ACCEPTED
        taken = smfs[1].ask("PFCPSessionEstablishmentReq", requests[1], seid=0)
        assert cause(taken) == Cause.RULE_CREATION_MODIFICATION_FAILURE
        assert value(find(taken, 114))["RuleIDVal"] == 3 and value(find(taken, 40)) == IEType.UE_IP_ADDRESS
    finally:
        for smf in smfs:
            smf.close()
        server.close()
        store.close()


def test_an_address_of_a_pool_is_only_the_upfs_to_give(pooled):
    endpoint, smf = pooled
    refused = smf.ask("PFCPSessionEstablishmentReq", _given(1, "10.45.0.1"), seid=0)
    assert cause(refused) == Cause.RULE_CREATION_MODIFICATION_FAILURE
    assert value(find(refused, 114))["RuleIDVal"] == 3 and value(find(refused, 40)) == IEType.UE_IP_ADDRESS
    assert len(endpoint.upf.sessions) == 0


def test_chv4_without_a_pool_is_refused_naming_the_pdr_and_the_setting(tmp_path):
    endpoint = Endpoint(tmp_path / "netapp.db")
    smf = Smf(endpoint.server.address)
    try:
        smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])
        response = _establish(smf, 0x51)
        assert cause(response) == Cause.RULE_CREATION_MODIFICATION_FAILURE
        failed = value(find(response, 114))
        assert (failed["RuleIDType"], failed["RuleIDVal"]) == (0, 1), "Failed Rule ID: PDR 1"
        assert endpoint.upf.sessions == {}
    finally:
        smf.close()
        endpoint.close()
    no_pool = "PDR 3: CHV4 .* 'internet', which has no pool \\(setting upf.ue_pools"
    with pytest.raises(RuleError, match=no_pool) as refused:
        Pools().choose("internet", 1, (), 3)
    assert (refused.value.cause, refused.value.rule) == (Cause.RULE_CREATION_MODIFICATION_FAILURE, (RuleType.PDR, 3))


def test_the_setting_takes_ipv4_prefixes_that_do_not_overlap():
    assert UpfSettings(ue_pools={"internet": "10.45.0.0/16"}).ue_pools == {"internet": "10.45.0.0/16"}
    with pytest.raises(ValueError, match="upf.ue_pools.ims: .*not an IPv4 prefix"):
        UpfSettings(ue_pools={"ims": "2001:db8::/64"})
    with pytest.raises(ValueError, match="upf.ue_pools.internet: 10.45.1.0/24 overlaps the pool of ims"):
        UpfSettings(ue_pools={"ims": "10.45.0.0/16", "internet": "10.45.1.0/24"})
    with pytest.raises(ValueError, match="host bits"):
        UpfSettings(ue_pools={"internet": "10.45.0.1/16"})


def test_pools_lie_one_after_the_other_in_the_data_paths_array():
    pools = Pools({"internet": "10.45.0.0/24", "ims": "10.46.0.0/30"})
    assert pools.first == {"ims": 0, "internet": 4}
    assert pools.slot("internet", "10.45.0.9") == 13 and pools.slot("ims", "10.46.0.2") == 2
    assert pools.slot("internet", "10.46.0.2") is None and pools.slot("none", "10.45.0.9") is None
