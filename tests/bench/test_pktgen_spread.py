"""dpp-pktgen's spread (-s, -S): frame k of a mixed run carries its pcap frame's 16-bit number at
the offset plus (k / N) mod spread, checked on the frames the veth's peer receives; with -C the
checksums covering that number stay valid (scapy recomputes them)."""

from __future__ import annotations

import secrets
import socket
import struct
import subprocess
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench.throughput.frames import UE_SOURCE_PORT_AT, flow_frame, write_pcap
from netapp.core.netns import entered
from netapp.testbed import netns, scenario
from netapp.testbed.topology import EdgeSite
from bench.libbpf import BpfObject
from bench.throughput.sink import attach_native
from tests.utils.kernel import build_artifact, require_kernel

SPREAD, FRAMES = 5, 40
ETH_P_ALL = 0x0003
IP_CSUM_AT, IP_DST_AT, UDP_CSUM_AT = 14 + 10, 14 + 16, 14 + 20 + 6


def sent_frames(tmp_path: Path, frames: list[bytes], *options: str) -> list[bytes]:
    """The FRAMES frames a mixed run of `frames` with `options` sends out of a veth, as its peer
    receives them."""
    require_kernel()
    pcap = write_pcap(tmp_path / "frames.pcap", frames)
    passer = None
    name = f"dpp-spread-{secrets.token_hex(3)}"
    netns.add_namespace(name)
    try:
        netns.run(["ip", "link", "add", "g0", "type", "veth", "peer", "name", "g1"], netns=name)
        for ifname in ("g0", "g1"):
            netns.run(["ip", "link", "set", ifname, "up"], netns=name)
        # XDP_TX frames reach a veth peer only through an XDP program of its own: one that passes.
        passer = BpfObject(build_artifact("xdp_pass.bpf.o"))
        with entered(name):
            attach_native(socket.if_nametoindex("g1"), passer.program_fd("xdp_pass"))
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            sock.bind(("g1", 0))
            sock.settimeout(5)
        pktgen = str(build_artifact("dpp-pktgen"))
        cmd = ["ip", "netns", "exec", name, pktgen, "-i", "g0", "-r", str(pcap), "-m", "-n", str(FRAMES),
               "-b", "8", *options]  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        got = []
        while len(got) < FRAMES:
            data = sock.recv(4096)
            if len(data) == len(frames[0]):
                got.append(data)
        sock.close()
    finally:
        netns.delete_namespace(name)
        if passer:
            passer.close()
    return got


def test_each_pcap_frame_becomes_spread_flows_in_turn(tmp_path):
    frames = [flow_frame(EdgeSite(tag="t"), scenario.Flow(index), 64) for index in range(2)]
    got = sent_frames(tmp_path, frames, "-s", str(SPREAD), "-S", str(UE_SOURCE_PORT_AT))
    expected = [40000 + k % 2 + (k // 2) % SPREAD for k in range(FRAMES)]
    assert [struct.unpack_from("!H", data, UE_SOURCE_PORT_AT)[0] for data in got] == expected


def udp_frame(dst: str, udp_checksum: bool) -> bytes:
    frame = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="198.51.100.7", dst=dst, ttl=63)
    frame /= UDP(sport=443, dport=40000, chksum=None if udp_checksum else 0) / bytes(range(40))
    return bytes(frame)


def recomputed(data: bytes) -> tuple[int, int]:
    """The IPv4 header's and the UDP checksum of `data` as scapy computes them (UDP: 0 stays 0)."""
    frame = Ether(data)
    udp_was = frame[UDP].chksum
    del frame[IP].chksum
    del frame[UDP].chksum
    again = Ether(bytes(frame))
    return again[IP].chksum, again[UDP].chksum if udp_was else 0


@pytest.mark.parametrize("offset", [IP_DST_AT + 2, IP_DST_AT + 1], ids=["low16", "odd-offset"])
def test_spread_frames_carry_valid_ipv4_and_udp_checksums(tmp_path, offset):
    """The spread number is the UE address's (its low 16 bits, or an odd offset, whose bytes lie
    across the checksums' words); the first frame's destination carries into its next byte.
    Without -C every frame but each template's first has stale checksums."""
    frames = [udp_frame("10.45.0.254", True), udp_frame("10.45.7.9", False)]
    got = sent_frames(tmp_path, frames, "-s", str(SPREAD), "-S", str(offset),
                      "-C", str(IP_CSUM_AT), "-C", str(UDP_CSUM_AT))  # fmt: skip
    base = [struct.unpack_from("!H", frame, offset)[0] for frame in frames]
    numbers = [struct.unpack_from("!H", data, offset)[0] for data in got]
    assert numbers == [base[k % 2] + (k // 2) % SPREAD for k in range(FRAMES)]
    carried = [(Ether(data)[IP].chksum, Ether(data)[UDP].chksum) for data in got]
    assert carried == [recomputed(data) for data in got]
    assert [udp for _, udp in carried[1::2]] == [0] * (FRAMES // 2)


def test_a_checksum_offset_past_the_frame_is_refused(tmp_path):
    require_kernel()
    frame = udp_frame("10.45.0.2", True)
    pcap = write_pcap(tmp_path / "one.pcap", [frame])
    cmd = [str(build_artifact("dpp-pktgen")), "-i", "lo", "-r", str(pcap), "-m", "-n", "1",
           "-s", "2", "-S", str(IP_DST_AT + 2), "-C", str(len(frame) - 1)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 1
    assert f"-C {len(frame) - 1}: the frames have {len(frame)} bytes" in proc.stderr
