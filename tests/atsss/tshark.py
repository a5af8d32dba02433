"""Wireshark's DCCP dissector as an independent judge of the frames we emit: frames written to a
pcap, read back by `tshark`, every expert info (malformed packet, bad checksum, bad option length)
and the dissector's own reading of the header returned."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass

import pytest

FIELDS = ("frame.number", "dccp.srcport", "dccp.dstport", "dccp.seq_raw", "dccp.type", "dccp.x",
          "dccp.checksum.status", "ip.checksum.status", "_ws.expert.message", "dccp.cscov")  # fmt: skip


@dataclass(frozen=True)
class Dissected:
    number: int
    sport: int
    dport: int
    seq: int
    type: int
    x: str
    checksum_status: str
    ip_checksum_status: str
    expert: str
    cscov: int  # the checksum coverage the dissector read (RFC 4340 9.2)


def require_tshark() -> str:
    tshark = shutil.which("tshark")
    if tshark is None:
        if os.environ.get("CI"):
            pytest.fail("CI must decode with tshark, but it is not installed (the Makefile's TEST_APT_PACKAGES)")
        pytest.skip("tshark is not installed (apt-get install tshark)")
    return tshark


def pcap(frames: list[bytes]) -> bytes:
    """A classic pcap file (Ethernet link type) of the frames."""
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for i, frame in enumerate(frames):
        out += struct.pack("<IIII", i, 0, len(frame), len(frame)) + frame
    return out


def dissect(frames: list[bytes]) -> list[Dissected]:
    """Every frame as tshark reads it, checksums verified."""
    tshark = require_tshark()
    with tempfile.NamedTemporaryFile(suffix=".pcap") as f:
        f.write(pcap(frames))
        f.flush()
        command = [tshark, "-n", "-r", f.name, "-o", "dccp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE",
                   "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=|"]  # fmt: skip
        for field in FIELDS:
            command += ["-e", field]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    return [Dissected(int(r[0]), int(r[1] or -1), int(r[2] or -1), int(r[3] or -1), int(r[4] or -1), *r[5:9],
                      int(r[9] or -1)) for r in rows]  # fmt: skip
