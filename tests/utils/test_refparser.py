"""Tests of the reference parser: the hand-written CASES table, truncation of a nested VXLAN +
GTP-U packet at every byte, its constants against dpp_consts.h, and properties over generated and
damaged packets.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netapp.dataplane.binding import Reason

from . import packets as pk
from . import refparser as rp
from . import strategies as gen
from .refparser import (
    KEY_FIELDS, KEY_FRAGMENT, KEY_GTP, KEY_GTP_QFI, KEY_GTP_UL, KEY_VNI, REASON_CODES, parse,
)  # fmt: skip

DPP_CONSTS = Path(__file__).resolve().parents[2] / "dataplane" / "include" / "dpp" / "core" / "consts.h"

# Packet generation goes through scapy: slow per example, but never flaky.
property_settings = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# Width of the numeric key fields that do not fill their C type (vlan, qfi, dscp) or do.
FIELD_BITS = {"vni": 32, "teid": 32, "vlan": 12, "qfi": 6, "proto": 8, "dscp": 6, "sport": 16, "dport": 16}


def as_expected(result) -> dict:
    """A parse result in the shape of the CASES expectations."""
    status, value = result
    return {"reason": None, **value} if status == "ok" else {"reason": value}


def assert_well_formed(result) -> None:
    """A reason from the enum, or a key whose fields fit struct dpp_flow_key and agree with each
    other.
    """
    status, value = result
    assert status in ("ok", "reason")
    if status == "reason":
        assert value in REASON_CODES
        return
    key = value
    assert tuple(key) == KEY_FIELDS
    assert key["ifindex"] == 0
    assert key["family"] in (4, 6) or (key["family"] == 0 and key["flags"] & KEY_GTP)  # IP, or a T-PDU
    assert len(key["src"]) == len(key["dst"]) == 16
    if key["family"] == 4:
        assert key["src"][4:] == key["dst"][4:] == bytes(12)
    for name, bits in FIELD_BITS.items():
        assert 0 <= key[name] < 1 << bits, name
    assert key["overlay"] in (0, 1, 2, 3)
    assert key["flags"] & ~(KEY_GTP | KEY_GTP_QFI | KEY_GTP_UL | KEY_FRAGMENT | KEY_VNI) == 0
    if key["flags"] & (KEY_GTP_QFI | KEY_GTP_UL) or key["teid"]:
        assert key["flags"] & KEY_GTP
    if key["flags"] & KEY_GTP_UL or key["qfi"]:
        assert key["flags"] & KEY_GTP_QFI
    if key["flags"] & KEY_FRAGMENT:
        assert key["sport"] == key["dport"] == 0
    if key["overlay"] == 0:
        assert key["vni"] == 0 and not key["flags"] & KEY_VNI
    if key["vni"]:
        assert key["flags"] & KEY_VNI


# ---------------------------------------------------------------------------------------------
# The case table


@pytest.mark.parametrize("name", sorted(pk.CASES))
def test_case_table(name):
    frame, expected = pk.CASES[name]

    assert as_expected(parse(frame)) == expected


def test_case_table_covers_every_parse_reason():
    reasons = {expected["reason"] for _, expected in pk.CASES.values()}

    assert set(REASON_CODES) <= reasons


def header_values(header: str, prefix: str) -> dict[str, int]:
    """NAME -> value of the enumerators and #defines of dpp_consts.h whose name starts with prefix."""
    pattern = rf"\b{prefix}(\w+)\s*=\s*(\d+)|#define {prefix}(\w+) (\d+)"
    return {
        enum or define: int(e_value or d_value)
        for enum, e_value, define, d_value in re.findall(pattern, header)
    }


def test_constants_match_dpp_consts_header():
    header = DPP_CONSTS.read_text()
    limits = header_values(header, "DPP_MAX_")
    ports = header_values(header, "DPP_PORT_")

    # The reasons come from X-macro lists (dpp/reasons.h); their mirror is checked against BTF.
    assert {name: int(Reason[name.upper()]) for name in REASON_CODES} == REASON_CODES
    parser_flags = dict(
        GTP=rp.KEY_GTP, GTP_QFI=rp.KEY_GTP_QFI, GTP_UL=rp.KEY_GTP_UL, FRAGMENT=rp.KEY_FRAGMENT, VNI=rp.KEY_VNI
    )  # the parser's flags; the header has others that functions set (DPP_KEY_UPF)
    key_flags = header_values(header, "DPP_KEY_")
    assert {name: key_flags.get(name) for name in parser_flags} == parser_flags
    assert header_values(header, "DPP_OVERLAY_") == dict(
        NONE=rp.OVERLAY_NONE, VXLAN=rp.OVERLAY_VXLAN, GENEVE=rp.OVERLAY_GENEVE, GRE=rp.OVERLAY_GRE
    )
    assert (limits["VLAN_TAGS"], limits["IPV6_EXT_HDRS"], limits["GTP_EXT_HDRS"]) == (
        rp.MAX_VLAN_TAGS, rp.MAX_IPV6_EXT_HDRS, rp.MAX_GTP_EXT_HDRS,
    )  # fmt: skip
    assert (ports["VXLAN"], ports["GENEVE"], ports["GTPU"]) == (rp.PORT_VXLAN, rp.PORT_GENEVE, rp.PORT_GTPU)


# ---------------------------------------------------------------------------------------------
# Truncation of a nested VXLAN + GTP-U packet

VNI, TEID = 0x00BEEF, 0x0A0B0C0D
UE_PAYLOAD = b"payload"

# The nested packet as wrappers, outermost first: each wraps the bytes inside it, and names the
# reason a cut inside its own header must give when every enclosing length is consistent.
NESTED_LAYERS = (
    ("outer eth/vlan/ipv4/udp", lambda inner: pk.outer_udp(inner, dport=pk.VXLAN_PORT, vlans=(10,)), None),
    ("vxlan", lambda inner: pk.vxlan(VNI, inner), "trunc_vxlan"),
    ("inner ethernet + vlan", lambda inner: pk.ether(inner, ethertype=pk.ETH_P_IP, vlans=(20,)), "trunc_eth"),
    ("inner ipv4", lambda inner: pk.ipv4(inner, src=pk.INNER4[0], dst=pk.INNER4[1], proto=17), "trunc_ipv4"),
    ("inner udp", lambda inner: pk.udp(inner, sport=pk.GTPU_PORT, dport=pk.GTPU_PORT), "trunc_l4"),
    (
        "gtp-u",
        lambda inner: pk.gtpu(TEID, qfi=9, ul=True, exts=[pk.gtp_ext_pdcp_number(3)], inner=inner),
        "trunc_gtp",
    ),
    ("ue ipv6", lambda inner: pk.ipv6(inner, src=pk.UE6[0], dst=pk.UE6[1], nh=17, dscp=18), "trunc_ipv6"),
    ("ue udp", lambda inner: pk.udp(inner, sport=33000, dport=8805), "trunc_l4"),
)


def build_nested(first_layer: int, innermost: bytes) -> bytes:
    """NESTED_LAYERS from first_layer inwards, wrapped around innermost."""
    packet = innermost
    for _, wrap, _ in reversed(NESTED_LAYERS[first_layer:]):
        packet = wrap(packet)
    return bytes(packet)


def expected_reason_for_cut(layer: int, cut: int) -> str:
    name, _, reason = NESTED_LAYERS[layer]
    if name == "inner ethernet + vlan" and cut >= 14:
        return "trunc_vlan"
    if name == "ue ipv6" and cut == 0:
        return "trunc_gtp"  # an empty T-PDU (refparser decision 16)
    return reason


def test_nested_vxlan_gtpu_packet_parses():
    frame = build_nested(0, UE_PAYLOAD)

    assert parse(frame) == (
        "ok",
        dict(
            ifindex=0, vni=VNI, teid=TEID, vlan=10, overlay=pk.OVERLAY_VXLAN, qfi=9,
            flags=KEY_VNI | KEY_GTP | KEY_GTP_QFI | KEY_GTP_UL, family=6, proto=17, dscp=18,
            sport=33000, dport=8805,
            src=pk.addr16(pk.UE6[0]), dst=pk.addr16(pk.UE6[1]),
        ),
    )  # fmt: skip


def test_nested_vxlan_gtpu_cut_at_every_offset_is_a_truncation():
    frame = build_nested(0, UE_PAYLOAD)
    for cut in range(len(frame)):
        # Ethernet, then the outer VLAN tag, then IPv4: its header, or past it its total length,
        # which overruns the cut frame (refparser decision 1).
        expected = "trunc_eth" if cut < 14 else "trunc_vlan" if cut < 18 else "trunc_ipv4"

        assert parse(frame[:cut]) == ("reason", expected), f"cut at {cut}"


def header_length(layer: int) -> int:
    _, wrap, _ = NESTED_LAYERS[layer]
    return len(bytes(wrap(b"")))


def wrap_outside(layer: int, cut_bytes: bytes) -> bytes:
    """The layers outside layer, wrapped around cut_bytes: their lengths are computed from it."""
    packet = pk.Raw(load=cut_bytes)
    for _, wrap, _ in reversed(NESTED_LAYERS[:layer]):
        packet = wrap(packet)
    return bytes(packet)


@pytest.mark.parametrize(
    "layer", range(1, len(NESTED_LAYERS)), ids=[name for name, _, _ in NESTED_LAYERS[1:]]
)
def test_nested_cut_inside_a_header_with_consistent_lengths_names_that_header(layer):
    inside = build_nested(layer, UE_PAYLOAD)
    for cut in range(header_length(layer)):
        result = parse(wrap_outside(layer, inside[:cut]))

        assert result == ("reason", expected_reason_for_cut(layer, cut)), (
            f"cut {cut} bytes into {NESTED_LAYERS[layer][0]}"
        )


# ---------------------------------------------------------------------------------------------
# Properties


@property_settings
@given(st.binary(max_size=300))
def test_any_bytes_give_a_reason_or_a_well_formed_key(frame):
    assert_well_formed(parse(frame))


@property_settings
@given(gen.valid_packets())
def test_valid_packets_give_the_key_they_were_built_with(packet):
    assert parse(packet.frame) == ("ok", packet.expected_key)


@property_settings
@given(gen.valid_packets(), st.data())
def test_every_strict_prefix_of_a_valid_packet_is_a_truncation(packet, data):
    cut = data.draw(gen.cut_points(packet), label="cut")

    status, reason = parse(packet.frame[:cut])

    assert status == "reason" and reason.startswith("trunc_")


@property_settings
@given(gen.valid_packets(), st.data())
def test_a_consistent_cut_truncates_or_only_loses_payload(packet, data):
    cut = data.draw(gen.cut_points(packet), label="cut")

    result = parse(gen.cut_consistently(packet.frame, cut, packet.length_fields))

    # Either the cut went through a header, or only through bytes no header needs: same key.
    assert result == ("ok", packet.expected_key) or (result[0] == "reason" and result[1].startswith("trunc_"))


@property_settings
@given(gen.mutated_frames())
def test_mutated_packets_give_a_reason_or_a_well_formed_key(frame):
    assert_well_formed(parse(frame))
