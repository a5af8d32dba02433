"""What the pipeline does with a classified packet, run in the kernel (BPF_PROG_TEST_RUN): every
action, the overload paths between them, priorities across rule shapes, the flow cache, counters.

The module runs inside a network namespace of its own, holding a veth pair: real ports for
REDIRECT and for forwarding out of another interface, without touching the host's interfaces.
"""

from __future__ import annotations

import os
import secrets

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from netapp.dataplane.facade import Dataplane, host_interfaces
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from netapp.forwarding.liveness import echo_request, echo_response
from netapp.testbed import netns
from tests.utils import packets
from tests.utils.checksums import checksums_valid
from tests.utils.kernel import require_kernel

CPUS = os.cpu_count() or 1
ALT_MAC, OUR_MAC = "02:00:00:00:0a:01", "02:00:00:00:00:02"
ALT_IP4, ALT_IP6 = "10.99.0.1", "2001:db8:99::1"
TEID = 0x8894D0D4


@pytest.fixture(scope="module")
def ns():
    require_kernel()
    name = f"dpp-act-{secrets.token_hex(3)}"
    netns.add_namespace(name)
    try:
        netns.run(["ip", "link", "add", "p0", "type", "veth", "peer", "name", "p1"], netns=name)
        with netns.entered(name):
            yield name
    finally:
        netns.delete_namespace(name)


def make_dataplane(document: dict, **options) -> Dataplane:
    dp = Dataplane.open(trace=True, **options)
    dp.apply_compiled(compile_document(parse_document(document), host_interfaces()))
    return dp


def site(intents: list[dict], **more) -> dict:
    """A document with every CPU enabled and group 0 = one alternative node reached by XDP_TX."""
    document = {
        "intents": intents,
        "cpus": [{"cpu": cpu} for cpu in range(CPUS)],
        "alternatives": [{"id": 0, "members": [{"mac": ALT_MAC, "ip4": ALT_IP4, "ip6": ALT_IP6}]}],
    }
    document.update(more)
    return document


def tunnel_frame(teid: int = TEID, ue_src: str = "192.168.0.140", family: int = 4) -> bytes:
    """VXLAN / GTP-U / UE UDP, sent to us (OUR_MAC) with a non-zero outer UDP checksum."""
    ue = packets.ue_udp(ue_src, "10.0.0.10", 40000, 5004)
    inner = packets.inner_gtpu_frame(packets.gtpu(teid, qfi=9, ul=True, inner=ue))
    outer = packets.outer_udp(packets.vxlan(0x445, inner), dport=4789, family=family)
    frame = Ether(bytes(outer))
    frame.dst = OUR_MAC
    (frame[IP] if family == 4 else frame[IPv6]).getlayer(UDP).chksum = None
    return bytes(frame)


def tunnel_intent(intent_id: str, action: dict, **more) -> dict:
    return {"id": intent_id, "match": {"overlay": "vxlan", "vni": 0x445, "teid": TEID},
            "action": action, **more}


@pytest.mark.parametrize(
    ("action", "verdict", "name"),
    [
        ({"type": "pass"}, "PASS", "pass"),
        ({"type": "drop"}, "DROP", "drop"),
        ({"type": "steer", "cpu": CPUS - 1}, "REDIRECT", "steer"),
        ({"type": "forward", "alternative": 0}, "TX", "forward"),
    ],
)
def test_a_matched_rule_gets_its_action(ns, action, verdict, name):
    with make_dataplane(site([tunnel_intent("rule", action)])) as dp:
        outcome = dp.test_run(tunnel_frame())
    assert (outcome.verdict, outcome.action, outcome.intent, outcome.reason) == (verdict, name, "rule", None)
    assert outcome.cpu == (CPUS - 1 if name == "steer" else None)
    assert outcome.alt_group == (0 if name == "forward" else None)


def test_forward_rewrites_mac_and_outer_ipv4_with_valid_checksums(ns):
    with make_dataplane(site([tunnel_intent("fwd", {"type": "forward", "alternative": 0})])) as dp:
        original = tunnel_frame()
        out = Ether(dp.test_run(original).data)
    assert (out.dst, out.src) == (ALT_MAC, OUR_MAC), "the old destination MAC becomes the source"
    assert out[IP].dst == ALT_IP4 and out[UDP].chksum != 0
    assert checksums_valid(bytes(out))
    assert bytes(out)[42:] == original[42:], "only the outer Ethernet/IP/UDP headers change"


def test_forward_rewrites_an_ipv6_outer_destination_and_its_udp_checksum(ns):
    with make_dataplane(site([tunnel_intent("fwd6", {"type": "forward", "alternative": 0})])) as dp:
        out = Ether(dp.test_run(tunnel_frame(family=6)).data)
    assert out[IPv6].dst == ALT_IP6
    rebuilt = Ether(bytes(out))
    del rebuilt[IPv6].getlayer(UDP).chksum
    assert Ether(bytes(rebuilt))[UDP].chksum == out[UDP].chksum


def test_forward_of_plain_tcp_keeps_the_tcp_checksum_valid(ns):
    intent = {"id": "tcp", "match": {"protocol": "tcp", "dst_port": 443},
              "action": {"type": "forward", "alternative": 0}}
    frame = bytes(Ether(dst=OUR_MAC) / IP(src="10.1.1.1", dst="10.2.2.2") / TCP(sport=1, dport=443) / (b"x" * 20))
    with make_dataplane(site([intent])) as dp:
        out = Ether(dp.test_run(frame).data)
    assert out[IP].dst == ALT_IP4 and checksums_valid(bytes(out))


def test_a_zero_udp_checksum_stays_zero(ns):
    frame = Ether(tunnel_frame())
    frame[UDP].chksum = 0
    with make_dataplane(site([tunnel_intent("fwd", {"type": "forward", "alternative": 0})])) as dp:
        out = Ether(dp.test_run(bytes(frame)).data)
    assert out[UDP].chksum == 0, "UDP over IPv4 without a checksum keeps none"


def test_redirect_and_forward_through_another_port(ns):
    p1 = host_interfaces()["p1"]
    intents = [
        {"id": "to-p1", "match": {"protocol": "tcp"}, "action": {"type": "redirect", "interface": "p1"}},
        tunnel_intent("via-p1", {"type": "forward", "alternative": 1}),
    ]
    groups = [{"id": 1, "members": [{"mac": ALT_MAC, "ip4": ALT_IP4, "interface": "p1"}]}]
    tcp = bytes(Ether(dst=OUR_MAC) / IP() / TCP())
    with make_dataplane(site(intents, alternatives=groups)) as dp:
        redirected, forwarded = dp.test_run(tcp), dp.test_run(tunnel_frame())
    assert (redirected.verdict, redirected.action, redirected.egress_ifindex) == ("REDIRECT", "redirect", p1)
    assert (forwarded.verdict, forwarded.action, forwarded.egress_ifindex) == ("REDIRECT", "forward", p1)


def test_a_redirect_to_a_port_outside_the_port_map_falls_back_unchanged(ns):
    intent = {"id": "to-p1", "match": {"protocol": "tcp"}, "action": {"type": "redirect", "interface": "p1"}}
    tcp = bytes(Ether(dst=OUR_MAC) / IP() / TCP())
    with make_dataplane(site([intent])) as dp:
        dp.remove_port(host_interfaces()["p1"])
        outcome = dp.test_run(tcp)
    assert (outcome.verdict, outcome.action, outcome.reason) == ("PASS", "default", "port_unavailable")
    assert outcome.data == tcp


def test_steering_to_a_cpu_outside_the_set_without_an_alternative_gets_the_default_verdict(ns):
    document = site([tunnel_intent("rule", {"type": "steer", "cpu": 0})], cpus=[])
    with make_dataplane(document) as dp:
        outcome = dp.test_run(tunnel_frame())
    assert (outcome.verdict, outcome.action, outcome.reason) == ("PASS", "default", "cpu_unavailable")


@pytest.mark.parametrize(
    ("intent_options", "site_options"),
    [({"alternative": 0}, {}), ({}, {"default_alternative": 0})],
    ids=["the-intents-alternative", "the-sites-default-alternative"],
)
def test_steering_to_a_cpu_outside_the_set_overflows_to_the_alternative(ns, intent_options, site_options):
    intent = tunnel_intent("rule", {"type": "steer", "cpu": 0}, **intent_options)
    with make_dataplane(site([intent], cpus=[], **site_options)) as dp:
        outcome = dp.test_run(tunnel_frame())
        reasons = dp.reason_stats()
    assert (outcome.verdict, outcome.action, outcome.reason, outcome.alt_group) == (
        "TX", "forward", "cpu_unavailable", 0)
    assert Ether(outcome.data)[IP].dst == ALT_IP4
    assert reasons["cpu_unavailable"][0] == 1 and reasons["cpu_overloaded"][0] == 0


def test_an_overloaded_target_cpu_sends_a_priority_flow_to_its_alternative(ns):
    intent = tunnel_intent("rule", {"type": "steer", "cpu": 0}, alternative=0)
    with make_dataplane(site([intent])) as dp:
        dp.set_cpu_overloaded(0, True)
        outcome = dp.test_run(tunnel_frame())
        dp.set_cpu_overloaded(0, False)
        back = dp.test_run(tunnel_frame())
    assert (outcome.verdict, outcome.action, outcome.reason, outcome.alt_group) == (
        "TX", "forward", "cpu_overloaded", 0)
    assert Ether(outcome.data)[IP].dst == ALT_IP4
    assert (back.action, back.cpu) == ("steer", 0)


def test_overflow_without_any_alternative_gets_the_default_verdict(ns):
    document = site([tunnel_intent("rule", {"type": "steer", "cpu": 0})], alternatives=[],
                    default_verdict="drop")
    with make_dataplane(document) as dp:
        dp.set_cpu_overloaded(0, True)
        outcome = dp.test_run(tunnel_frame())
        reasons = dp.reason_stats()
    assert (outcome.verdict, outcome.action, outcome.reason) == ("DROP", "default", "no_alternative")
    assert reasons["no_alternative"][0] == 1


def test_the_rate_meter_admits_the_capacity_and_overflows_the_rest(ns):
    """Capacity 1 packet/s with a 30 s window: 30 steered, then the rest overflows. The window is
    long so that a loaded machine sends every frame within it (with a 1 s window, a second passed
    once before the twelfth frame and a new window admitted it)."""
    document = site([tunnel_intent("rule", {"type": "steer", "cpu": 0}, alternative=0)],
                    cpus=[{"cpu": cpu, "capacity_pps": 1} for cpu in range(CPUS)])
    with make_dataplane(document, meter_window_ns=30 * 10**9) as dp:
        actions = [dp.test_run(tunnel_frame()).action for _ in range(37)]
    assert actions == ["steer"] * 30 + ["forward"] * 7


def test_best_effort_stays_local_unless_this_cpu_is_overloaded(ns):
    unmatched = tunnel_frame(teid=1)
    with make_dataplane(site([], default_alternative=0)) as dp:
        local = dp.test_run(unmatched)
        for cpu in range(CPUS):
            dp.set_cpu_overloaded(cpu, True)
        moved = dp.test_run(unmatched)
        dp.set_default_alternative(None)
        stuck = dp.test_run(unmatched)
    assert (local.verdict, local.action, local.intent) == ("PASS", "pass", None)
    assert (moved.verdict, moved.action, moved.reason) == ("TX", "forward", "cpu_overloaded")
    assert (stuck.verdict, stuck.action, stuck.reason) == ("PASS", "default", "no_alternative")


@pytest.mark.parametrize("message", [echo_request(7), echo_response(7)], ids=["request", "response"])
def test_gtp_u_echo_reaches_the_stack_of_an_overloaded_node(ns, message):
    """The liveness probe (netapp.forwarding.liveness) relies on it: an overloaded node's best effort
    is forwarded away, its GTP-U echo never."""
    udp = UDP(sport=2152, dport=2152) / message
    frame = bytes(Ether(dst=OUR_MAC) / IP(src="10.30.0.2", dst="10.30.0.1") / udp)
    with make_dataplane(site([], default_alternative=0)) as dp:
        for cpu in range(CPUS):
            dp.set_cpu_overloaded(cpu, True)
        outcome = dp.test_run(frame)
    assert (outcome.verdict, outcome.action, outcome.reason) == ("PASS", "pass", "gtp_signalling")


def test_a_malformed_packet_gets_the_configured_default_verdict(ns):
    with make_dataplane(site([], default_verdict="drop")) as dp:
        outcome = dp.test_run(tunnel_frame()[:40])
    assert (outcome.verdict, outcome.action, outcome.reason) == ("DROP", "default", "trunc_ipv4")


def test_the_highest_priority_wins_across_shapes_and_changes_reach_cached_flows(ns):
    """Overlapping rules of three shapes; the flow cache is on (more than one shape)."""
    broad = {"id": "broad", "priority": 10, "match": {"teid": TEID}, "action": {"type": "drop"}}
    prefix = {"id": "prefix", "priority": 20, "match": {"src": "192.168.0.0/24"}, "action": {"type": "pass"}}
    exact = tunnel_intent("exact", {"type": "steer", "cpu": 0}, priority=30)
    frame = tunnel_frame()
    with make_dataplane(site([broad, prefix, exact]), flow_cache=True) as dp:
        first = [dp.test_run(frame).intent for _ in range(3)]
        dp.apply_compiled(compile_document(parse_document(site([broad, prefix])), host_interfaces()))
        after_delete = dp.test_run(frame).intent
        raised = dict(broad, priority=40)
        dp.apply_compiled(compile_document(parse_document(site([raised, prefix])), host_interfaces()))
        after_raise = dp.test_run(frame)
    assert first == ["exact"] * 3
    assert after_delete == "prefix"
    assert (after_raise.intent, after_raise.verdict) == ("broad", "DROP")


def test_lookup_finds_the_right_rule_among_thousands(ns):
    intents = [{"id": f"t{i}", "match": {"teid": 0x1000 + i}, "action": {"type": "drop"}} for i in range(2000)]
    intents += [{"id": f"s{i}", "match": {"src": f"172.16.{i // 256}.{i % 256}"}, "action": {"type": "pass"}}
                for i in range(2000)]
    with make_dataplane(site(intents)) as dp:
        hits = [dp.test_run(tunnel_frame(teid=0x1000 + i)).intent for i in (0, 777, 1999)]
        by_src = dp.test_run(tunnel_frame(teid=1, ue_src="172.16.3.7")).intent
    assert hits == ["t0", "t777", "t1999"]
    assert by_src == "s775"


def test_a_flow_always_forwards_to_the_same_member_and_flows_spread(ns):
    members = [{"mac": f"02:00:00:00:0b:0{i}", "ip4": f"10.99.0.{i}"} for i in range(1, 4)]
    document = site([{"id": "all", "match": {"overlay": "vxlan"}, "action": {"type": "forward", "alternative": 0}}],
                    alternatives=[{"id": 0, "members": members}])
    with make_dataplane(document) as dp:
        per_flow = {src: {dp.test_run(tunnel_frame(ue_src=src)).alt_member for _ in range(3)}
                    for src in (f"192.168.1.{i}" for i in range(1, 40))}
    assert all(len(chosen) == 1 for chosen in per_flow.values())
    assert {member for chosen in per_flow.values() for member in chosen} == {0, 1, 2}


def test_counters_agree_with_the_packets_run(ns):
    intents = [tunnel_intent("steered", {"type": "steer", "cpu": 0}),
               {"id": "dropped", "match": {"protocol": "tcp"}, "action": {"type": "drop"}}]
    tcp = bytes(Ether(dst=OUR_MAC) / IP() / TCP())
    with make_dataplane(site(intents)) as dp:
        for _ in range(7):
            dp.test_run(tunnel_frame())
        for _ in range(3):
            dp.test_run(tcp)
        rules, actions, verdicts = dp.rule_stats(), dp.action_stats(), dp.verdict_stats()
    assert rules["steered"] == (7, 7 * len(tunnel_frame())) and rules["dropped"] == (3, 3 * len(tcp))
    assert (actions["steer"][0], actions["drop"][0]) == (7, 3)
    assert (verdicts["REDIRECT"][0], verdicts["DROP"][0]) == (7, 3)


def test_cpu_counters_count_what_steer_handed_over_and_not_the_overflow(ns):
    target = CPUS - 1
    frame = tunnel_frame()
    with make_dataplane(site([tunnel_intent("rule", {"type": "steer", "cpu": target}, alternative=0)])) as dp:
        steered = [dp.test_run(frame).action for _ in range(5)]
        dp.set_cpu_overloaded(target, True)
        overflowed = [dp.test_run(frame).action for _ in range(4)]
        cpus = dp.cpu_stats()
    assert (steered, overflowed) == (["steer"] * 5, ["forward"] * 4)
    assert cpus[target] == (5, 5 * len(frame))
    assert set(cpus) == set(range(CPUS)), "every CPU of the set, steered to or not"
    assert all(counter == (0, 0) for cpu, counter in cpus.items() if cpu != target)
