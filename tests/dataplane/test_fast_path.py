"""The per-packet hot path, run in the kernel (BPF_PROG_TEST_RUN): the N3 fast parser (core/n3.h,
parse_n3) and the direct-mapped flow cache it feeds (classify.h).

Frames of either N3 layout (GTP-U in VXLAN, and plain GTP-U as a gNB sends it; the UE packet IPv4, or
IPv6 without extension headers), and of the plain layout (core/plain.h: Ethernet / IPv4 / UDP, TCP or
SCTP, no tunnel), must be parsed by the fast path (the trace's fast_path says so) into exactly
the key the reference parser gives, and with the outer-header offsets FORWARD rewrites at. Near
misses must fall back to the staged parser and still be parsed right. The flow cache must never
hand a flow another flow's rule, even when every flow shares one slot.
"""

from __future__ import annotations

import ctypes
import errno
import struct
from pathlib import Path

import pytest

from netapp.dataplane.binding import DataplaneError, DppHandle, FlowEntry, load_libdpp, possible_cpus
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from tests.utils import packets, refparser
from tests.utils.checksums import checksums_valid
from tests.utils.dataplane import reference_key, run, traced_dataplane
from tests.utils.intents import INTERFACES
from tests.utils.kernel import require_kernel

LOOPBACK_IFINDEX = 1  # a frame run without an ingress ifindex arrives on loopback
VNI, TEID, QFI = 0x445, 0x8894D0D4, 9
UE4 = ("10.60.0.1", "10.200.0.10")
UE6 = ("2001:db8:60::1", "2001:db8:200::10")
IP_OPTION_NOPS = b"\x01\x01\x01\x01"  # four NOPs: IHL 6
# Byte offsets in the frames below (untagged, no IP options): outer IPv4, inner IPv4, GTP-U, UE IPv4.
OUTER_IP, INNER_IP, GTP, UE_IP_PSC = 14, 64, 92, 108
OUTER_UDP, VXLAN, INNER_UDP = 34, 42, 84
# The same in plain N3 frames (GTP-U right in the outer IPv4): GTP-U, UE IPv4 after a container.
PLAIN_GTP, PLAIN_UE_IP_PSC = 42, 58
TOT_LEN = 2  # within an IPv4 header
PAYLOAD_LEN = 4  # within an IPv6 header
UDP_LEN = 4  # within a UDP header


@pytest.fixture(scope="module")
def dp():
    dataplane = traced_dataplane()
    yield dataplane
    dataplane.close()


# --- frames ----------------------------------------------------------------------------------------


def n3_frame(
    ue=None,
    *,
    qfi: int | None = QFI,
    ul: bool = True,
    exts=(),
    seq: int | None = None,
    npdu: int | None = None,
    flags: int | None = None,
    gtp=None,
    vlans=(),
    inner_vlans=(),
    outer_options: bytes = b"",
    inner_options: bytes = b"",
    outer_frag: int = 0,
    inner_frag: int = 0,
    vxlan_port: int = packets.VXLAN_PORT,
    gtp_port: int = packets.GTPU_PORT,
) -> bytes:
    """Ethernet / IPv4 / UDP / VXLAN / Ethernet / IPv4 / UDP / GTP-U / ue, every layer adjustable."""
    if gtp is None:
        gtp = gtp_message(ue, qfi=qfi, ul=ul, exts=exts, seq=seq, npdu=npdu, flags=flags)
    inner_udp = packets.udp(gtp, sport=packets.GTPU_PORT, dport=gtp_port)
    inner_ip = packets.ipv4(
        inner_udp, src=packets.INNER4[0], dst=packets.INNER4[1], options=inner_options, frag_offset=inner_frag
    )
    overlay = packets.vxlan(VNI, packets.ether(inner_ip, vlans=inner_vlans))
    outer_ip = packets.ipv4(
        packets.udp(overlay, dport=vxlan_port), options=outer_options, frag_offset=outer_frag
    )
    return bytes(packets.ether(outer_ip, vlans=vlans))


def plain_frame(
    ue=None,
    *,
    vlans=(),
    outer_options: bytes = b"",
    outer_frag: int = 0,
    gtp_port: int = packets.GTPU_PORT,
    **gtp_options,
) -> bytes:
    """Ethernet / IPv4 / UDP / GTP-U / ue, as a gNB sends it; GTP-U as n3_frame's options say."""
    gtp = gtp_options.pop("gtp", None) or gtp_message(ue, **gtp_options)
    outer_ip = packets.ipv4(
        packets.udp(gtp, sport=packets.GTPU_PORT, dport=gtp_port), options=outer_options, frag_offset=outer_frag
    )
    return bytes(packets.ether(outer_ip, vlans=vlans))


def gtp_message(ue=None, *, qfi: int | None = QFI, ul: bool = True, exts=(), **options) -> object:
    """A GTP-U T-PDU carrying ue (a UE UDP datagram by default)."""
    if ue is None:
        ue = packets.ue_udp(*UE4, 40000, 5004)
    return packets.gtpu(TEID, qfi, ul=ul, exts=exts, inner=ue, **options)


def n6_frame(ip=None, *, vlans=()) -> bytes:
    """Ethernet / ip (a UE's server answering it, by default): what N6 receives."""
    if ip is None:
        ip = packets.ue_udp(UE4[1], UE4[0], 5004, 40000)
    return bytes(packets.ether(ip, vlans=vlans))


def ue_udp(**options) -> object:
    return packets.ue_udp(*UE4, options.pop("sport", 40000), options.pop("dport", 5004), **options)


def ue_tcp(**options) -> object:
    return packets.ue_tcp(*UE4, options.pop("sport", 40001), options.pop("dport", 443), **options)


def with_tot_len_plus_one(frame: bytes, ip_offset: int) -> bytes:
    return with_length_changed(frame, ip_offset + TOT_LEN, 1)


def with_length_changed(frame: bytes, field_offset: int, delta: int) -> bytes:
    (length,) = struct.unpack_from("!H", frame, field_offset)
    return packets.patched(frame, field_offset, struct.pack("!H", length + delta))


def ue_sctp(**options) -> object:
    common = packets.sctp(options.pop("sport", 38412), options.pop("dport", 3868))
    return packets.ipv4(common + options.pop("payload", b""), src=UE4[0], dst=UE4[1], proto=132, **options)


def ue6_udp(**options) -> object:
    return packets.ue_udp(*UE6, options.pop("sport", 40000), options.pop("dport", 5004), **options)


def ue6_tcp(**options) -> object:
    return packets.ue_tcp(*UE6, options.pop("sport", 40001), options.pop("dport", 443), **options)


def ue6(payload, **options) -> object:
    """A UE IPv6 header (extension headers as options say) before payload."""
    return packets.ipv6(payload, src=UE6[0], dst=UE6[1], **options)


def ue6_sctp() -> object:
    return ue6(packets.Raw(load=packets.sctp(38412, 3868)), nh=132)


def with_flow_label(ue: object, label: int) -> bytes:
    raw = bytearray(bytes(ue))
    raw[1] = (raw[1] & 0xF0) | (label >> 16)
    raw[2:4] = (label & 0xFFFF).to_bytes(2, "big")
    return packets.Raw(load=bytes(raw))


# Frames of the fast path's layout: UE UDP and TCP, with and without the PDU Session Container, UL
# and DL, DSCP set, different ports, S/PN beside E, padding after the datagram.
FAST = {
    "udp-psc-ul": n3_frame(),
    "udp-psc-dl": n3_frame(ul=False),
    "udp-psc-dl-rqi-qfi-63": n3_frame(gtp=packets.gtpu(TEID, inner=ue_udp(), exts=[
        packets.gtp_ext_pdu_session(63, rqi=True)])),
    "udp-no-extension": n3_frame(qfi=None),
    "udp-dscp-46": n3_frame(ue_udp(dscp=46)),
    "udp-other-ports": n3_frame(ue_udp(sport=53, dport=65535)),
    "udp-psc-with-seq-and-npdu": n3_frame(seq=0x1234, npdu=7),
    "udp-empty-payload-psc": n3_frame(ue_udp(payload=b"")),
    "udp-ue-first-fragment": n3_frame(packets.ipv4(packets.udp(b"x" * 16, sport=1, dport=2), src=UE4[0],
                                                   dst=UE4[1], more_fragments=True)),
    "tcp-psc-ul": n3_frame(ue_tcp()),
    "tcp-psc-dl": n3_frame(ue_tcp(), ul=False),
    "tcp-no-extension": n3_frame(ue_tcp(), qfi=None),
    "tcp-dscp-10-other-ports": n3_frame(ue_tcp(dscp=10, sport=12345, dport=8080)),
    "tcp-ethernet-padding": n3_frame(ue_tcp()) + bytes(18),
    "sctp-psc-ul": n3_frame(ue_sctp()),
    "sctp-no-extension-with-chunk": n3_frame(ue_sctp(payload=bytes(16)), qfi=None),
    "udp-psc-ethernet-padding-that-looks-like-headers": n3_frame() + n3_frame()[:60],
    "plain-udp-psc-ul": plain_frame(),
    "plain-udp-psc-dl": plain_frame(ul=False),
    "plain-udp-no-extension": plain_frame(qfi=None),
    "plain-udp-psc-with-seq-and-npdu": plain_frame(seq=0x1234, npdu=7),
    "plain-udp-empty-payload-psc": plain_frame(ue_udp(payload=b"")),
    "plain-tcp-psc-ul": plain_frame(ue_tcp()),
    "plain-tcp-no-extension-dscp-10": plain_frame(ue_tcp(dscp=10), qfi=None),
    "plain-tcp-ethernet-padding": plain_frame(ue_tcp()) + bytes(18),
    "plain-sctp-psc-ul": plain_frame(ue_sctp()),
    "plain-udp-psc-ethernet-padding-that-looks-like-headers": plain_frame() + plain_frame()[:60],
    "ue6-udp-psc-ul": n3_frame(ue6_udp()),
    "ue6-udp-psc-dl": n3_frame(ue6_udp(), ul=False),
    "ue6-udp-no-extension": n3_frame(ue6_udp(), qfi=None),
    "ue6-udp-traffic-class-46-flow-label": n3_frame(with_flow_label(ue6_udp(dscp=46), 0xABCDE)),
    "ue6-udp-empty-payload-with-seq-and-npdu": n3_frame(ue6_udp(payload=b""), seq=0x1234, npdu=7),
    "ue6-tcp-psc-ul": n3_frame(ue6_tcp()),
    "ue6-tcp-ethernet-padding": n3_frame(ue6_tcp()) + bytes(18),
    "ue6-sctp-psc-ul": n3_frame(ue6_sctp()),
    "plain-ue6-udp-psc-ul": plain_frame(ue6_udp()),
    "plain-ue6-udp-no-extension": plain_frame(ue6_udp(), qfi=None),
    "plain-ue6-tcp-dscp-10-other-ports": plain_frame(ue6_tcp(dscp=10, sport=12345, dport=8080), ul=False),
    "plain-ue6-sctp-psc-ul": plain_frame(ue6_sctp()),
    "plain-ue6-udp-psc-ethernet-padding-that-looks-like-headers": plain_frame(ue6_udp()) + plain_frame()[:60],
    "n6-udp": n6_frame(),
    "n6-udp-empty-dscp-46": n6_frame(ue_udp(payload=b"", dscp=46)),
    "n6-udp-from-the-gtpu-port": n6_frame(ue_udp(sport=2152, dport=9)),
    "n6-tcp": n6_frame(ue_tcp()),
    "n6-tcp-ethernet-padding": n6_frame(ue_tcp()) + bytes(18),
    "n6-sctp": n6_frame(ue_sctp()),
    # Off the N3 layouts by their UDP port alone: plain UDP to another port, the plain layout's.
    "not-vxlan-port": n3_frame(vxlan_port=4790),
    "plain-not-gtpu-port": plain_frame(gtp_port=2153),
    "n6-udp-first-fragment": n6_frame(packets.ipv4(packets.udp(b"x" * 16, sport=1, dport=2), src=UE4[0],
                                                   dst=UE4[1], more_fragments=True)),
}

_minimal_psc = n3_frame(ue_udp(payload=b""))
_minimal_plain = plain_frame(ue_udp(payload=b""))


def decoy_extension() -> packets.GtpExtension:
    """A RAN Container whose length octet reads as 0x45 and whose content reads as an IPv4/UDP header:
    a parser that took the container for the last extension would see a plausible UE packet."""
    decoy = bytes(packets.ue_udp("10.99.99.99", "10.99.99.98", 7, 7, payload=b""))
    content = decoy[1:].ljust(0x45 * 4 - 2, b"\0")
    return packets.gtp_ext_ran_container(content)

_minimal_ue6 = n3_frame(ue6_udp(payload=b""))
_minimal_plain_ue6 = plain_frame(ue6_udp(payload=b""))
_udp6 = packets.udp(b"ue", sport=40000, dport=5004)
# A UE IPv6 packet one step off the fast path's: extension headers (each, and a fragment's two
# kinds), an L4 protocol it leaves to the staged parser, lengths that do not cover the L4 header or
# end beyond what carries them, headers cut short.
UE6_FALLBACK = {
    f"{layout}-ue6-{name}": frame_of(ue)
    for layout, frame_of in (("vxlan", n3_frame), ("plain", plain_frame))
    for name, ue in {
        "hop-by-hop": ue6(_udp6, ext_headers=[packets.ipv6_hop_by_hop()]),
        "routing": ue6(_udp6, ext_headers=[packets.ipv6_routing()]),
        "destination-options": ue6(_udp6, ext_headers=[packets.ipv6_dest_opts()]),
        "first-fragment": ue6(_udp6, ext_headers=[packets.ipv6_fragment(more=True)]),
        "later-fragment": ue6(b"x" * 16, nh=17, ext_headers=[packets.ipv6_fragment(offset=2)]),
        "auth-header": ue6(_udp6, ext_headers=[packets.ipv6_auth()]),
        "icmpv6": packets.ue_icmp(*UE6),
        "tcp-header-cut-short": ue6(packets.Raw(load=bytes(19)), nh=6),
        "udp-header-cut-short": ue6(packets.Raw(load=bytes(7)), nh=17),
        "no-next-header": ue6(packets.Raw(load=bytes(8)), nh=59),
    }.items()
} | {
    "vxlan-ue6-payload-length-one-too-big": with_length_changed(_minimal_ue6, UE_IP_PSC + PAYLOAD_LEN, 1),
    "vxlan-ue6-payload-length-one-too-small": with_length_changed(_minimal_ue6, UE_IP_PSC + PAYLOAD_LEN, -1),
    "vxlan-ue6-payload-length-zero": packets.patched(_minimal_ue6, UE_IP_PSC + PAYLOAD_LEN, b"\0\0"),
    "vxlan-ue6-inner-udp-length-one-too-small": with_length_changed(_minimal_ue6, INNER_UDP + UDP_LEN, -1),
    "vxlan-ue6-truncated-by-one-byte": _minimal_ue6[:-1],
    "vxlan-ue6-header-cut-short": _minimal_ue6[: UE_IP_PSC + 39],
    "vxlan-ue-version-5": packets.patched(_minimal_ue6, UE_IP_PSC, b"\x50"),
    "plain-ue6-payload-length-one-too-big": with_length_changed(
        _minimal_plain_ue6, PLAIN_UE_IP_PSC + PAYLOAD_LEN, 1),
    "plain-ue6-payload-length-one-too-small": with_length_changed(
        _minimal_plain_ue6, PLAIN_UE_IP_PSC + PAYLOAD_LEN, -1),
    "plain-ue6-outer-total-length-one-too-small": with_length_changed(_minimal_plain_ue6, OUTER_IP + TOT_LEN, -1),
    "plain-ue6-truncated-by-one-byte": _minimal_plain_ue6[:-1],
    "plain-ue6-header-cut-short": _minimal_plain_ue6[: PLAIN_UE_IP_PSC + 47],
}

# One step off the layout each: the staged parser must take them, and get them right.
FALLBACK = {
    "outer-ihl-6": n3_frame(outer_options=IP_OPTION_NOPS),
    "inner-ihl-6": n3_frame(inner_options=IP_OPTION_NOPS),
    "ue-ihl-6": n3_frame(packets.ipv4(packets.udp(b"ue", sport=1, dport=2), src=UE4[0], dst=UE4[1],
                                      options=IP_OPTION_NOPS)),
    "outer-vlan": n3_frame(vlans=[100]),
    "inner-vlan": n3_frame(inner_vlans=[200]),
    "outer-fragment": n3_frame(outer_frag=1),
    "inner-fragment": n3_frame(inner_frag=1),
    "ue-fragment": n3_frame(packets.ipv4(b"x" * 16, src=UE4[0], dst=UE4[1], proto=17, frag_offset=2)),
    "two-gtp-extensions": n3_frame(exts=[packets.gtp_ext_udp_port(2152)]),
    "container-then-a-decoy-ipv4-extension": n3_frame(exts=[decoy_extension()]),
    "gtp-s-flag-only": n3_frame(qfi=None, seq=1),
    "gtp-pn-flag-only": n3_frame(qfi=None, npdu=1),
    "gtp-e-flag-without-extension": n3_frame(qfi=None, flags=0x34),
    "gtp-container-of-8-octets": n3_frame(gtp=packets.gtpu(TEID, inner=ue_udp(), exts=[
        packets.gtp_ext_pdu_session(QFI, ppp=True, ppi=3)])),
    "gtp-other-extension-only": n3_frame(qfi=None, exts=[packets.gtp_ext_pdcp_number(5)]),
    "gtp-version-2": n3_frame(flags=0x54),
    "gtp-end-marker": n3_frame(gtp=packets.gtp_end_marker(TEID)),
    "ue-icmp": n3_frame(packets.ue_icmp(*UE4)),
    "ue-tcp-header-cut-short": n3_frame(packets.ipv4(b"\0" * 12, src=UE4[0], dst=UE4[1], proto=6)),
    "not-gtpu-port": n3_frame(gtp_port=2153),
    "truncated-by-one-byte": n3_frame()[:-1],
    "minimal-truncated-by-one-byte": _minimal_psc[:-1],
    "outer-total-length-one-too-big": with_tot_len_plus_one(n3_frame(), OUTER_IP),
    "inner-total-length-one-too-big": with_tot_len_plus_one(n3_frame(), INNER_IP),
    "ue-total-length-one-too-big": with_tot_len_plus_one(_minimal_psc, UE_IP_PSC),
    "ue-total-length-below-header": packets.patched(_minimal_psc, UE_IP_PSC + TOT_LEN, struct.pack("!H", 19)),
    # Every length must cover the UE's L4 header, as the staged parser requires; the bytes beyond a
    # short length are still in the frame, so only the length fields can tell.
    "vxlan-i-flag-clear": packets.patched(n3_frame(), VXLAN, b"\x00"),
    "ue-tcp-header-after-the-ue-datagram": n3_frame(
        packets.Raw(load=bytes(packets.ipv4(b"", src=UE4[0], dst=UE4[1], proto=6)) + bytes(ue_tcp())[20:])
    ),
    "ue-sctp-header-cut-short": n3_frame(packets.ipv4(b"\0" * 11, src=UE4[0], dst=UE4[1], proto=132)),
    "ue-total-length-one-too-small": with_length_changed(_minimal_psc, UE_IP_PSC + TOT_LEN, -1),
    "outer-total-length-one-too-small": with_length_changed(_minimal_psc, OUTER_IP + TOT_LEN, -1),
    "inner-total-length-one-too-small": with_length_changed(_minimal_psc, INNER_IP + TOT_LEN, -1),
    "outer-udp-length-one-too-small": with_length_changed(_minimal_psc, OUTER_UDP + UDP_LEN, -1),
    "inner-udp-length-one-too-small": with_length_changed(_minimal_psc, INNER_UDP + UDP_LEN, -1),
    "outer-udp-length-zero": packets.patched(n3_frame(), OUTER_UDP + UDP_LEN, b"\0\0"),
    "plain-outer-ihl-6": plain_frame(outer_options=IP_OPTION_NOPS),
    "plain-outer-vlan": plain_frame(vlans=[100]),
    "plain-outer-qinq": plain_frame(vlans=[100, 200]),
    "plain-outer-fragment": plain_frame(outer_frag=1),
    "plain-ue-fragment": plain_frame(packets.ipv4(b"x" * 16, src=UE4[0], dst=UE4[1], proto=17, frag_offset=2)),
    "plain-ue-ihl-6": plain_frame(packets.ipv4(packets.udp(b"ue", sport=1, dport=2), src=UE4[0], dst=UE4[1],
                                               options=IP_OPTION_NOPS)),
    "plain-two-gtp-extensions": plain_frame(exts=[packets.gtp_ext_udp_port(2152)]),
    "plain-container-then-a-decoy-ipv4-extension": plain_frame(exts=[decoy_extension()]),
    "plain-gtp-s-flag-only": plain_frame(qfi=None, seq=1),
    "plain-gtp-e-flag-without-extension": plain_frame(qfi=None, flags=0x34),
    "plain-gtp-container-of-8-octets": plain_frame(gtp=packets.gtpu(TEID, inner=ue_udp(), exts=[
        packets.gtp_ext_pdu_session(QFI, ppp=True, ppi=3)])),
    "plain-gtp-other-extension-only": plain_frame(qfi=None, exts=[packets.gtp_ext_pdcp_number(5)]),
    "plain-gtp-version-2": plain_frame(flags=0x54),
    "plain-gtp-end-marker": plain_frame(gtp=packets.gtp_end_marker(TEID)),
    "plain-ue-icmp": plain_frame(packets.ue_icmp(*UE4)),
    "plain-ue-tcp-header-cut-short": plain_frame(packets.ipv4(b"\0" * 12, src=UE4[0], dst=UE4[1], proto=6)),
    "plain-truncated-by-one-byte": plain_frame()[:-1],
    "plain-minimal-truncated-by-one-byte": _minimal_plain[:-1],
    "plain-outer-total-length-one-too-big": with_tot_len_plus_one(plain_frame(), OUTER_IP),
    "plain-ue-total-length-one-too-big": with_tot_len_plus_one(_minimal_plain, PLAIN_UE_IP_PSC),
    "plain-ue-total-length-one-too-small": with_length_changed(_minimal_plain, PLAIN_UE_IP_PSC + TOT_LEN, -1),
    "plain-outer-total-length-one-too-small": with_length_changed(_minimal_plain, OUTER_IP + TOT_LEN, -1),
    "plain-outer-udp-length-one-too-small": with_length_changed(_minimal_plain, OUTER_UDP + UDP_LEN, -1),
    "plain-outer-udp-length-zero": packets.patched(plain_frame(), OUTER_UDP + UDP_LEN, b"\0\0"),
    "plain-ue-sctp-header-cut-short": plain_frame(packets.ipv4(b"\0" * 11, src=UE4[0], dst=UE4[1], proto=132)),
    **UE6_FALLBACK,
    "n6-vlan": n6_frame(vlans=[100]),
    "n6-ihl-6": n6_frame(packets.ipv4(packets.udp(b"x", sport=1, dport=2), src=UE4[0], dst=UE4[1],
                                      options=IP_OPTION_NOPS)),
    "n6-fragment": n6_frame(packets.ipv4(b"x" * 16, src=UE4[0], dst=UE4[1], proto=17, frag_offset=2)),
    "n6-icmp": n6_frame(packets.ue_icmp(*UE4)),
    "n6-ipv6-udp": n6_frame(packets.ue_udp(*UE6, 40000, 5004)),
    "n6-udp-to-the-vxlan-port": n6_frame(ue_udp(dport=packets.VXLAN_PORT, payload=bytes(30))),
    "n6-udp-to-the-geneve-port": n6_frame(ue_udp(dport=packets.GENEVE_PORT, payload=bytes(30))),
    "n6-udp-to-the-gtpu-port": n6_frame(ue_udp(dport=packets.GTPU_PORT, payload=bytes(30))),
    "n6-tcp-header-cut-short": n6_frame(packets.ipv4(b"\0" * 19, src=UE4[0], dst=UE4[1], proto=6)),
    "n6-sctp-header-cut-short": n6_frame(packets.ipv4(b"\0" * 11, src=UE4[0], dst=UE4[1], proto=132)),
    "n6-udp-header-cut-short": n6_frame(packets.ipv4(b"\0" * 7, src=UE4[0], dst=UE4[1], proto=17)),
    "n6-total-length-one-too-big": with_tot_len_plus_one(n6_frame(), OUTER_IP),
    "n6-total-length-below-header": packets.patched(n6_frame(), OUTER_IP + TOT_LEN, struct.pack("!H", 19)),
    "n6-truncated-to-the-ports": n6_frame()[:OUTER_UDP + 4],
}


def parsed(dp, frame: bytes) -> tuple[tuple[str, object], bool]:
    """(what the program made of the frame in the reference parser's terms, whether the fast path
    parsed it)."""
    outcome = run(dp, frame)
    assert outcome.fast_path is not None, "a traced instance reports the parser"
    if outcome.reason is not None:
        return ("reason", outcome.reason), outcome.fast_path
    key = reference_key(outcome.key)
    assert key["ifindex"] == LOOPBACK_IFINDEX
    return ("ok", {**key, "ifindex": 0}), outcome.fast_path


# --- the fast path -----------------------------------------------------------------------------------


def test_the_fast_frames_have_the_layout_the_offsets_above_assume():
    frame = FAST["udp-psc-ul"]
    assert frame[OUTER_IP] == frame[INNER_IP] == frame[UE_IP_PSC] == 0x45
    assert frame[GTP] == 0x34 and frame[GTP + 1] == packets.GTP_T_PDU
    plain = FAST["plain-udp-psc-ul"]
    assert plain[OUTER_IP] == plain[PLAIN_UE_IP_PSC] == 0x45
    assert plain[PLAIN_GTP] == 0x34 and plain[PLAIN_GTP + 1] == packets.GTP_T_PDU


@pytest.mark.parametrize("name", sorted(FAST))
def test_a_frame_of_the_n3_layout_takes_the_fast_path_to_the_reference_key(dp, name):
    frame = FAST[name]
    expected = refparser.parse(frame)
    assert expected[0] == "ok", "the frame is well formed"
    assert parsed(dp, frame) == (expected, True)


@pytest.mark.parametrize("name", sorted(FALLBACK))
def test_a_near_miss_falls_back_to_the_staged_parser_and_still_parses_right(dp, name):
    frame = FALLBACK[name]
    assert parsed(dp, frame) == (refparser.parse(frame), False)


@pytest.mark.parametrize("frame_of", [n3_frame, plain_frame], ids=["vxlan", "plain"])
def test_the_fast_path_reads_every_key_field_of_a_ue_ipv6_packet(dp, frame_of):
    base = parsed(dp, frame_of(ue6_udp()))[0][1]
    variants = {
        "dscp": frame_of(ue6_udp(dscp=1)),
        "sport": frame_of(ue6_udp(sport=40002)),
        "dport": frame_of(ue6_udp(dport=5005)),
        "src": frame_of(packets.ue_udp("2001:db8:60::2", UE6[1], 40000, 5004)),
        "dst": frame_of(packets.ue_udp(UE6[0], "2001:db8:200::11", 40000, 5004)),
        "proto": frame_of(ue6(packets.Raw(load=bytes(packets.udp(b"ue", sport=40000, dport=5004)) + bytes(2)),
                              nh=132)),  # the same ports, as SCTP
    }
    for field, frame in variants.items():
        (status, key), fast = parsed(dp, frame)
        assert (status, fast) == ("ok", True), field
        assert {name for name in key if key[name] != base[name]} == {field}, field


@pytest.mark.parametrize("frame_of", [n3_frame, plain_frame], ids=["vxlan", "plain"])
def test_the_fast_path_reads_every_key_field_it_fills(dp, frame_of):
    """Two frames differing in one field each must give keys differing in that field only."""
    base = parsed(dp, frame_of())[0][1]
    variants = {
        "teid": frame_of(gtp=packets.gtpu(TEID + 1, QFI, ul=True, inner=ue_udp())),
        "qfi": frame_of(gtp=packets.gtpu(TEID, QFI + 1, ul=True, inner=ue_udp())),
        "flags": frame_of(ul=False),  # the UL bit
        "dscp": frame_of(ue_udp(dscp=1)),
        "sport": frame_of(ue_udp(sport=40002)),
        "dport": frame_of(ue_udp(dport=5005)),
        "src": frame_of(packets.ue_udp("10.60.0.2", UE4[1], 40000, 5004)),
        "dst": frame_of(packets.ue_udp(UE4[0], "10.200.0.11", 40000, 5004)),
    }
    for field, frame in variants.items():
        (status, key), fast = parsed(dp, frame)
        assert (status, fast) == ("ok", True), field
        assert {name for name in key if key[name] != base[name]} == {field}, field


ALT_MAC, ALT_IP4 = "02:00:00:00:0a:01", "203.0.113.7"


FORWARD_ALL = {
    "intents": [{"id": "all", "match": {"overlay": "vxlan"}, "action": {"type": "forward", "alternative": 0}}],
    "alternatives": [{"id": 0, "members": [{"mac": ALT_MAC, "ip4": ALT_IP4}]}],
}


def applied(dataplane, document: dict) -> None:
    dataplane.apply_compiled(compile_document(parse_document(document), INTERFACES))


def rules_and_groups(dataplane) -> tuple[list, list]:
    """The rules and the non-empty alternative groups the instance holds."""
    groups = [key for key, group in dataplane.table("dpp_alt_groups").items() if group.count]
    return list(dataplane.table("dpp_rules").items()), groups


@pytest.fixture
def forwarding_all(dp):
    """The module's instance forwarding every VXLAN packet to ALT_IP4; left with no rule and no group,
    as the module's other tests expect it (checked before and after)."""
    assert rules_and_groups(dp) == ([], []), "the module's instance is expected without rules or groups"
    applied(dp, FORWARD_ALL)
    try:
        yield dp
    finally:
        applied(dp, {"intents": []})
        assert rules_and_groups(dp) == ([], [])


@pytest.mark.parametrize("name", ["udp-psc-ul", "tcp-no-extension"])
def test_forward_rewrites_the_outer_headers_the_fast_path_located(forwarding_all, name):
    """FORWARD rewrites at the outer IPv4 and UDP offsets the parser records: the fast path must
    record the staged parser's (14 and 34 in this layout)."""
    frame = FAST[name]
    outcome = run(forwarding_all, frame)
    assert (outcome.verdict, outcome.action, outcome.fast_path) == ("TX", "forward", True)
    out = outcome.data
    udp_start = OUTER_IP + 20
    assert out[0:6] == bytes.fromhex(ALT_MAC.replace(":", "")) and out[6:12] == frame[0:6]
    assert out[OUTER_IP + 16 : OUTER_IP + 20] == bytes(map(int, ALT_IP4.split(".")))
    unchanged = [(12, OUTER_IP + 10), (OUTER_IP + 12, OUTER_IP + 16), (udp_start, udp_start + 6),
                 (udp_start + 8, len(frame))]
    assert all(out[a:b] == frame[a:b] for a, b in unchanged)
    assert struct.unpack_from("!H", out, udp_start + 6)[0] != 0, "the outer UDP checksum is in use"
    assert checksums_valid(out), "outer IPv4 and UDP checksums"


def test_an_untraced_instance_does_not_say_which_parser_ran():
    require_kernel()
    from netapp.dataplane.facade import Dataplane

    with Dataplane.open() as dataplane:
        assert dataplane.test_run(FAST["udp-psc-ul"]).fast_path is None


# --- the flow cache ----------------------------------------------------------------------------------


def flow_document() -> dict:
    """Two shapes (so the search has a priority to get right) and one rule per UE destination."""
    return {
        "intents": [
            {"id": "to-a", "priority": 20, "match": {"dst": "10.200.0.10/32"}, "action": {"type": "drop"}},
            {"id": "to-b", "priority": 20, "match": {"dst": "10.200.0.11/32"}, "action": {"type": "pass"}},
            {"id": "tunnel", "priority": 10, "match": {"teid": TEID}, "action": {"type": "drop"}},
        ],
    }


def flow(dst: str, *, dport: int = 5004) -> bytes:
    return n3_frame(packets.ue_udp(UE4[0], dst, 40000, dport))


def test_flows_sharing_the_only_slot_each_get_their_own_rule_every_time():
    """With one slot every flow collides: each packet overwrites the other flow's entry, and the
    full key compare must keep a flow from ever taking the other's rule."""
    dataplane = traced_dataplane(flow_document(), max_flows=1)
    try:
        sequence = [flow("10.200.0.10"), flow("10.200.0.11"), flow("10.200.0.12")] * 3
        sequence += [flow("10.200.0.10")] * 2 + [flow("10.200.0.10", dport=5005)] * 2
        got = [run(dataplane, frame).intent for frame in sequence]
    finally:
        dataplane.close()
    assert got == ["to-a", "to-b", "tunnel"] * 3 + ["to-a"] * 4


def test_many_flows_in_a_small_cache_keep_their_rules_on_repeat():
    dataplane = traced_dataplane(flow_document(), max_flows=4)
    try:
        destinations = ("10.200.0.10", "10.200.0.11")
        frames = [flow(dst, dport=port) for dst in destinations for port in range(6000, 6016)]
        first = [run(dataplane, frame).intent for frame in frames]
        again = [run(dataplane, frame).intent for frame in frames]
    finally:
        dataplane.close()
    assert first == again == ["to-a"] * 16 + ["to-b"] * 16


def fdinfo(fd: int) -> dict[str, str]:
    lines = Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


BPF_MAP_TYPE_ARRAY = 2


@pytest.mark.parametrize(("max_flows", "slots"), [(0, 65536), (1, 1), (3, 4), (1000, 1024), (4096, 4096)])
def test_the_flow_cache_is_an_array_of_a_power_of_two_slots_per_cpu(max_flows, slots):
    require_kernel()
    handle = DppHandle.open(load_libdpp(), None, max_flows=max_flows)
    try:
        info = fdinfo(handle.map_fd("dpp_flows"))
    finally:
        handle.close()
    assert int(info["map_type"]) == BPF_MAP_TYPE_ARRAY
    assert (int(info["key_size"]), int(info["value_size"])) == (4, ctypes.sizeof(FlowEntry))
    assert int(info["max_entries"]) == slots * possible_cpus()


def test_a_flow_cache_too_large_to_round_up_is_refused():
    require_kernel()
    with pytest.raises(DataplaneError) as raised:
        DppHandle.open(load_libdpp(), None, max_flows=(1 << 31) + 1)
    assert raised.value.errno == errno.E2BIG
