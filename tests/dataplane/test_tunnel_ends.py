"""Rules on a GTP-U tunnel's addresses (match.tunnel_src / tunnel_dst), run in the kernel
(BPF_PROG_TEST_RUN): the addresses of the IP header carrying GTP-U, IPv4 (the N3 fast path) and IPv6
(the staged parser), inside VXLAN too; other addresses, and packets without GTP-U, are not matched; ids
given, freed and given again as dataplane/bpf/core/ends.h and netapp.dataplane.tunnel_ends say."""

from __future__ import annotations

import ipaddress

import pytest

from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from tests.utils import packets
from tests.utils.dataplane import run, traced_dataplane
from tests.utils.intents import INTERFACES

TEID = 0x1234
GNB4, UPF4 = packets.OUTER4  # the IPv4 tunnel: its source (the gNB) and destination (us)
GNB6, UPF6 = packets.OUTER6
OTHER_GNB4, OTHER_GNB6 = "192.0.2.99", "2001:db8::99"


def gtpu_frame(src: str, dst: str, family: int = 4) -> bytes:
    """Ethernet / IP src -> dst / UDP 2152 / GTP-U with a container / UE UDP."""
    ue = packets.ue_udp("10.60.0.1", "10.0.0.10", 40000, 5004)
    message = packets.gtpu(TEID, qfi=9, ul=True, inner=ue)
    return bytes(packets.outer_udp(message, dport=2152, sport=2152, family=family, src=src, dst=dst))


def vxlan_gtpu_frame(tunnel_src: str) -> bytes:
    """GTP-U from tunnel_src inside VXLAN between the outer addresses (GNB4 -> UPF4)."""
    ue = packets.ue_udp("10.60.0.1", "10.0.0.10", 40000, 5004)
    gtp = packets.udp(packets.gtpu(TEID, inner=ue), sport=2152, dport=2152)
    inner = packets.ether(packets.ip_packet(gtp, src=tunnel_src, dst=packets.INNER4[1]))
    return bytes(packets.outer_udp(packets.vxlan(0x445, inner), dport=4789, src=GNB4, dst=UPF4))


def document(*matches: dict) -> dict:
    intents = [{"id": f"t{n}", "match": match, "action": {"type": "drop"}} for n, match in enumerate(matches)]
    return {"intents": intents}


def apply(dp, *matches: dict) -> None:
    dp.apply_compiled(compile_document(parse_document(document(*matches)), INTERFACES))


@pytest.fixture(scope="module")
def loaded():
    """One instance for the module (loading verifies the programs: seconds on a loaded machine)."""
    handle = traced_dataplane()
    yield handle
    handle.close()


@pytest.fixture
def dp(loaded):
    """The module's instance with no rule and no tunnel address, as a new one has; emptied again after."""
    assert list(loaded.table("dpp_rules").items()) == [], "an earlier test's rules were left"
    assert dict(loaded.table("dpp_tunnel_ends").items()) == {} and not loaded.tunnel_ends.addresses
    assert loaded.table("dpp_config").get(0).tunnel_ends == 0
    try:
        yield loaded
    finally:
        apply(loaded)


@pytest.mark.parametrize(
    ("family", "gnb", "upf", "other"), [(4, GNB4, UPF4, OTHER_GNB4), (6, GNB6, UPF6, OTHER_GNB6)], ids=["ipv4", "ipv6"]
)
def test_a_rule_on_the_tunnel_source_matches_gtpu_from_it_only(dp, family, gnb, upf, other):
    apply(dp, {"tunnel_src": gnb})

    named = run(dp, gtpu_frame(gnb, upf, family))
    unnamed = run(dp, gtpu_frame(other, upf, family))

    assert (named.intent, named.verdict) == ("t0", "DROP")
    assert named.key["tunnel_src"] != 0 and named.key["tunnel_dst"] == 0
    assert unnamed.intent is None and unnamed.key["tunnel_src"] == 0


@pytest.mark.parametrize(("family", "gnb", "upf"), [(4, GNB4, UPF4), (6, GNB6, UPF6)], ids=["ipv4", "ipv6"])
def test_a_rule_on_the_tunnel_destination_matches_gtpu_to_it_only(dp, family, gnb, upf):
    apply(dp, {"tunnel_dst": upf})

    assert run(dp, gtpu_frame(gnb, upf, family)).intent == "t0"
    assert run(dp, gtpu_frame(upf, gnb, family)).intent is None  # the reverse direction


def test_the_fast_path_and_the_staged_parser_give_the_same_ids(dp):
    apply(dp, {"tunnel_src": GNB4, "tunnel_dst": UPF4})
    fast = run(dp, gtpu_frame(GNB4, UPF4))
    # An IPv4 option sends the same tunnel to the staged parser.
    staged_frame = packets.ether(
        packets.ipv4(packets.udp(packets.gtpu(TEID, inner=packets.ue_udp("10.60.0.1", "10.0.0.10", 1, 2)),
                                 sport=2152, dport=2152), src=GNB4, dst=UPF4, options=b"\x01\x01\x01\x01")
    )
    staged = run(dp, bytes(staged_frame))

    assert (fast.fast_path, staged.fast_path) == (True, False)
    assert fast.intent == staged.intent == "t0"
    assert (fast.key["tunnel_src"], fast.key["tunnel_dst"]) == (staged.key["tunnel_src"], staged.key["tunnel_dst"])


def test_inside_vxlan_the_tunnel_is_the_inner_ip_header_carrying_gtpu(dp):
    apply(dp, {"tunnel_src": packets.INNER4[0]})

    assert run(dp, vxlan_gtpu_frame(packets.INNER4[0])).intent == "t0"
    assert run(dp, vxlan_gtpu_frame("172.16.9.9")).intent is None


def test_packets_without_gtpu_from_a_named_address_are_not_matched(dp):
    apply(dp, {"tunnel_src": GNB4})
    plain = packets.outer_udp(b"not gtp", dport=5004, src=GNB4, dst=UPF4)

    outcome = run(dp, bytes(plain))

    assert outcome.intent is None
    assert (outcome.key["tunnel_src"], outcome.key["tunnel_dst"]) == (0, 0)


def test_an_address_leaves_the_map_with_its_last_rule_and_lookups_stop(dp):
    apply(dp, {"tunnel_src": GNB4}, {"tunnel_src": GNB4, "teid": TEID})
    assert dp.tunnel_ends.addresses.keys() == {ipaddress.ip_address(GNB4)}

    apply(dp, {"tunnel_src": GNB4})
    assert dp.tunnel_ends.addresses.keys() == {ipaddress.ip_address(GNB4)}
    apply(dp, {"teid": TEID})
    outcome = run(dp, gtpu_frame(GNB4, UPF4))

    assert dict(dp.table("dpp_tunnel_ends").items()) == {}
    assert dp.table("dpp_config").get(0).tunnel_ends == 0
    assert outcome.key["tunnel_src"] == 0 and outcome.intent == "t0"


def test_a_freed_id_is_given_again_only_after_the_other_free_ones(dp):
    apply(dp, {"tunnel_src": GNB4})
    first = dp.tunnel_ends.addresses[ipaddress.ip_address(GNB4)]

    apply(dp, {"tunnel_src": OTHER_GNB4})
    second = dp.tunnel_ends.addresses[ipaddress.ip_address(OTHER_GNB4)]

    assert second != first
    assert run(dp, gtpu_frame(GNB4, UPF4)).intent is None
    assert run(dp, gtpu_frame(OTHER_GNB4, UPF4)).intent == "t0"


def test_a_restarted_writer_keeps_the_ids_the_map_holds(dp):
    apply(dp, {"tunnel_src": GNB4}, {"tunnel_dst": UPF6})
    before = dp.tunnel_ends.addresses

    dp.resync()
    apply(dp, {"tunnel_src": GNB4}, {"tunnel_dst": UPF6})

    assert dp.tunnel_ends.addresses == before
    assert run(dp, gtpu_frame(GNB6, UPF6, 6)).intent == "t1"
