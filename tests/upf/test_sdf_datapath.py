"""PDRs with SDF filters in the kernel (BPF_PROG_TEST_RUN): their rules installed through the service's
rule machinery (netapp.service.function_rules), packets built with scapy through the real program, each
output frame compared byte for byte with the frame scapy builds for the expected PDR's action."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import pytest
from scapy.contrib.gtp import GTP_U_Header, GTPPDUSessionContainer
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.core.config import Settings
from netapp.core.netns import NETNS_DIR
from netapp.intents.models import parse_intent
from netapp.service.contract import DataplaneUnavailable
from netapp.service.function_rules import FunctionRules
from netapp.service.state import ServiceState
from netapp.upf.abi import Output, Role
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.compiler import Port, Site
from netapp.upf.flows import parse_flow
from netapp.upf.models import Far, ForwardingParameters, FSeid, FTeid, OuterHeaderCreation, Pdi, Pdr, Qer, Session
from netapp.upf.pfcp.ies import Interface
from tests.upf import test_datapath as datapath
from tests.upf.test_datapath import (  # noqa: F401 - dp: the module's instance, a fixture
    DL_TEID, GNB, MACS, N3_IP, N3_IP6, N9_PEER, N9_TEID, SERVER, TEID, UE, dp)
from tests.utils.intents import native_intent
from tests.utils.kernel import veth_namespace
from tests.utils.packets.gtp import gtpu

DNS = "permit out 17 from any 53 to assigned"
GNB2 = "10.3.0.10"


@pytest.fixture
def state(dp):  # noqa: F811
    """The service's rule machinery over the module's instance (its index, slots and lock)."""
    state = ServiceState(Settings(auth_disabled=True), dp, None, lambda: datetime.now(timezone.utc))
    yield state
    with state.lock:
        change = state.rule_change()
        for rule_id in list(state.index.rule_ids()):
            change.remove(rule_id)
        change.apply_to_maps()


@pytest.fixture
def upf(dp, state):  # noqa: F811
    return sdf_applier(dp, state)


def sdf_applier(dp, state: ServiceState) -> BpfApplier:  # noqa: F811
    """An applier over the instance whose rules go through the service's rule machinery."""
    site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP, n3_ipv6=N3_IP6,
                output=Output.PASS, ports=(Port(datapath.N3_IF, Role.N3), Port(datapath.N6_IF, Role.N6, "internet")))
    roles = {datapath.N3_IF: (Role.N3, 0), datapath.N6_IF: (Role.N6, 1)}
    return BpfApplier(dp.table, site, iface_entries(roles, N3_IP, N3_IP6), FunctionRules(state, "upf"))


def tunnel(far_id: int, destination: Interface, teid: int, address: str) -> Far:
    return Far(id=far_id, apply_action=frozenset({"FORW"}), forwarding=ForwardingParameters(
        destination_interface=destination,
        outer_header_creation=OuterHeaderCreation(kind="gtpu-ipv4", teid=teid, address=address)))


def dns_session() -> Session:
    """One UE, each way two PDRs: DNS (an SDF filter, higher precedence) and the rest. Uplink DNS
    goes to an N9 peer, the rest is decapsulated to the core; downlink DNS goes to a second gNB."""
    fteid = FTeid(teid=TEID, ipv4=N3_IP)
    ue = {"ipv4": UE, "destination": True}
    dns = (parse_flow(DNS),)
    pdrs = [
        Pdr(id=1, precedence=10, far_id=3, outer_header_removal=0, qer_ids=(1,),
            pdi=Pdi(source_interface=Interface.ACCESS, local_fteid=fteid, sdf_filters=dns)),
        Pdr(id=2, precedence=20, far_id=1, outer_header_removal=0,
            pdi=Pdi(source_interface=Interface.ACCESS, local_fteid=fteid)),
        Pdr(id=3, precedence=10, far_id=4, qer_ids=(1,),
            pdi=Pdi(source_interface=Interface.CORE, ue_ip=ue, sdf_filters=dns)),
        Pdr(id=4, precedence=20, far_id=2, qer_ids=(1,), pdi=Pdi(source_interface=Interface.CORE, ue_ip=ue)),
    ]
    fars = [Far(id=1, apply_action=frozenset({"FORW"}),
                forwarding=ForwardingParameters(destination_interface=Interface.CORE)),
            tunnel(2, Interface.ACCESS, DL_TEID, GNB), tunnel(3, Interface.CORE, N9_TEID, N9_PEER),
            tunnel(4, Interface.ACCESS, DL_TEID + 1, GNB2)]
    return Session(seid=0x51, node_id="smf", remote=FSeid(seid=9, ipv4="10.0.0.1"),
                   pdrs={pdr.id: pdr for pdr in pdrs}, fars={far.id: far for far in fars},
                   qers={1: Qer(id=1, qfi=9)}, sdf_slots={1: 11, 3: 13})


@pytest.fixture
def installed(upf):
    upf.apply(None, dns_session())
    yield upf
    upf.apply(dns_session(), None)


def ue_udp(dport: int):
    return IP(src=UE, dst=SERVER) / UDP(sport=40000, dport=dport) / (b"q" * 40)


def uplink(dport: int) -> bytes:
    return bytes(Ether(**MACS) / IP(src=GNB, dst=N3_IP) / UDP(sport=2152, dport=2152)
                 / gtpu(TEID, 9, ul=True, inner=ue_udp(dport)))


def downlink(sport: int) -> bytes:
    return bytes(Ether(**MACS) / IP(src=SERVER, dst=UE) / UDP(sport=sport, dport=40000) / (b"a" * 40))


def encapsulated(inner: bytes, teid: int, peer: str, pdu_type: int) -> bytes:
    return bytes(Ether(**MACS) / IP(src=N3_IP, dst=peer, id=0, ttl=64) / UDP(sport=2152, dport=2152, chksum=0)
                 / GTP_U_Header(teid=teid, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=pdu_type, QFI=9)
                 / IP(inner))


def test_uplink_dns_goes_to_its_pdrs_far_and_the_rest_to_the_default_pdrs(dp, installed):  # noqa: F811
    out = dp.test_run(uplink(53), datapath.N3_IF)
    assert (out.verdict, out.action, out.intent) == ("PASS", "upf", "upf#51#1#0")
    assert out.data == encapsulated(bytes(ue_udp(53)), N9_TEID, N9_PEER, pdu_type=1)
    other = dp.test_run(uplink(5004), datapath.N3_IF)
    assert (other.verdict, other.action, other.reason, other.intent) == ("PASS", "upf", None, None)
    assert other.data == bytes(Ether(**MACS) / ue_udp(5004))


def test_downlink_dns_goes_to_the_second_gnb_and_the_rest_to_the_first(dp, installed):  # noqa: F811
    out = dp.test_run(downlink(53), datapath.N6_IF)
    assert (out.action, out.intent) == ("upf", "upf#51#3#0")
    assert out.data == encapsulated(downlink(53)[14:], DL_TEID + 1, GNB2, pdu_type=0)
    other = dp.test_run(downlink(5004), datapath.N6_IF)
    assert other.action == "upf" and other.data == encapsulated(downlink(5004)[14:], DL_TEID, GNB, pdu_type=0)


def test_without_a_default_pdr_other_packets_match_no_pdr(dp, upf):  # noqa: F811
    only_dns = dns_session()
    only_dns = only_dns.model_copy(update={"pdrs": {1: only_dns.pdrs[1], 3: only_dns.pdrs[3]}})
    upf.apply(None, only_dns)
    try:
        assert dp.test_run(uplink(53), datapath.N3_IF).intent == "upf#51#1#0"
        out = dp.test_run(uplink(5004), datapath.N3_IF)
        assert (out.action, out.reason, out.data) == ("default", "upf_no_pdr", uplink(5004))
    finally:
        upf.apply(only_dns, None)


def test_removal_removes_the_rules_and_the_exact_entries(dp, upf, state):  # noqa: F811
    upf.apply(None, dns_session())
    assert set(dp.installed_intents) == {"upf#51#1#0", "upf#51#3#0"}  # a rule each way (one N6, IPv4)
    upf.apply(dns_session(), None)
    assert dp.installed_intents == {} and len(state.index) == 0
    assert dp.test_run(uplink(53), datapath.N3_IF).reason == "upf_teid_miss"
    assert dp.test_run(downlink(53), datapath.N6_IF).action != "upf"


def test_an_intent_and_a_pdr_on_the_same_fields_each_act_on_their_own_traffic(dp, installed, state):  # noqa: F811
    """A tenant's intent drops UDP from port 53, at the highest priority: the UPF's packets of the
    same match still get their PDR, and the intent still drops the rest of the site's."""
    intent = parse_intent(native_intent("no-dns", match={"protocol": "udp", "src_port": 53},
                                        action={"type": "drop"}, priority=65535))
    with state.lock:
        change = state.rule_change()
        change.add(state.index.compile(intent, "tenant/no-dns"))
        change.apply_to_maps()
    out = dp.test_run(downlink(53), datapath.N6_IF)
    assert (out.action, out.intent) == ("upf", "upf#51#3#0")
    plain = dp.test_run(downlink(53), datapath.OTHER_IF)  # no UPF role: the site's traffic
    assert (plain.verdict, plain.action, plain.intent) == ("DROP", "drop", "tenant/no-dns")
    assert dp.test_run(uplink(53), datapath.N3_IF).intent == "upf#51#1#0"


def dns_establishment(cp_seid: int) -> list:
    """A Session Establishment Request's IEs (pycrate's): DNS dropped uplink and sent to a second
    gNB downlink, the other packets as the default PDRs say."""
    from tests.upf.smf import create_far, create_pdr, create_qer, create_urr, fseid, ie, node_id

    drop = ie(3, [ie(108, {"Val": 3}), ie(44, {"Octet1": {"DROP": 1}})])
    return [node_id(), fseid(cp_seid),
            create_pdr(1, 3, access=True, choose_id=1, flow=DNS, ue=UE),
            create_pdr(2, 1, access=True, choose_id=1, flow=None, ue=UE),
            create_pdr(3, 4, access=False, ue=UE, flow=DNS), create_pdr(4, 2, access=False, ue=UE, flow=None),
            create_far(1, core=True), create_far(2, core=False, gnb=GNB, teid=DL_TEID), drop,
            create_far(4, core=False, gnb=GNB2, teid=DL_TEID + 1), create_qer(), create_urr()]


def test_a_session_with_sdf_filters_over_pfcp_acts_on_packets_until_deleted(dp, upf, state, tmp_path):  # noqa: F811
    """The SMF (pycrate's codec, over UDP) asks for DNS to be dropped uplink and sent to a second gNB
    downlink; the other packets go as the default PDRs say; the deletion takes the rules away."""
    from netapp.service.store import Store
    from netapp.upf.pfcp.server import PfcpServer
    from netapp.upf.sessions import Upf
    from tests.upf.smf import Smf, cause, node_id, recovery

    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    server = PfcpServer(Upf(store, upf, n3_ipv4=N3_IP), "127.0.0.1", 0)
    server.start()
    smf = Smf(server.address)
    try:
        assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == 1
        assert cause(smf.ask("PFCPSessionEstablishmentReq", dns_establishment(0x52), seid=0)) == 1
        (session,) = server.upf.sessions.values()  # type: ignore[attr-defined]
        teid = session.pdrs[1].pdi.local_fteid.teid
        assert set(session.sdf_slots) == {1, 3}, "a slot each, stored with the session"
        frame = lambda dport: bytes(Ether(**MACS) / IP(src=GNB, dst=N3_IP) / UDP(sport=2152, dport=2152)  # noqa: E731
                                    / gtpu(teid, 9, ul=True, inner=ue_udp(dport)))

        dns = dp.test_run(frame(53), datapath.N3_IF)
        assert (dns.verdict, dns.reason, dns.intent) == ("DROP", "upf_far_drop", f"upf#{session.seid:x}#1#0")
        assert dp.test_run(frame(5004), datapath.N3_IF).data == bytes(Ether(**MACS) / ue_udp(5004))
        assert dp.test_run(downlink(53), datapath.N6_IF).data == encapsulated(downlink(53)[14:], DL_TEID + 1, GNB2, 0)
        assert dp.test_run(downlink(5004), datapath.N6_IF).data == encapsulated(downlink(5004)[14:], DL_TEID, GNB, 0)

        assert cause(smf.ask("PFCPSessionDeletionReq", [], seid=session.seid)) == 1
        assert dp.installed_intents == {} and len(state.index) == 0
        assert dp.test_run(frame(53), datapath.N3_IF).reason == "upf_teid_miss"
        assert dp.test_run(downlink(53), datapath.N6_IF).action != "upf"
    finally:
        smf.close()
        server.close()
        store.close()


def test_reconcile_installs_the_stored_sessions_rules_and_only_those(dp, upf):  # noqa: F811
    """At start (the service's index knows no UPF rule yet) the sessions' rules are put in."""
    assert upf.reconcile([dns_session()]) == {}
    try:
        assert set(dp.installed_intents) == {"upf#51#1#0", "upf#51#3#0"}
        assert dp.test_run(uplink(53), datapath.N3_IF).intent == "upf#51#1#0"
    finally:
        upf.reconcile([])
    assert dp.installed_intents == {}


def test_a_restart_never_takes_a_stored_sessions_rules_out_of_the_maps(dp, tmp_path, monkeypatch):  # noqa: F811
    """`netapp serve` started twice over one store and one pinned instance (the second start is the
    restart after a kill -9): the service's start-up reconcile installs the stored session's rules
    with the intents', so right after it -- before start_pfcp -- they are in dpp_rules and DNS takes
    its PDR; start_pfcp then leaves dpp_rules byte for byte as it was."""
    from netapp.cli.serve import _pfcp, _service
    from netapp.service.store import Store
    from netapp.upf import store as rows
    from tests.utils.maps import map_rules, pinned_instance

    monkeypatch.setattr("netapp.upf.pfcp.server.settle_collector", lambda: None)  # process-wide: serve's only
    dns_ids = {"upf#51#1#0", "upf#51#3#0"}

    def rules(instance: str) -> dict[bytes, bytes]:
        return {key: bytes(rule) for key, rule in map_rules(instance).items()}

    def dns_goes_to_its_pdr(service) -> bool:  # noqa: ANN001
        return service.dataplane.test_run(uplink(53), datapath.N3_IF).data == encapsulated(
            bytes(ue_udp(53)), N9_TEID, N9_PEER, pdu_type=1)

    with pinned_instance("upf-restart") as instance:
        settings = Settings(
            state_dir=tmp_path, auth_disabled=True, instance=instance,
            pfcp={"address": "127.0.0.1:0", "n3_ipv4": N3_IP, "n3_ipv6": N3_IP6, "peers": ["127.0.0.1"]},
            upf={"n3_interfaces": ["n3"], "n6_interfaces": {"n6": "internet"}, "output": "pass",
                 "peer_networks": ["0.0.0.0/0", "::/0"]})
        store = Store.open(settings.db_path)
        with store.transaction():
            rows.put_session(store, dns_session())
        store.close()
        first = _service(settings)
        _pfcp(settings, first).close()
        first.close()  # the maps stay, as after a kill -9
        installed = rules(instance)
        assert len(installed) == 2

        again = _service(settings)
        try:
            assert rules(instance) == installed, "the service's start-up reconcile kept the UPF's rules"
            assert set(again.dataplane.installed_intents) == dns_ids and dns_goes_to_its_pdr(again)
            server = _pfcp(settings, again)
            try:
                assert rules(instance) == installed
                assert dns_goes_to_its_pdr(again)
            finally:
                server.upf.delete(0x51)
                server.close()
            assert rules(instance) == {}
        finally:
            again.close()


def test_start_up_compiles_each_stored_session_once_and_leaves_out_one_tunnelling_outside(dp, tmp_path,  # noqa: F811
                                                                                         monkeypatch):
    """`netapp serve`'s two start-up reconciles (the service's, with the SDF rules, and start_pfcp's)
    share one compile of each stored session. A stored session whose tunnel goes outside a narrowed
    upf.peer_networks is in neither: its rules and entries stay out of the maps."""
    from netapp.upf import runtime
    from tests.utils.maps import pinned_instance

    monkeypatch.setattr("netapp.upf.pfcp.server.settle_collector", lambda: None)
    compiled: list[int] = []
    real = runtime.compile_stored

    def counted(session, site):  # noqa: ANN001, ANN202
        compiled.append(session.seid)
        return real(session, site)

    monkeypatch.setattr(runtime, "compile_stored", counted)
    monkeypatch.setattr("netapp.upf.applier.compile_stored", counted)
    outside = dns_session().model_copy(update={"seid": 0x52, "pdrs": {}, "fars": {
        2: tunnel(2, Interface.ACCESS, DL_TEID + 1, "198.51.100.7")}})
    with pinned_instance("upf-once") as instance:
        _start_twice_compiled_once(instance, tmp_path, outside, compiled)


def _start_twice_compiled_once(instance, tmp_path, outside, compiled):  # noqa: ANN001, ANN202
    from netapp.cli.serve import _pfcp, _service
    from netapp.service.store import Store
    from netapp.upf import store as rows

    settings = Settings(
        state_dir=tmp_path, auth_disabled=True, instance=instance,
        pfcp={"address": "127.0.0.1:0", "n3_ipv4": N3_IP, "n3_ipv6": N3_IP6, "peers": ["127.0.0.1"]},
        upf={"n3_interfaces": ["n3"], "n6_interfaces": {"n6": "internet"}, "output": "pass",
             "peer_networks": [f"{GNB}/32", f"{GNB2}/32", f"{N9_PEER}/32"]})
    store = Store.open(settings.db_path)
    with store.transaction():
        rows.put_session(store, dns_session())
        rows.put_session(store, outside)
    store.close()
    service = _service(settings)
    try:
        assert set(service.dataplane.installed_intents) == {"upf#51#1#0", "upf#51#3#0"}
        server = _pfcp(settings, service)
        try:
            assert sorted(compiled) == [0x51], "once, and the session outside not at all"
            assert set(service.dataplane.installed_intents) == {"upf#51#1#0", "upf#51#3#0"}
            assert set(server.upf.sessions) == {0x51, 0x52}, "kept in the store: the settings may widen again"
        finally:
            server.upf.delete(0x51)
            server.close()
    finally:
        service.close()


def test_a_session_with_sdf_filters_takes_the_service_s_lock_before_the_store_s(dp, upf, state, tmp_path):  # noqa: F811
    """The SDF filters' rules go through the service's rule machinery, which takes the service's lock;
    the intents' transactions take it before the store's. The UPF's transaction (given the lock, as
    netapp.upf.runtime gives it) takes it before the store's too: taken inside the store's transaction,
    an intent change waiting for the store while holding the service's lock, and a PFCP change waiting
    for that lock while holding the store's, would wait for each other for ever."""
    from netapp.service.store import Store
    from netapp.upf.pfcp.server import PfcpServer
    from netapp.upf.sessions import Upf
    from tests.upf.smf import Smf, cause, node_id, recovery

    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    transaction, held = store.transaction, []

    def noting_the_service_s_lock():  # noqa: ANN202
        held.append(state.lock._is_owned())  # type: ignore[attr-defined]
        return transaction()

    server = PfcpServer(Upf(store, upf, n3_ipv4=N3_IP, rules_lock=state.lock), "127.0.0.1", 0)
    server.start()
    smf = Smf(server.address)
    try:
        store.transaction = noting_the_service_s_lock  # type: ignore[method-assign]
        assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == 1
        assert cause(smf.ask("PFCPSessionEstablishmentReq", dns_establishment(0x53), seid=0)) == 1
        (session,) = server.upf.sessions.values()  # type: ignore[attr-defined]
        assert set(session.sdf_slots) == {1, 3}, "the case: rules through the service's machinery"
        assert held and all(held), held
        assert cause(smf.ask("PFCPSessionDeletionReq", [], seid=session.seid)) == 1
    finally:
        smf.close()
        server.close()
        store.close()


def test_a_reconcile_owed_when_a_function_s_rules_change_runs_in_the_site_s_namespace(dp):  # noqa: F811
    """The UPF changes its rules from the PFCP thread, outside the site's namespace (the service's own
    changes enter it). Where the maps were left stale, the change first reconciles them, which writes
    ports: it must run in the site's namespace, as start()'s does, or the kernel would resolve their
    ifindexes on the host."""
    with veth_namespace("dpp-sdfns", "site0", "site1") as site:
        state = ServiceState(Settings(auth_disabled=True, netns=site), dp, None, lambda: datetime.now(timezone.utc))
        where: list[int] = []

        def reconcile() -> None:
            where.append(os.stat("/proc/thread-self/ns/net").st_ino)
            state.maps_stale = None

        state.reconcile, state.maps_stale = reconcile, "an undo failed"
        FunctionRules(state, "upf").change({}, {})
        assert where == [os.stat(f"{NETNS_DIR}/{site}").st_ino], "the reconcile ran on the host"
        assert os.stat("/proc/thread-self/ns/net").st_ino != where[0], "and the thread went back"


def test_a_site_namespace_that_cannot_be_entered_refuses_the_change_as_the_service_does(dp):  # noqa: F811
    """The reconcile owed, its namespace gone: a ServiceError (503), which the UPF's applier takes as
    a refusal (it rolls its writes back), not another error that would pass it by."""
    state = ServiceState(Settings(auth_disabled=True, netns="dpp-gone-0"), dp, None, lambda: datetime.now(timezone.utc))
    state.reconcile, state.maps_stale = (lambda: None), "an undo failed"
    with pytest.raises(DataplaneUnavailable, match="reconcile: enter netns dpp-gone-0"):
        FunctionRules(state, "upf").change({}, {})
