"""PDRs with SDF filters compiled (netapp.upf.compiler, netapp.upf.sdf): filters to classifier keys,
precedence to priority, ports to rules, the exact entries they leave, and what is refused."""

from __future__ import annotations

import ipaddress

import pytest

from netapp.dataplane.abi import Action
from netapp.dataplane.convert import rule_to_c
from netapp.upf.abi import QFI_ANY, FarAction, PdrFlag, Role
from netapp.upf.compiler import Port, Site, compile_session
from netapp.upf.flows import parse_flow
from netapp.upf.models import Far, ForwardingParameters, FSeid, FTeid, OuterHeaderCreation, Pdi, Pdr, RuleError, Session
from netapp.upf.pfcp.ies import Cause, IEType, Interface, RuleType
from netapp.upf.sdf import MAX_RULES_PER_FILTER

TEID, UE, UE6 = 0x77, "10.45.0.7", "2001:db8:45::7"
SITE = Site(net_instances={"internet": 1, "ims": 2}, default_instance="internet", n3_ipv4="10.3.0.1",
            ports=(Port(5, Role.N6, "internet"), Port(6, Role.N6, "internet"), Port(7, Role.N6, "ims"),
                   Port(3, Role.N3)))
TO_CORE = Far(id=1, apply_action=frozenset({"FORW"}),
              forwarding=ForwardingParameters(destination_interface=Interface.CORE))
DROP = Far(id=2, apply_action=frozenset({"DROP"}))
TO_GNB = Far(id=3, apply_action=frozenset({"FORW"}), forwarding=ForwardingParameters(
    destination_interface=Interface.ACCESS,
    outer_header_creation=OuterHeaderCreation(kind="gtpu-ipv4", teid=9, address="10.3.0.9")))


def uplink(pdr_id: int, precedence: int, *flows: str, far: int = 1, qfis: tuple[int, ...] = ()) -> Pdr:
    return Pdr(id=pdr_id, precedence=precedence, far_id=far, outer_header_removal=0,
               pdi=Pdi(source_interface=Interface.ACCESS, local_fteid=FTeid(teid=TEID, ipv4="10.3.0.1"),
                       ue_ip={"ipv4": UE}, qfis=qfis, sdf_filters=tuple(parse_flow(flow) for flow in flows)))


def downlink(pdr_id: int, precedence: int, *flows: str, far: int = 3) -> Pdr:
    return Pdr(id=pdr_id, precedence=precedence, far_id=far,
               pdi=Pdi(source_interface=Interface.CORE, ue_ip={"ipv4": UE, "ipv6": UE6, "destination": True},
                       sdf_filters=tuple(parse_flow(flow) for flow in flows)))


def compiled(*pdrs: Pdr):
    session = Session(seid=0x5, node_id="smf", remote=FSeid(seid=1, ipv4="10.0.0.1"),
                      pdrs={pdr.id: pdr for pdr in pdrs}, fars={1: TO_CORE, 2: DROP, 3: TO_GNB})
    slots = {pdr.id: 100 + pdr.id for pdr in pdrs if pdr.pdi.sdf_filters}
    return compile_session(session, SITE, {}, slots)


def refusal(*pdrs: Pdr) -> RuleError:
    with pytest.raises(RuleError) as caught:
        compiled(*pdrs)
    return caught.value


def test_an_uplink_filter_is_a_rule_on_the_teid_with_source_and_destination_swapped():
    entries = compiled(uplink(1, 10, "permit out 17 from 192.0.2.0/24 53 to assigned 1000-1001", far=2),
                       uplink(2, 20))
    values = [dict(rule.values) for rule in entries.rules.values()]
    common = {"upf": 1, "gtp": 1, "teid": TEID, "protocol": 17, "family": 4, "fragment": 0,
              "src": ipaddress.ip_network(UE), "dst": ipaddress.ip_network("192.0.2.0/24"), "dst_port": 53}
    assert values == [{**common, "src_port": 1000}, {**common, "src_port": 1001}]
    rule = next(iter(entries.rules.values()))
    assert (rule.action, rule.arg, rule.priority) == ("upf", 101, 0xFFFF - 10)
    assert rule_to_c(rule)[1].action == Action.UPF
    assert entries.sdf_pdrs[101].far == FarAction.DROP, "the slot holds the PDR's whole action"
    own = entries.uplink[(TEID, QFI_ANY)]
    assert own.flags == PdrFlag.SDF | PdrFlag.DECAP and own.far == FarAction.FORWARD, "the default PDR, marked"


def test_rule_ids_are_not_tenants_and_precedence_orders_priorities():
    entries = compiled(uplink(1, 10, "permit out 6 from any to assigned"),
                       uplink(3, 30, "permit out 17 from any to any"),
                       uplink(2, 20))
    by_pdr = {rule.arg: rule.priority for rule in entries.rules.values()}
    assert by_pdr == {101: 0xFFFF - 10}, "a PDR after the catch-all of its TEID never matches: no rule"
    assert all("/" not in rule_id for rule_id in entries.rules)


def test_without_a_default_pdr_the_teid_entry_matches_nothing_by_itself():
    entries = compiled(uplink(1, 10, "permit out 17 from any to any"))
    assert entries.uplink[(TEID, QFI_ANY)].flags == PdrFlag.SDF | PdrFlag.NO_MATCH
    (rule,) = entries.rules.values()
    assert dict(rule.values) == {"upf": 1, "gtp": 1, "teid": TEID, "protocol": 17}, "no address: either family"


def test_qfis_give_a_rule_each_and_every_entry_of_the_teid_is_marked():
    entries = compiled(uplink(1, 10, "permit out ip from any to any", qfis=(5, 6)), uplink(2, 20, qfis=(5,)),
                       uplink(3, 30))
    assert sorted(rule.values["qfi"] for rule in entries.rules.values()) == [5, 6]
    assert all(value.flags & PdrFlag.SDF for value in entries.uplink.values())
    assert set(entries.uplink) == {(TEID, 5), (TEID, QFI_ANY)}


def test_a_downlink_filter_is_a_rule_per_n6_interface_and_family_with_the_ue_as_destination():
    entries = compiled(downlink(1, 10, "permit out 17 from any 53 to assigned"), downlink(2, 20))
    keys = sorted((rule.values["interface"], rule.values["family"], str(rule.values["dst"]))
                  for rule in entries.rules.values())
    assert keys == [(5, 4, f"{UE}/32"), (5, 6, f"{UE6}/128"), (6, 4, f"{UE}/32"), (6, 6, f"{UE6}/128")]
    assert {rule.values["src_port"] for rule in entries.rules.values()} == {53}
    assert all(value.flags & PdrFlag.SDF for value in entries.downlink.values()) and len(entries.downlink) == 2


def test_a_downlink_filter_to_another_address_is_left_out():
    entries = compiled(downlink(1, 10, "permit out 17 from any to 10.99.0.0/16"), downlink(2, 20))
    assert entries.rules == {}


def test_without_sdf_filters_nothing_changes():
    entries = compiled(uplink(1, 10), downlink(2, 20))
    assert entries.rules == entries.sdf_pdrs == {}
    assert not any(value.flags & PdrFlag.SDF for value in [*entries.uplink.values(), *entries.downlink.values()])


@pytest.mark.parametrize(("ports", "rules"), [("80", 1), ("80,443", 2), ("1000-1015", 16), ("0-65535", 1)])
def test_port_lists_and_ranges_become_exact_ports(ports, rules):
    entries = compiled(uplink(1, 10, f"permit out 6 from any {ports} to assigned"), uplink(2, 20))
    assert len(entries.rules) == rules


@pytest.mark.parametrize(
    ("pdrs", "ie_type", "pdr_id"),
    [
        ((uplink(1, 10, "permit out 6 from any 1024-65535 to assigned"),), IEType.SDF_FILTER, 1),
        ((uplink(1, 10, "permit out 6 from any 1-4 to assigned 1-5"),), IEType.SDF_FILTER, 1),
        ((uplink(1, 70000, "permit out 6 from any to assigned"),), IEType.PRECEDENCE, 1),
        ((uplink(1, 10, "permit out 6 from any to any"), uplink(2, 10, "permit out 17 from any to any")),
         IEType.PRECEDENCE, 2),
        ((uplink(1, 10, "permit out 6 from 10.0.0.0/8 to 2001:db8::/32"),), IEType.SDF_FILTER, 1),
        ((uplink(2, 5, qfis=(5,)), uplink(1, 10, "permit out 6 from any to any")), IEType.QFI, 1),
    ],
    ids=["range-too-wide", "too-many-pairs", "precedence-too-high", "tie", "mixed-families", "any-qfi-after-qfis"],
)
def test_refusals_name_the_pdr_and_the_ie(pdrs, ie_type, pdr_id):
    error = refusal(*pdrs)
    assert (error.cause, error.ie_type, error.rule) == (
        Cause.RULE_CREATION_MODIFICATION_FAILURE, ie_type, (RuleType.PDR, pdr_id))
    if ie_type == IEType.SDF_FILTER and "needs" in str(error):
        assert str(MAX_RULES_PER_FILTER) in str(error)


def test_a_downlink_pdr_without_an_n6_interface_of_its_instance_is_refused():
    site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4="10.3.0.1")
    session = Session(seid=5, node_id="smf", remote=FSeid(seid=1, ipv4="10.0.0.1"),
                      pdrs={1: downlink(1, 10, "permit out ip from any to assigned")}, fars={3: TO_GNB})
    with pytest.raises(RuleError) as caught:
        compile_session(session, site, {}, {1: 1})
    assert caught.value.ie_type == IEType.NETWORK_INSTANCE


def test_the_upfs_rules_and_intents_overlap_no_packet():
    """The index reports no overlap between a UPF rule and an intent on the same fields: the UPF
    bit keeps their packets apart (netapp.dataplane.convert)."""
    from netapp.intents.index import RuleIndex
    from netapp.intents.models import parse_intent
    from tests.utils.intents import native_intent

    index = RuleIndex({})
    (rule,) = compiled(uplink(1, 10, "permit out 17 from any 53 to any"), uplink(2, 20)).rules.values()
    index.add(rule)
    intent = parse_intent(native_intent("dns", match={"protocol": "udp"}, action={"type": "drop"}))
    index.add(index.compile(intent, "tenant/dns"))
    assert index.overlaps("tenant/dns").overlaps == () and index.overlaps(rule.intent_id).overlaps == ()
