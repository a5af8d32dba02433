"""The fast path of establishments (netapp.upf.pfcp.templates) against the full path: the same
randomised requests -- of a template's shape with other values, values that must be refused (a UE
address another session has, one inside a UE pool, a gNB outside upf.peer_networks, no free URR
slot), near misses of the template (one IE different, values equal where they differed), other
shapes, another peer's requests, retransmissions, deletions -- sent by the pycrate SMF (the
independent codec) to two endpoints alike but for the fast path, over loopback; their responses,
stored rows and map entries (FakeDpp) must be the same, byte for byte."""

from __future__ import annotations

import ipaddress
import random
from typing import Any, Callable, Iterator, Optional

import pytest

from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.service.store import Store
from netapp.upf.abi import Output, Role
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.compiler import Site
from netapp.upf.models import Session
from netapp.upf.peers import Destinations
from netapp.upf.pfcp.ies import Cause, IEType, MsgType
from netapp.upf.pfcp.layout import Layout, Varying
from netapp.upf.pfcp.server import PfcpServer
from netapp.upf.pools import Pools
from netapp.upf.sessions import Upf
from tests.upf.conftest import N3, Endpoint
from tests.upf.smf import (
    Smf,
    apply_action,
    cause,
    create_far,
    create_pdr,
    create_qer,
    create_urr,
    establishment_ies,
    find,
    fseid,
    gtpu_tunnel,
    ie,
    node_id,
    recovery,
    value,
)

POOL = "10.46.0.0/26"  # upf.ue_pools: given UE addresses in it are refused
GNBS = "192.0.2.0/25"  # upf.peer_networks
MAP_SIZES = {"dpp_upf_teids": 24, "dpp_upf_usage": 72, "dpp_upf_ue4": 64}  # TEIDs past the array, slots run out
OTHER_SMF = "127.0.0.2"  # a second association's address
# tables whose live entries depend on the changes' order, not only on the sessions held: the ways a
# UE address was placed in as its bucket filled and emptied, the counters of policers freed since
HISTORY = ("dpp_upf_dl4", "dpp_policer_stats")


class Side:
    """A UPF over a store, FakeDpp maps and a PFCP endpoint on loopback; `fast`: with templates."""

    def __init__(self, path: Any, fast: bool):
        self.fake, self.store, self.upf = _upf_over(path)
        self.server = PfcpServer(self.upf, "127.0.0.1", 0)
        if not fast:
            self.server.protocol.templates = None
        self.server.start()
        self.smfs = {address: Smf(self.server.address, local=address) for address in ("127.0.0.1", OTHER_SMF)}

    def ask(self, requests: list[tuple[str, bytes]]) -> dict[tuple[str, int], bytes]:
        """Send every request (from its SMF's address), then take every response: by (address,
        sequence number), in the requests' order."""
        for address, data in requests:
            self.smfs[address].send(data)
        keys = [(address, int.from_bytes(data[12:15], "big")) for address, data in requests]
        responses = {}
        for address, _ in requests:  # in the order they come (a cached answer goes at once)
            response = self.smfs[address].receive_raw()
            responses[(address, int.from_bytes(response[12:15], "big"))] = _timeless(response)
        return {key: responses[key] for key in keys}

    def rows(self) -> dict[str, list[tuple]]:
        """The UPF's rows but for when they were written (and when the endpoint started)."""
        return {
            "upf_sessions": self.store.execute("SELECT seid, node_id, body FROM upf_sessions ORDER BY 1").fetchall(),
            "upf_counters": self.store.execute(
                "SELECT * FROM upf_counters WHERE name != 'recovery_time_stamp' ORDER BY 1").fetchall(),
        }

    def maps(self) -> dict[str, dict[bytes, bytes]]:
        return {name: dict(entries) for name, entries in self.fake.tables.items()}

    def close(self) -> None:
        for smf in self.smfs.values():
            smf.close()
        self.server.close()
        self.store.close()


def _upf_over(path: Any) -> tuple[FakeDpp, Store, Upf]:
    """A UPF over the store at `path` (its sessions loaded, as at a start) and FakeDpp maps of its own."""
    fake = FakeDpp(map_sizes=MAP_SIZES)
    dataplane = Dataplane(fake)
    site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3, output=Output.PASS)
    pools = Pools({"internet": POOL})
    ue4 = pools.layout(site.net_instances, dataplane.table("dpp_upf_ue4").max_entries)
    applier = BpfApplier(dataplane.table, site, iface_entries({5: (Role.N3, 0), 6: (Role.N6, 1)}, N3, None, ue4))
    store = Store.open(path, synchronous="NORMAL")
    return fake, store, Upf(store, applier, n3_ipv4=N3, destinations=Destinations([GNBS]), ue_pools=pools)


@pytest.fixture
def sides(tmp_path) -> Iterator[tuple[Side, Side]]:
    fast, full = Side(tmp_path / "fast.db", True), Side(tmp_path / "full.db", False)
    try:
        yield fast, full
    finally:
        fast.close()
        full.close()


class Requests:
    """Random requests, built with pycrate: mostly of the template's shape (tests/upf/smf.py's
    establishment without SDF filters) with values drawn from small sets, so that they clash."""

    def __init__(self, seed: int):
        self.random = random.Random(seed)
        self.smf = Smf.__new__(Smf)  # for its builder only
        self.seq = 1000  # past the association setups' sequence numbers (a request of one is a retransmission)
        self.sent: list[tuple[str, bytes]] = []

    def build(self, name: str, ies: list, seid: Optional[int] = None) -> bytes:
        self.seq += 1
        return Smf.build(self.smf, name, ies, seid=seid, seq=self.seq)

    def ue(self) -> str:
        if self.random.random() < 0.05:
            return str(ipaddress.IPv4Network(POOL)[self.random.randrange(1, 60)])  # the UPF's to give: refused
        return f"10.45.{self.random.randrange(2)}.{self.random.randrange(1, 120)}"  # clashes now and then

    def gnb(self) -> str:
        return f"192.0.2.{self.random.randrange(1, 200)}"  # above 127: outside upf.peer_networks

    def establishment(self) -> bytes:
        ue, pick = self.ue(), self.random.random()
        ues = [ue, ue, ue, ue]
        pdrs: list[dict] = []
        far = create_far(2, core=False, gnb=self.gnb(), teid=self.random.randrange(1 << 32))
        node = node_id()
        if pick < 0.06:
            ues[3] = self.ue()  # values equal in the template differ here
        elif pick < 0.09:
            ues[1] = self.ue()  # an uplink PDR's
        elif pick < 0.12:
            pdrs = [create_pdr(4, 2, access=False, ue=ue, flow=None, urr=None)]  # one IE fewer
        elif pick < 0.15:
            far = ie(3, [ie(108, {"Val": 2}), apply_action("DROP"), ie(4, [ie(42, {"Val": 0})])])  # another FAR
        elif pick < 0.18:
            pdrs = [create_pdr(4, 2, access=False, ue=None, flow=None)]  # CHV4: the UPF gives it
        elif pick < 0.21:
            pdrs = [create_pdr(4, 2, access=False, ue=ue, flow="permit out ip from any to assigned")]  # SDF
        elif pick < 0.23:
            node = node_id("10.0.0.9")  # no association
        elif pick < 0.25:
            far = ie(3, [ie(108, {"Val": 2}), apply_action("FORW"), ie(4, [ie(42, {"Val": 0}), ie(84, {
                "UDP_IPv4": 1, "IPv4Addr": self.gnb(), "Port": 2152})])])  # a UDP tunnel: no place of ours
        elif pick < 0.27:
            far = ie(3, [ie(108, {"Val": 2}), apply_action("FORW"), ie(4, [ie(42, {"Val": 0}), gtpu_tunnel(
                self.gnb(), 7)]), ie(5, [ie(42, {"Val": 4}), gtpu_tunnel("192.0.2.5", 9)])])  # DUPL's parameters
        plain = {4: create_pdr(4, 2, access=False, ue=ues[3], flow=None)}
        for each in pdrs:
            plain[4] = each
        return self.build("PFCPSessionEstablishmentReq", [
            node, fseid(self.random.randrange(1 << 64)),
            create_pdr(1, 1, access=True, choose_id=1, ue=ues[0], flow=None),
            create_pdr(2, 1, access=True, choose_id=1, ue=ues[1], flow=None),
            create_pdr(3, 2, access=False, ue=ues[2], flow=None),
            plain[4],
            create_far(1, core=True), far, create_qer(), create_urr(),
        ], seid=0)

    def batch(self, established: list[int]) -> list[tuple[str, bytes]]:
        """A group of requests: establishments, now and then from the other SMF (not its
        association's) or a deletion, or one sent before again (a retransmission)."""
        batch: list[tuple[str, bytes]] = []
        for _ in range(self.random.randrange(1, 24)):
            pick = self.random.random()
            if pick < 0.16 and established:
                seid = established.pop(self.random.randrange(len(established)))
                batch.append(("127.0.0.1", self.build("PFCPSessionDeletionReq", [], seid=seid)))
            elif pick < 0.19:
                batch.append((OTHER_SMF, self.establishment()))  # the node ID is another's association's
            else:
                batch.append(("127.0.0.1", self.establishment()))
        if self.sent and self.random.random() < 0.3:
            batch.append(self.random.choice(self.sent))  # answered before: from the cache
        self.sent += [each for each in batch if each not in self.sent]
        return batch


TIMES = (75, 76)  # Start Time, End Time: the clock's when a final usage report was made
USAGE_REPORT_DELETION = 79


def _timeless(response: bytes) -> bytes:
    """The response with the times of its usage reports (a deletion's) zeroed: the two endpoints'
    clocks are read at other moments."""
    data, offset = bytearray(response), 16
    while offset + 4 <= len(data):
        ie_type, length = int.from_bytes(data[offset : offset + 2], "big"), int.from_bytes(data[offset + 2 : offset + 4], "big")
        if ie_type == USAGE_REPORT_DELETION:
            inner = offset + 4
            while inner + 4 <= offset + 4 + length:
                child, size = int.from_bytes(data[inner : inner + 2], "big"), int.from_bytes(data[inner + 2 : inner + 4], "big")
                if child in TIMES:
                    data[inner + 4 : inner + 4 + size] = bytes(size)
                inner += 4 + size
        offset += 4 + length
    return bytes(data)


def _associate(side: Side) -> None:
    for address, node in (("127.0.0.1", "10.0.0.1"), (OTHER_SMF, "10.0.0.2")):
        response = side.smfs[address].ask("PFCPAssociationSetupReq", [node_id(node), recovery(1000)])
        assert response[1][1]["Data"].get_val() == Cause.REQUEST_ACCEPTED


def _up_seid(response: bytes) -> Optional[int]:
    """The UP SEID of an accepted establishment's response (its F-SEID, after Node ID and Cause)."""
    if response[1] != MsgType.SESSION_ESTABLISHMENT_RESPONSE:
        return None
    offset = 16
    while offset + 4 <= len(response):
        ie_type, length = int.from_bytes(response[offset : offset + 2], "big"), int.from_bytes(
            response[offset + 2 : offset + 4], "big")
        if ie_type == 19 and response[offset + 4] != Cause.REQUEST_ACCEPTED:
            return None
        if ie_type == 57:
            return int.from_bytes(response[offset + 5 : offset + 13], "big")
        offset += 4 + length
    return None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_fast_path_answers_stores_and_writes_what_the_full_path_does(sides, seed):
    fast, full = sides
    for side in sides:
        _associate(side)
    requests, established = Requests(seed), []
    for _ in range(40):
        batch = requests.batch(established)
        answers = fast.ask(batch)
        assert answers == full.ask(batch)
        established += [seid for seid in map(_up_seid, answers.values()) if seid is not None and seid not in established]
        assert fast.rows() == full.rows()
        assert fast.maps() == full.maps()
    counters = fast.server.counters
    assert counters["accepted_from_template"] > counters["accepted"] // 3, counters
    assert counters.get("refused_rule_creation_modification_failure", 0) > 5
    assert counters.get("refused_no_resources_available", 0) > 0
    assert "accepted_from_template" not in full.server.counters


def test_the_rows_the_fast_path_fills_in_are_the_sessions_serialised_and_a_restart_reconciles_from_them(
        sides, tmp_path):
    """A template's row is its JSON with the request's values patched in (netapp.upf.prepared), not
    the session serialised again: each such row must be what serialising the session it describes
    gives, and a UPF started again over those rows must put into fresh maps what the live endpoint
    wrote, as it does from the full path's rows."""
    fast, full = sides
    for side in sides:
        _associate(side)
    requests, established = Requests(4), []
    for _ in range(12):
        batch = requests.batch(established)
        answers = fast.ask(batch)
        assert answers == full.ask(batch)
        established += [seid for seid in map(_up_seid, answers.values()) if seid is not None and seid not in established]
    assert fast.server.counters["accepted_from_template"] > 40
    rows = fast.rows()["upf_sessions"]
    assert len(rows) > 40 and rows == full.rows()["upf_sessions"]
    assert all(Session.model_validate_json(body).stored_json() == body for _, _, body in rows)
    for side in sides:
        fake, store, upf = _upf_over(tmp_path / ("fast.db" if side is fast else "full.db"))
        try:
            assert {seid: upf.sessions.body(seid) for seid in upf.sessions} == {seid: body for seid, _, body in rows}
            assert upf.applier.reconcile(upf.sessions.values()) == {}
            again = {name: dict(entries) for name, entries in fake.tables.items() if entries and name not in HISTORY}
            assert again == {name: entries for name, entries in side.maps().items() if entries and name not in HISTORY}
        finally:
            store.close()


def _plain(cp_seid: int, changes: Optional[dict[int, dict]] = None) -> list:
    """The tests' establishment without SDF filters (the fast path's kind), its UE `ue_of(cp_seid)`;
    `changes`: IEs in place of some, by index."""
    ies = establishment_ies(cp_seid, sdf=False)
    for at, each in (changes or {}).items():
        ies[at] = each
    return ies


def _given_teid(teid: int) -> dict:
    """An uplink PDR whose F-TEID the SMF gives (no CHOOSE)."""
    pdi = [ie(20, {"If": 0}), ie(22, b"internet"), ie(21, {"V4": 1, "TEID": teid, "IPv4Addr": N3})]
    return ie(1, [ie(56, {"Val": 1}), ie(29, {"Val": 101}), ie(2, pdi), ie(108, {"Val": 1}), ie(95, {"Desc": 0})])


UNUSUAL: dict[str, Callable[[int], dict[int, dict]]] = {  # index of the IE in the request -> another
    "SDF filters": lambda n: {2: create_pdr(1, 1, access=True, choose_id=1, flow="permit out ip from any to assigned")},
    "CHV4": lambda n: {4: create_pdr(3, 2, access=False, ue=None, flow=None)},
    "a TEID of the SMF's": lambda n: {2: _given_teid(0x77 + n)},
    "buffering": lambda n: {7: create_far(2, core=False, actions=("BUFF", "NOCP"), gnb=None)},
}


def test_a_data_path_refusing_a_templated_establishment_leaves_everything_as_before(endpoint, associated):
    for cp_seid in (1, 2):  # the second makes the template
        assert cause(associated.ask("PFCPSessionEstablishmentReq", _plain(cp_seid), seid=0)) == Cause.REQUEST_ACCEPTED
    assert len(endpoint.server.protocol.templates) == 1
    upf = endpoint.upf
    before = (endpoint.rows(), dict(upf.sessions), dict(upf._teids.held), upf._teids.cursor, upf._next_seid)
    endpoint.applier.fail = True
    refused = associated.ask("PFCPSessionEstablishmentReq", _plain(3), seid=0)
    assert cause(refused) == Cause.SYSTEM_FAILURE and find(refused, 57) is None
    assert (endpoint.rows(), dict(upf.sessions), dict(upf._teids.held), upf._teids.cursor, upf._next_seid) == before
    endpoint.applier.fail = False
    assert cause(associated.ask("PFCPSessionEstablishmentReq", _plain(3), seid=0)) == Cause.REQUEST_ACCEPTED
    assert endpoint.server.counters["accepted_from_template"] == 1


@pytest.mark.parametrize("unusual", sorted(UNUSUAL))
def test_an_unusual_session_never_becomes_a_template(tmp_path, unusual):
    endpoint = Endpoint(tmp_path / "netapp.db", ue_pools={"internet": POOL})
    smf = Smf(endpoint.server.address)
    try:
        assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
        for cp_seid in range(1, 5):
            request = _plain(cp_seid, UNUSUAL[unusual](cp_seid))
            assert cause(smf.ask("PFCPSessionEstablishmentReq", request, seid=0)) == Cause.REQUEST_ACCEPTED
        assert len(endpoint.server.protocol.templates) == 0
        assert "accepted_from_template" not in endpoint.server.counters
    finally:
        smf.close()
        endpoint.close()


def _ue_at(cp_seid: int, ue: str) -> list:
    """The fast path's establishment with every PDR naming `ue` (its shape: only the values differ)."""
    ies = establishment_ies(cp_seid, sdf=False)
    ies[2:6] = [create_pdr(1, 1, access=True, choose_id=1, flow=None, ue=ue),
                create_pdr(2, 1, access=True, choose_id=1, flow=None, ue=ue),
                create_pdr(3, 2, access=False, flow=None, ue=ue), create_pdr(4, 2, access=False, flow=None, ue=ue)]
    return ies


def test_the_fast_path_s_addresses_go_to_the_pools_as_they_are_and_are_still_refused_in_a_pool(tmp_path, monkeypatch):
    """A template's sessions say their downlink UE addresses are canonical (read from the request by
    inet_ntoa): the pools' check takes them without parsing them again, and still refuses one of a
    pool (the UPF's to give) and one another session has, naming the PDR (a request the fast path
    refuses goes the full way, which refuses it again and answers)."""
    checked = []
    check = Pools.check
    monkeypatch.setattr(Pools, "check", lambda pools, session: (checked.append(session), check(pools, session))[1])
    endpoint = Endpoint(tmp_path / "netapp.db", ue_pools={"internet": POOL})
    smf = Smf(endpoint.server.address)
    try:
        assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
        for cp_seid in (1, 2):  # the second makes the template
            assert cause(smf.ask("PFCPSessionEstablishmentReq", _ue_at(cp_seid, f"10.45.0.{cp_seid}"), seid=0)) \
                == Cause.REQUEST_ACCEPTED
        assert len(endpoint.server.protocol.templates) == 1
        checked.clear()
        in_pool = smf.ask("PFCPSessionEstablishmentReq", _ue_at(3, str(ipaddress.IPv4Network(POOL)[7])), seid=0)
        taken = smf.ask("PFCPSessionEstablishmentReq", _ue_at(4, "10.45.0.1"), seid=0)
        assert cause(smf.ask("PFCPSessionEstablishmentReq", _ue_at(5, "10.45.0.5"), seid=0)) == Cause.REQUEST_ACCEPTED
        prepared = [session for session in checked if type(session).__name__ == "PreparedSession"]
        assert len(prepared) == 3 and all(session.canonical_ues for session in prepared), "each tried fast first"
        for refused in (in_pool, taken):
            assert cause(refused) == Cause.RULE_CREATION_MODIFICATION_FAILURE
            assert value(find(refused, 114))["RuleIDVal"] == 3 and value(find(refused, 40)) == IEType.UE_IP_ADDRESS
        assert endpoint.server.counters["accepted_from_template"] == 1
    finally:
        smf.close()
        endpoint.close()


def test_a_layout_s_compiled_shape_is_its_bytes_but_for_its_values():
    """`Layout.shape` is compiled for each layout's spans: it gives what the spans between the values
    give, and requests of one shape differing only in their values share it."""
    rng = random.Random(7)
    for _ in range(50):
        length = rng.randrange(40, 300)
        offsets = sorted(rng.sample(range(0, length - 8, 9), rng.randrange(1, 6)))
        layout = Layout.of(length, [Varying(offset, rng.choice(("seq", "teid", "address")), None) for offset in offsets])
        data = bytearray(rng.randbytes(length))
        assert layout.shape(bytes(data)) == b"".join(bytes(data[start:end]) for start, end in layout.kept)
        for place in layout.places:
            data[place.offset : place.end] = rng.randbytes(place.end - place.offset)
        assert layout.shape(bytes(data)) == Layout.shape(layout, bytes(data))
