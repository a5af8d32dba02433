"""How ambiguous packets are classified (api/intents.md, "How ambiguous packets are classified"), run
by the real program (BPF_PROG_TEST_RUN): which intent, if any, each packet gets."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from tests.utils import packets
from tests.utils.dataplane import run, traced_dataplane
from tests.utils.intents import INTERFACES

TEID = 0x11223344


def drop(intent_id: str, match: dict, priority: int = 100) -> dict:
    return {"id": intent_id, "priority": priority, "match": match, "action": {"type": "drop"}}


@pytest.fixture(scope="module")
def loaded():
    """One instance for the module (loading verifies the programs: seconds on a loaded machine)."""
    dataplane = traced_dataplane()
    yield dataplane
    dataplane.close()


@pytest.fixture
def dp(loaded):
    """The module's instance holding no rule, as a new one does; its rules removed again after."""
    assert list(loaded.table("dpp_rules").items()) == [], "an earlier test's rules were left"
    try:
        yield loaded
    finally:
        emptied(loaded)


def emptied(dp) -> None:
    """No rule in the maps, and slots given out from the first again, as in a new instance."""
    dp.apply_compiled(compile_document(parse_document({"intents": []}), INTERFACES))
    dp.resync()


def applied(dp, intents: list[dict]):
    """`dp` holding only `intents`, installed as in a new instance."""
    emptied(dp)
    assert list(dp.table("dpp_rules").items()) == []
    dp.apply_compiled(compile_document(parse_document({"intents": intents}), INTERFACES))
    return dp


def intents_of(dp, intents: list[dict], frames: dict[str, bytes]) -> dict[str, object]:
    """The intent each frame gets (None: no intent matched) with only `intents` installed."""
    applied(dp, intents)
    return {name: run(dp, frame).intent for name, frame in frames.items()}


def test_an_sctp_rule_matches_on_the_sctp_ports(dp):
    frames = {
        port: bytes(packets.ether(packets.ipv4(packets.sctp(38412, port), proto=132))) for port in (3868, 0, 9)
    }
    rules = [
        drop("diameter", {"protocol": "sctp", "dst_port": 3868}),
        drop("port-0", {"protocol": "sctp", "dst_port": 0}),
    ]
    assert intents_of(dp, rules, frames) == {3868: "diameter", 0: "port-0", 9: None}


def test_a_tcp_header_in_the_ethernet_padding_is_not_read(dp):
    frame = bytes(Ether() / IP(proto=6, len=20) / Raw(bytes(TCP(dport=80))))
    outcome = run(applied(dp, [drop("web", {"protocol": "tcp", "dst_port": 80})]), frame)
    assert (outcome.intent, outcome.action, outcome.reason) == (None, "default", "trunc_l4")


def test_an_empty_vxlan_datagram_with_padding_is_no_vxlan_packet(dp):
    frame = bytes(packets.outer_udp(b"", dport=packets.VXLAN_PORT)) + bytes(18)
    outcome = run(applied(dp, [drop("vni-0", {"overlay": "vxlan", "vni": 0})]), frame)
    assert (outcome.intent, outcome.reason) == (None, "trunc_vxlan")


def test_gre_without_a_key_is_not_gre_with_key_0(dp):
    inner = packets.ue_udp(*packets.INNER4, 1, 2)
    frames = {"no key": bytes(packets.outer_gre(inner)), "key 0": bytes(packets.outer_gre(inner, key=0))}
    key_0 = drop("key-0", {"overlay": "gre", "vni": 0})
    assert intents_of(dp, [key_0], frames) == {"no key": None, "key 0": "key-0"}
    assert intents_of(dp, [drop("gre", {"overlay": "gre"})], frames) == {"no key": "gre", "key 0": "gre"}


def test_vxlan_without_the_i_flag_has_no_vni(dp):
    inner = packets.ether(packets.ue_udp(*packets.INNER4, 1, 2))
    frames = {
        flags: bytes(packets.outer_udp(packets.vxlan(7, inner, flags=flags), dport=packets.VXLAN_PORT))
        for flags in (0x08, 0x00)
    }
    assert intents_of(dp, [drop("vni-7", {"overlay": "vxlan", "vni": 7})], frames) == {0x08: "vni-7", 0x00: None}
    assert intents_of(dp, [drop("vni-0", {"overlay": "vxlan", "vni": 0})], frames) == {0x08: None, 0x00: None}
    assert intents_of(dp, [drop("vxlan", {"overlay": "vxlan"})], frames) == {0x08: "vxlan", 0x00: "vxlan"}


@pytest.mark.parametrize(
    ("match", "expected"),
    [
        ({"teid": TEID, "qfi": 2}, "rule"),
        ({"protocol": "udp", "dst_port": packets.GTPU_PORT}, None),
        ({"dst": f"{packets.OUTER4[1]}/32"}, None),
        ({"protocol": "udp"}, None),
    ],
    ids=["tunnel-fields", "carrier-port", "carrier-address", "carrier-protocol"],
)
def test_a_t_pdu_without_an_ip_packet_is_classified_on_the_tunnel_alone(dp, match, expected):
    frame = bytes(packets.outer_gtpu(packets.gtpu(TEID, qfi=2, inner=bytes(packets.arp_frame()))))
    assert intents_of(dp, [drop("rule", match)], {"t-pdu": frame}) == {"t-pdu": expected}


def test_with_two_pdu_session_containers_the_first_one_wins(dp):
    ue = packets.ue_udp(*packets.UE4, 1, 2)
    message = packets.gtpu(TEID, qfi=5, ul=True, exts=[packets.gtp_ext_pdu_session(4)], inner=ue)
    frame = bytes(packets.outer_gtpu(message))
    assert intents_of(dp, [drop("first", {"qfi": 5})], {"f": frame}) == {"f": "first"}
    assert intents_of(dp, [drop("second", {"qfi": 4})], {"f": frame}) == {"f": None}


# Equal priorities across shapes. The tunnel frame matches every rule below.
TUNNEL = bytes(
    packets.outer_udp(
        packets.vxlan(0x445, packets.inner_gtpu_frame(packets.gtpu(TEID, inner=packets.ue_udp(
            "192.168.0.140", "10.0.0.10", 40000, 5004)))),
        dport=packets.VXLAN_PORT,
    )
)


def winner(dp, *intents: dict) -> object:
    return intents_of(dp, list(intents), {"tunnel": TUNNEL})["tunnel"]


def test_at_equal_priority_the_shape_comparing_more_fields_wins(dp):
    by_teid = drop("teid", {"teid": TEID})
    by_tunnel = drop("tunnel", {"overlay": "vxlan", "vni": 0x445, "teid": TEID})
    by_port = drop("port", {"protocol": "udp", "dst_port": 5004})
    assert winner(dp, by_teid, by_tunnel) == winner(dp, by_tunnel, by_teid) == "tunnel"
    assert winner(dp, by_teid, by_port) == "port"  # protocol, dst_port and "not a later fragment"


def test_at_equal_priority_and_as_many_fields_the_longer_prefixes_win(dp):
    src = drop("src-24", {"src": "192.168.0.0/24"})
    dst = drop("dst-8", {"dst": "10.0.0.0/8"})
    assert winner(dp, src, dst) == winner(dp, dst, src) == "src-24"


def test_at_equal_priority_a_shape_with_a_higher_priority_intent_is_searched_first(dp):
    by_teid = drop("teid", {"teid": TEID})
    other_teid = drop("other-teid", {"teid": TEID + 1}, priority=500)
    by_tunnel = drop("tunnel", {"overlay": "vxlan", "vni": 0x445, "teid": TEID})
    assert winner(dp, by_teid, by_tunnel, other_teid) == "teid"
