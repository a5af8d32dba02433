"""bench/atsss/testbed.py's Fig. 4 beyond dpp-pktgen's 256 frames: the UE addresses its frames and
the generator's spread reach are each UE's once, inside the prefix the router hands the node, and
the generator is told the checksums to keep valid. Pure Python: the kernel runs are the bench's."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from bench.atsss.testbed import IPV4_CSUM_AT, UE_LOW16_AT, ue_address, ue_frames, ue_layout, spread_generator
from bench.throughput.generator import Generator
from netapp.testbed.atsss_site import UE_PREFIX, AtsssSite


@pytest.mark.parametrize("ues, layout", [(1, (1, 1)), (256, (256, 1)), (257, (1, 257)), (10_000, (250, 40))])
def test_ues_are_frames_times_a_spread_of_at_most_256_frames(ues, layout):
    assert ue_layout(ues) == layout


def test_the_frames_and_their_spread_reach_each_ue_once_inside_the_ue_prefix():
    frames, spread = ue_layout(10_000)
    firsts = [Ether(frame)[IP].dst for frame in ue_frames(AtsssSite(tag="t"), 10_000, 64)]
    reached = [str(ipaddress.ip_address(first) + step) for step in range(spread) for first in firsts]
    assert sorted(reached, key=ipaddress.ip_address) == [ue_address(k) for k in range(10_000)]
    assert all(ipaddress.ip_address(ue) in ipaddress.ip_network(UE_PREFIX) for ue in reached)
    # The generator adds to the low 16 bits alone: none of them may carry into the next byte pair.
    assert all(int(ipaddress.ip_address(ue)) >> 16 == int(ipaddress.ip_address(firsts[0])) >> 16 for ue in reached)


def test_the_spread_generator_keeps_the_ipv4_checksum(tmp_path: Path):
    cmd = spread_generator(Generator(tmp_path / "dpp-pktgen", "ns-r", "r1"), 10_000).command(tmp_path / "f.pcap", 1, 0)
    assert cmd[cmd.index("-s") + 1] == "40" and cmd[cmd.index("-S") + 1] == str(UE_LOW16_AT)
    assert cmd[cmd.index("-C") + 1] == str(IPV4_CSUM_AT)
    assert "-C" not in spread_generator(Generator(tmp_path / "dpp-pktgen", "ns-r", "r1"), 256).command(
        tmp_path / "f.pcap", 1, 0
    )
