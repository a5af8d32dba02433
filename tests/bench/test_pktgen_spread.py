"""dpp-pktgen's spread (-s, -S): frame k of a mixed run carries its pcap frame's 16-bit number at
the offset plus (k / N) mod spread, checked on the frames the veth's peer receives."""

from __future__ import annotations

import secrets
import socket
import struct
import subprocess

from bench.throughput.frames import UE_SOURCE_PORT_AT, flow_frame, write_pcap
from netapp.core.netns import entered
from netapp.testbed import netns, scenario
from netapp.testbed.topology import EdgeSite
from bench.libbpf import BpfObject
from bench.throughput.sink import attach_native
from tests.utils.kernel import build_artifact, require_kernel

SPREAD, FRAMES = 5, 40
ETH_P_ALL = 0x0003


def test_each_pcap_frame_becomes_spread_flows_in_turn(tmp_path):
    require_kernel()
    frames = [flow_frame(EdgeSite(tag="t"), scenario.Flow(index), 64) for index in range(2)]
    pcap = write_pcap(tmp_path / "two.pcap", frames)
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
               "-b", "8", "-s", str(SPREAD), "-S", str(UE_SOURCE_PORT_AT)]  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        got = []
        while len(got) < FRAMES:
            data = sock.recv(4096)
            if len(data) == len(frames[0]):
                got.append(struct.unpack_from("!H", data, UE_SOURCE_PORT_AT)[0])
        sock.close()
    finally:
        netns.delete_namespace(name)
        if passer:
            passer.close()
    expected = [40000 + k % 2 + (k // 2) % SPREAD for k in range(FRAMES)]
    assert got == expected
