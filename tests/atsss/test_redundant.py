"""REDUNDANT's copies for real: xdp_atsss run in live-frame mode (BPF_F_TEST_XDP_LIVE_FRAMES, the
broadcast carried out) on a port of a namespace whose dpp_atsss_tx holds a group of two more ports,
each entry with its position's copy program; what leaves each port is read on its veth peer (an AF_PACKET
socket behind an XDP program that passes, which veth needs to take redirected frames). Every UE
packet arrives once on each path that is up, byte for byte what RFC 4340 and the MP_SEQ layout say,
all copies of a packet with one MP_SEQ number and each path numbering its own."""

from __future__ import annotations

import contextlib
import secrets
import socket
from ctypes import c_uint32

import pytest

from bench.libbpf import BpfObject, map_delete
from bench.libbpf import test_run_live as run_live  # not collected as a test
from bench.throughput.sink import attach_native
from netapp.atsss.abi import Mode
from netapp.core import netns as namespaces
from netapp.dataplane.abi import DevmapVal
from netapp.testbed import netns
from tests.atsss.atsss import PathSpec, ethernet, expected_frame, ue_packet
from tests.utils.kernel import build_artifact
from tests.utils.object_tables import ObjectTables

UE = "10.45.0.2"
SPECS = [PathSpec("10.0.1.1", "10.0.1.2", sport=5001, dport=5002),
         PathSpec("192.168.7.1", "192.168.7.20", sport=6001, dport=6002, dmac=bytes.fromhex("02000000bb02"))]  # fmt: skip
PORTS = ("out0", "out1")
PACKETS = 20  # at most 64: a live run writes the frame into its pool's 64 pages once, and the
# encapsulation overwrites the Ethernet header in front of the UE packet in the page
ETH_P_ALL = 0x0003


@pytest.fixture
def site(atsss):
    """A namespace: the ingress port in0, the paths' ports out0 and out1 in group 0 of dpp_atsss_tx
    (positions 0 and 1), their peers passing what they receive to capturing sockets."""
    ns = f"dppatsss-{secrets.token_hex(3)}"
    tx = ObjectTables(atsss.obj).table("dpp_atsss_tx")
    passer = BpfObject(build_artifact("xdp_pass.bpf.o"))
    sockets: dict[str, socket.socket] = {}
    try:
        netns.add_namespace(ns)
        netns.add_ports(ns, ("in0", *PORTS))
        with namespaces.entered(ns):
            tx.set(0, {position: DevmapVal(socket.if_nametoindex(port), atsss.obj.program_fd(f"dpp_atsss_copy_{position}"))
                       for position, port in enumerate(PORTS)})
            for position, port in enumerate(PORTS):
                attach_native(socket.if_nametoindex(f"{port}p"), passer.program_fd("xdp_pass"))
                capture = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                capture.bind((f"{port}p", 0))
                capture.settimeout(5)
                sockets[port] = capture
            ingress = socket.if_nametoindex("in0")

        def run(frame: bytes, repeat: int) -> None:
            with namespaces.entered(ns):
                run_live(atsss.prog, frame, repeat, ingress)

        yield run, sockets
    finally:
        for capture in sockets.values():
            capture.close()
        with contextlib.suppress(OSError):  # the group the setup did not get to
            map_delete(atsss.obj.map_fd("dpp_atsss_tx"), c_uint32(0))
        netns.delete_namespace(ns)
        passer.close()


def received(capture: socket.socket, count: int) -> list[bytes]:
    """`count` frames of DCCP (IPv4 protocol 33) from the port, in order; others (IPv6 neighbour
    discovery of the fresh links) skipped."""
    frames = []
    while len(frames) < count:
        frame = capture.recv(4096)
        if frame[12:14] == b"\x08\x00" and frame[23] == 33:
            frames.append(frame)
    return frames


@pytest.fixture
def redundant(atsss):
    for slot, spec in enumerate(SPECS, start=1):
        atsss.add_path(slot, spec, dccp_seq=100 * slot)
    atsss.add_session(UE, Mode.REDUNDANT, [1, 2], mp_seq=7)
    yield
    atsss.delete_session(UE)


def test_every_packet_leaves_once_on_each_path_up_with_one_number(atsss, site, redundant):
    run, sockets = site
    inner = ue_packet(UE, b"both ways")
    run(ethernet(inner, padding=5), PACKETS)
    for position, port in enumerate(PORTS):
        slot = position + 1
        expected = [expected_frame(SPECS[position], 100 * slot + n, 7 + n, inner) for n in range(PACKETS)]
        assert received(sockets[port], PACKETS) == expected, port
        assert atsss.sent(slot) == (PACKETS, PACKETS * len(inner))
    assert atsss.session(UE).mp_seq == 7 + PACKETS


def test_a_path_down_gets_no_copy(atsss, site, redundant):
    run, sockets = site
    atsss.set_up(1, False)
    inner = ue_packet(UE)
    run(ethernet(inner), PACKETS)
    assert received(sockets["out1"], PACKETS) == [
        expected_frame(SPECS[1], 200 + n, 7 + n, inner) for n in range(PACKETS)
    ]
    assert atsss.sent(1) == (0, 0) and atsss.path(1).dccp_seq == 100, "out0's copies dropped, not encapsulated"
