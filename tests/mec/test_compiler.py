"""MEC 011 traffic rules compiled onto intents (netapp.mec.compiler): what each accepted rule becomes,
and that what the data plane cannot do is refused naming the ETSI field."""

from __future__ import annotations


import pytest

from netapp.intents.errors import IntentError
from netapp.mec.compiler import MEC_PRIORITY_BASE, installed_intents, intent_ids, rule_intents
from netapp.mec.models import TrafficRule
from tests.utils.mec import rule_model as rule

APP = "app-1"
MAC, IFACE = "02:00:00:00:00:0a", "eth-app"
MAC2, IFACE2 = "02:00:00:00:00:0b", "eth-copy"
INTERFACES = {MAC: IFACE, MAC2: IFACE2}
COPIES = [{"interfaceType": "MAC", "srcMacAddress": "02-00-00-00-00-0A"}, {"interfaceType": "MAC", "srcMacAddress": MAC2}]


def refusal(value: TrafficRule) -> tuple[str, str]:
    with pytest.raises(IntentError) as refused:
        rule_intents(APP, value, INTERFACES)
    return refused.value.field, refused.value.message


def test_a_packet_rule_is_one_intent_with_the_filter_as_its_match():
    (intent,) = rule_intents(APP, rule(), INTERFACES)
    assert intent.id == intent_ids(APP, "r1")[0]
    assert str(intent.match.dst) == "192.0.2.0/24"
    assert (intent.match.protocol, intent.match.dst_port) == ("udp", 5000)
    assert intent.action.type == "drop"


@pytest.mark.parametrize("action", ["DUPLICATE_ENCAPSULATED", "DUPLICATE_DECAPSULATED"])
def test_a_duplicate_sends_a_copy_out_of_each_of_its_two_mac_interfaces(action):
    # DECAPSULATED: the first dstInterface's copy (the application's) leaves without its GTP-U tunnel.
    (intent,) = rule_intents(APP, rule(action=action, dstInterface=COPIES), INTERFACES)
    assert (intent.action.type, intent.action.interfaces) == ("duplicate", [IFACE, IFACE2])
    assert intent.action.decapsulate == ([IFACE] if action == "DUPLICATE_DECAPSULATED" else [])
    assert str(intent.match.dst) == "192.0.2.0/24"


def test_a_duplicate_written_in_etsi_v2_1_1s_shape_with_dst_interfaces_is_the_same_rule():
    listed = rule(action="DUPLICATE_ENCAPSULATED", dstInterface=COPIES)
    shaped = rule(action="DUPLICATE_ENCAPSULATED", dstInterface=COPIES[0], dstInterfaces=COPIES)
    assert listed == shaped
    assert (listed.dstInterface, listed.dstInterfaces) == (shaped.destinations()[0], shaped.destinations())
    assert rule_intents(APP, listed, INTERFACES) == rule_intents(APP, shaped, INTERFACES)


@pytest.mark.parametrize(("fields", "why"), [
    ({"dstInterface": COPIES[1], "dstInterfaces": COPIES}, r"dstInterface is not dstInterfaces\[0\]"),
    ({"dstInterface": COPIES[::-1], "dstInterfaces": COPIES}, "give the destinations once"),
])
def test_dst_interface_and_dst_interfaces_that_disagree_are_refused(fields, why):
    with pytest.raises(ValueError, match=why):
        rule(action="DUPLICATE_ENCAPSULATED", **fields)


def test_priorities_keep_mec_order_zero_highest():
    top, bottom = (rule_intents(APP, rule(priority=p), INTERFACES)[0].priority for p in (0, 255))
    assert top == MEC_PRIORITY_BASE + 255 and bottom == MEC_PRIORITY_BASE and top > bottom


def action_of(action: str, destination: dict) -> dict:
    (intent,) = rule_intents(APP, rule(action=action, dstInterface=destination), INTERFACES)
    return intent.action.model_dump(mode="json", exclude_none=True)


MAC_OUT = {"interfaceType": "MAC", "srcMacAddress": "02-00-00-00-00-0A"}
IP_OUT = {"interfaceType": "IP", "dstIpAddress": " 2001:db8::7 "}


def gtpu_out(**info) -> dict:
    return {"interfaceType": "TUNNEL", "tunnelInfo": {"tunnelType": "GTP_U", **info}}


def gre_out(**info) -> dict:
    return {"interfaceType": "TUNNEL", "tunnelInfo": {"tunnelType": "GRE", "tunnelDstAddress": "198.51.100.7", **info}}


@pytest.mark.parametrize(
    ("action", "destination", "expected"),
    [
        ("FORWARD_DECAPSULATED", MAC_OUT, {"type": "tunnel", "decapsulate": True, "interface": IFACE}),
        ("FORWARD_DECAPSULATED", IP_OUT, {"type": "tunnel", "decapsulate": True, "towards": "2001:db8::7"}),
        ("FORWARD_ENCAPSULATED", MAC_OUT, {"type": "redirect", "interface": IFACE}),
        ("FORWARD_ENCAPSULATED", IP_OUT, {"type": "tunnel", "decapsulate": False, "towards": "2001:db8::7"}),
        ("FORWARD_ENCAPSULATED", gtpu_out(tunnelDstAddress="198.51.100.7"),
         {"type": "tunnel", "decapsulate": False, "encapsulate": {"protocol": "gtpu", "peer": "198.51.100.7"}}),
        ("FORWARD_ENCAPSULATED", gtpu_out(tunnelDstAddress="198.51.100.7", tunnelSrcAddress="192.0.2.1"),
         {"type": "tunnel", "decapsulate": False, "encapsulate": {"protocol": "gtpu", "peer": "198.51.100.7",
                                                                   "source": "192.0.2.1"}}),
        ("FORWARD_ENCAPSULATED", gre_out(),
         {"type": "tunnel", "decapsulate": False, "encapsulate": {"protocol": "gre", "peer": "198.51.100.7"}}),
        ("FORWARD_ENCAPSULATED", gre_out(tunnelSrcAddress="192.0.2.1", tunnelSpecificData=" 4294967295 "),
         {"type": "tunnel", "decapsulate": False, "encapsulate": {"protocol": "gre", "peer": "198.51.100.7",
                                                                   "source": "192.0.2.1", "key": 4294967295}}),
        ("FORWARD_ENCAPSULATED", gre_out(tunnelSpecificData=0),
         {"type": "tunnel", "decapsulate": False, "encapsulate": {"protocol": "gre", "peer": "198.51.100.7", "key": 0}}),
        ("PASSTHROUGH", MAC_OUT, {"type": "redirect", "interface": IFACE}),
    ],
)
def test_forward_actions_become_the_tunnel_or_redirect_intent_of_their_destination(action, destination, expected):
    assert action_of(action, destination) == expected


def test_passthrough_without_an_interface_passes():
    (intent,) = rule_intents(APP, rule(action="PASSTHROUGH"), INTERFACES)
    assert intent.action.type == "pass"


def test_a_flow_rule_also_matches_the_reverse_direction():
    flow = rule(filterType="FLOW", trafficFilter=[{"srcAddress": ["10.0.0.1"], "dstAddress": ["192.0.2.0/24"],
                                                   "protocol": ["tcp"], "srcPort": ["40000"], "dstPort": ["80"]}])
    forward, reverse = rule_intents(APP, flow, INTERFACES)
    assert (str(forward.match.src), str(forward.match.dst)) == ("10.0.0.1/32", "192.0.2.0/24")
    assert (str(reverse.match.src), str(reverse.match.dst)) == ("192.0.2.0/24", "10.0.0.1/32")
    assert (reverse.match.src_port, reverse.match.dst_port) == (80, 40000)
    assert forward.id != reverse.id


def test_tunnel_filter_members_become_the_match_of_a_gtpu_tunnels_addresses():
    tunnelled = rule(trafficFilter=[{"srcTunnelAddress": [" 192.0.2.1"], "tgtTunnelAddress": ["2001:db8::7"],
                                     "dstTunnelPort": ["2152"]}])
    (intent,) = rule_intents(APP, tunnelled, INTERFACES)
    assert (str(intent.match.tunnel_src), str(intent.match.tunnel_dst)) == ("192.0.2.1", "2001:db8::7")
    assert intent.match.src is None and intent.match.teid is None


def test_a_flow_rule_on_a_tunnel_also_matches_the_tunnel_of_the_reverse_direction():
    flow = rule(filterType="FLOW", trafficFilter=[{"srcTunnelAddress": ["192.0.2.1"], "tgtTunnelAddress": ["192.0.2.2"]}])
    forward, reverse = rule_intents(APP, flow, INTERFACES)
    assert (str(reverse.match.tunnel_src), str(reverse.match.tunnel_dst)) == ("192.0.2.2", "192.0.2.1")
    assert (forward.match.tunnel_src, forward.match.tunnel_dst) == (reverse.match.tunnel_dst, reverse.match.tunnel_src)


def test_a_symmetric_flow_rule_is_one_intent():
    flow = rule(filterType="FLOW", trafficFilter=[{"protocol": ["icmp"]}])
    assert len(rule_intents(APP, flow, INTERFACES)) == 1


def test_an_inactive_rule_installs_nothing_but_is_still_checked():
    assert installed_intents(APP, rule(state="INACTIVE"), INTERFACES) == []
    with pytest.raises(IntentError):
        installed_intents(APP, rule(state="INACTIVE", trafficFilter=[{"qCI": 9}]), INTERFACES)


def test_dscp_with_an_ipv4_address_and_tc_with_an_ipv6_one():
    (v4,) = rule_intents(APP, rule(trafficFilter=[{"srcAddress": ["10.0.0.0/8"], "dSCP": 46}]), INTERFACES)
    (v6,) = rule_intents(APP, rule(trafficFilter=[{"srcAddress": ["2001:db8::/32"], "tC": 184}]), INTERFACES)
    assert v4.match.dscp == 46 and v6.match.dscp == 46


@pytest.mark.parametrize(
    ("fields", "field", "why"),
    [
        ({"action": "FORWARD_ENCAPSULATED", "dstInterface": {"interfaceType": "TUNNEL"}},
         "dstInterface.tunnelInfo", "needs its tunnelInfo"),
        ({"action": "FORWARD_ENCAPSULATED", "dstInterface": gtpu_out()},
         "dstInterface.tunnelInfo.tunnelDstAddress", "far end"),
        ({"action": "FORWARD_ENCAPSULATED", "dstInterface": gtpu_out(tunnelDstAddress="198.51.100.0/24")},
         "dstInterface.tunnelInfo.tunnelDstAddress", "not an IPv4 or IPv6 address"),
        ({"action": "FORWARD_ENCAPSULATED", "dstInterface": gtpu_out(tunnelDstAddress="198.51.100.7",
                                                                     tunnelSrcAddress="2001:db8::1")},
         "dstInterface.tunnelInfo.tunnelSrcAddress", "family"),
        ({"action": "FORWARD_ENCAPSULATED", "dstInterface": gre_out(tunnelSpecificData=1 << 32)},
         "dstInterface.tunnelInfo.tunnelSpecificData", "its key, an integer 0 to 4294967295"),
        ({"action": "FORWARD_ENCAPSULATED", "dstInterface": gre_out(tunnelSpecificData={"key": 1})},
         "dstInterface.tunnelInfo.tunnelSpecificData", "its key"),
        ({"action": "FORWARD_ENCAPSULATED", "dstInterface": gre_out(tunnelSpecificData=True)},
         "dstInterface.tunnelInfo.tunnelSpecificData", "its key"),
        ({"action": "FORWARD_ENCAPSULATED", "dstInterface": gtpu_out(tunnelDstAddress="198.51.100.7",
                                                                     tunnelSpecificData=7)},
         "dstInterface.tunnelInfo.tunnelSpecificData", "keeps the packet's own TEID"),
        ({"action": "FORWARD_ENCAPSULATED", "dstInterface": {**gtpu_out(tunnelDstAddress="198.51.100.7"),
                                                             "dstIpAddress": "20.1.1.1"}},
         "dstInterface.dstIpAddress", "not used by a TUNNEL interface"),
        ({"action": "FORWARD_DECAPSULATED", "dstInterface": gtpu_out(tunnelDstAddress="198.51.100.7")},
         "dstInterface.interfaceType", "use FORWARD_ENCAPSULATED"),
        ({"action": "FORWARD_DECAPSULATED", "dstInterface": {"interfaceType": "IP"}},
         "dstInterface.dstIpAddress", "named by the address"),
        ({"action": "FORWARD_DECAPSULATED", "dstInterface": {"interfaceType": "IP", "dstIpAddress": "host"}},
         "dstInterface.dstIpAddress", "not an IPv4 or IPv6 address"),
        ({"action": "FORWARD_DECAPSULATED", "dstInterface": {**IP_OUT, "srcMacAddress": MAC}},
         "dstInterface.srcMacAddress", "not used by an IP interface"),
        ({"action": "PASSTHROUGH", "dstInterface": IP_OUT}, "dstInterface.interfaceType", "use MAC"),
        ({"action": "DUPLICATE_ENCAPSULATED"}, "dstInterface", "0 values"),
        ({"action": "DUPLICATE_ENCAPSULATED", "dstInterface": COPIES[0]}, "dstInterface", "two values"),
        ({"action": "DUPLICATE_ENCAPSULATED", "dstInterface": [COPIES[0], {"interfaceType": "IP",
                                                                           "dstIpAddress": "20.1.1.1"}]},
         "dstInterface[1].interfaceType", "use MAC"),
        ({"action": "DUPLICATE_ENCAPSULATED", "dstInterface": [COPIES[0], COPIES[0] | {"dstMacAddress": MAC2}]},
         "dstInterface[1].dstMacAddress", "unrewritten"),
        ({"action": "DUPLICATE_ENCAPSULATED", "dstInterface": [COPIES[0], {"interfaceType": "MAC",
                                                                           "srcMacAddress": MAC}]},
         "dstInterface[1].srcMacAddress", "its own"),
        ({"action": "DUPLICATE_ENCAPSULATED", "dstInterface": [COPIES[0], {"interfaceType": "MAC",
                                                                           "srcMacAddress": "02:00:00:00:00:ff"}]},
         "dstInterface[1].srcMacAddress", "not the MAC of an interface"),
        ({"action": "DUPLICATE_DECAPSULATED", "dstInterface": COPIES,
          "trafficFilter": [{"srcTunnelPort": ["2152"]}]}, "trafficFilter[0].srcTunnelPort",
         "not its source port"),
        ({"action": "FORWARD_DECAPSULATED", "dstInterface": COPIES}, "dstInterface", "one value"),
        ({"action": "FORWARD_DECAPSULATED", "dstInterface": {"interfaceType": "MAC",
                                                             "srcMacAddress": "02:00:00:00:00:ff"}},
         "dstInterface.srcMacAddress", "known: 02:00:00:00:00:0a (eth-app)"),
        ({"action": "FORWARD_DECAPSULATED", "dstInterface": {"interfaceType": "MAC", "srcMacAddress": MAC,
                                                             "dstMacAddress": "02:00:00:00:00:01"}},
         "dstInterface.dstMacAddress", "MAC addresses are kept"),
        ({"action": "FORWARD_DECAPSULATED"}, "dstInterface", "needs a destination"),
        ({"dstInterface": {"interfaceType": "MAC", "srcMacAddress": MAC}}, "dstInterface", "DROP takes no"),
        ({"trafficFilter": []}, "trafficFilter", "exactly one"),
        ({"trafficFilter": [{"protocol": ["udp"]}, {"protocol": ["tcp"]}]}, "trafficFilter", "exactly one"),
        ({"trafficFilter": [{"srcAddress": ["10.0.0.0/8", "11.0.0.0/8"]}]}, "trafficFilter[0].srcAddress",
         "one value per field"),
        ({"trafficFilter": [{"srcAddress": ["10.0.0.1-10.0.0.9"]}]}, "trafficFilter[0].srcAddress[0]", "ranges"),
        ({"trafficFilter": [{"dstAddress": ["not an address"]}]}, "trafficFilter[0].dstAddress[0]", "not an IPv4"),
        ({"trafficFilter": [{"protocol": ["udp"], "dstPort": ["80-90"]}]}, "trafficFilter[0].dstPort[0]", "ranges"),
        ({"trafficFilter": [{"protocol": ["udp"], "dstPort": ["70000"]}]}, "trafficFilter[0].dstPort[0]",
         "not a port"),
        ({"trafficFilter": [{"protocol": ["udp"], "dstPort": ["\u00b2"]}]}, "trafficFilter[0].dstPort[0]",
         "not a port"),
        ({"trafficFilter": [{"protocol": ["\u00b9"]}]}, "trafficFilter[0].protocol[0]", "IP protocol number"),
        ({"trafficFilter": [{"protocol": ["ospf"]}]}, "trafficFilter[0].protocol[0]", "IP protocol number"),
        ({"trafficFilter": [{"dstPort": ["80"]}]}, "trafficFilter[0].dstPort", "needs protocol"),
        ({"trafficFilter": [{"srcAddress": ["10.0.0.0/8"], "dstAddress": ["2001:db8::/32"]}]},
         "trafficFilter[0].dstAddress", "IPv6"),
        ({"trafficFilter": [{"tgtTunnelAddress": ["198.51.100.0/24"]}]}, "trafficFilter[0].tgtTunnelAddress[0]",
         "matched exactly"),
        ({"trafficFilter": [{"srcTunnelAddress": ["192.0.2.1-192.0.2.9"]}]}, "trafficFilter[0].srcTunnelAddress[0]",
         "no prefix or range"),
        ({"trafficFilter": [{"srcTunnelAddress": ["gnb.example"]}]}, "trafficFilter[0].srcTunnelAddress[0]",
         "not an IPv4 or IPv6 address"),
        ({"trafficFilter": [{"srcTunnelAddress": ["192.0.2.1", "192.0.2.2"]}]}, "trafficFilter[0].srcTunnelAddress",
         "one value per field"),
        ({"trafficFilter": [{"dstTunnelPort": ["2152"]}]}, "trafficFilter[0].dstTunnelPort[0]",
         "give srcTunnelAddress or tgtTunnelAddress"),
        ({"trafficFilter": [{"tgtTunnelAddress": ["198.51.100.1"], "dstTunnelPort": ["4789"]}]},
         "trafficFilter[0].dstTunnelPort[0]", "port 2152 only"),
        ({"trafficFilter": [{"srcTunnelPort": ["2152"]}]}, "trafficFilter[0].srcTunnelPort", "srcTunnelAddress"),
        ({"trafficFilter": [{"token": ["abc"]}]}, "trafficFilter[0].token", "token"),
        ({"trafficFilter": [{"qCI": 9}]}, "trafficFilter[0].qCI", "QFI"),
        ({"trafficFilter": [{"dSCP": 46}]}, "trafficFilter[0].dSCP", "IPv4 srcAddress"),
        ({"trafficFilter": [{"srcAddress": ["2001:db8::/32"], "tC": 185}]}, "trafficFilter[0].tC", "ECN"),
        ({"priority": 256}, "priority", "0 (highest) to 255"),
        ({"filterType": "FLOW", "action": "FORWARD_DECAPSULATED",
          "dstInterface": {"interfaceType": "MAC", "srcMacAddress": MAC}}, "filterType", "use PACKET"),
    ],
)
def test_what_the_data_plane_cannot_do_is_refused_naming_the_field(fields, field, why):
    got_field, message = refusal(rule(**fields))
    assert got_field == field
    assert why in message
