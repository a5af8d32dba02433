"""A minimal gNB for tests: a UE's radio link is a TUN device in the UE's namespace, and each cell a
UDP socket on port 2152 in a gNB namespace of its own.

    UE ns: ue0 (TUN) ──> this process ──GTP-U──> UPF N3 address (from the serving cell's socket)
    UE ns: ue0 (TUN) <── this process <──GTP-U── any cell's socket (decapsulated, any extension chain)

Uplink packets get a GTP-U header with a PDU Session Container (PDU type 1, the QFI) and the uplink
TEID the UPF chose; downlink T-PDUs on any cell are written to the TUN device, End Markers counted
per cell. No RRC, no NGAP, no Xn: the test tells it over stdin which cell serves and with which
TEID (`serve <cell> <teid>`), and reads its counters as a JSON line (`stats`). It is the RAN side
of tests/integration/test_upf_e2e.py, not a gNB to deploy.

Run as `python -m netapp.testbed.gnb '<json config>'` (see `Config`); it says `ready` on stdout once
the TUN device is up and every socket is bound.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import socket
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Optional

from netapp.core.netns import entered

GTPU_PORT = 2152
GTP_TPDU = 255
GTP_END_MARKER = 254
GTP_EXT_PDU_SESSION = 0x85
PDU_TYPE_UL = 1
SOCKET_BUFFER = 8 << 20  # bursts of a TCP download must not overflow a Python reader's socket
BATCH = 256  # packets read from one source before the others get their turn

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def gtpu_uplink(teid: int, qfi: int, packet: bytes) -> bytes:
    """A T-PDU with one PDU Session Container (TS 38.415: UL PDU SESSION INFORMATION, the QFI)."""
    header = struct.pack("!BBHIHBB", 0x34, GTP_TPDU, 8 + len(packet), teid, 0, 0, GTP_EXT_PDU_SESSION)
    return header + bytes([1, PDU_TYPE_UL << 4, qfi & 0x3F, 0]) + packet


def gtpu_parse(datagram: bytes) -> Optional[tuple[int, int, bytes]]:
    """(message type, TEID, payload) of a GTP-U v1 message, its extension headers walked; None if
    it is not one or is cut short."""
    if len(datagram) < 8 or datagram[0] >> 5 != 1:
        return None
    flags, kind, length, teid = struct.unpack_from("!BBHI", datagram)
    end = 8 + length
    if end > len(datagram):
        return None
    offset = 8
    if flags & 0x07:
        if end < 12:
            return None
        offset, next_type = 12, datagram[11] if flags & 0x04 else 0
        while next_type:
            if offset + 1 > end or not datagram[offset]:
                return None
            offset += 4 * datagram[offset]
            if offset > end:
                return None
            next_type = datagram[offset - 1]
    return kind, teid, datagram[offset:end]


@dataclass
class Cell:
    name: str
    netns: str
    address: str  # the cell's N3 address, where the UPF sends the downlink
    sock: socket.socket = field(init=False, repr=False)
    uplink: int = 0
    downlink: int = 0
    downlink_bytes: int = 0  # UE packets written to the TUN device
    end_markers: list[int] = field(default_factory=list)  # TEIDs of the End Markers received
    malformed: int = 0

    def open(self) -> None:
        with entered(self.netns):
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
        self.sock.bind((self.address, GTPU_PORT))
        self.sock.setblocking(False)

    def stats(self) -> dict:
        return {
            "uplink": self.uplink,
            "downlink": self.downlink,
            "downlink_bytes": self.downlink_bytes,
            "end_markers": self.end_markers,
            "malformed": self.malformed,
        }


@dataclass
class Config:
    ue_netns: str
    ue_address: str  # the UE's address on its TUN device (/32), its default route through it
    upf: str  # the UPF's N3 address
    cells: list[dict]  # [{"name", "netns", "address"}]
    qfi: int = 9
    mtu: int = 1400  # of the TUN device: the UE packet plus GTP-U/UDP/IPv4 (44 bytes) fits 1500
    tun: str = "ue0"


def open_tun(netns: str, name: str) -> int:
    """A TUN device (IP packets, no packet information header) created in `netns`; its fd."""
    with entered(netns):
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


class Gnb:
    def __init__(self, config: Config):
        self.config = config
        self.cells = {spec["name"]: Cell(**spec) for spec in config.cells}
        self.serving: Optional[Cell] = None
        self.teid = 0
        self.unserved = 0  # uplink packets read before any cell served the UE: dropped
        self.tun = -1

    def setup(self) -> None:
        self.tun = open_tun(self.config.ue_netns, self.config.tun)
        ip = ["ip", "-n", self.config.ue_netns]
        dev = self.config.tun
        for args in (
            ["link", "set", dev, "mtu", str(self.config.mtu), "up"],
            ["addr", "add", f"{self.config.ue_address}/32", "dev", dev],
            ["route", "add", "default", "dev", dev],
        ):
            subprocess.run(ip + args, check=True, capture_output=True)
        for cell in self.cells.values():
            cell.open()

    def command(self, line: str) -> Optional[str]:
        """`serve <cell> <teid>`, `stats`, `quit` (None: stop)."""
        words = line.split()
        if not words or words[0] == "quit":
            return None
        if words[0] == "serve":
            self.serving, self.teid = self.cells[words[1]], int(words[2], 0)
            return "ok"
        if words[0] == "stats":
            cells = {name: cell.stats() for name, cell in self.cells.items()}
            return json.dumps({"cells": cells, "unserved": self.unserved})
        return f"error: unknown command {words[0]!r}"

    def uplink(self) -> None:
        for _ in range(BATCH):
            try:
                packet = os.read(self.tun, 65535)
            except BlockingIOError:
                return
            cell = self.serving
            if cell is None:
                self.unserved += 1
                continue
            cell.sock.sendto(gtpu_uplink(self.teid, self.config.qfi, packet), (self.config.upf, GTPU_PORT))
            cell.uplink += 1

    def downlink(self, cell: Cell) -> None:
        for _ in range(BATCH):
            try:
                datagram = cell.sock.recv(65535)
            except BlockingIOError:
                return
            message = gtpu_parse(datagram)
            if message is None:
                cell.malformed += 1
            elif message[0] == GTP_END_MARKER:
                cell.end_markers.append(message[1])
            elif message[0] == GTP_TPDU:
                os.write(self.tun, message[2])
                cell.downlink += 1
                cell.downlink_bytes += len(message[2])

    def run(self) -> None:
        by_fd = {cell.sock.fileno(): cell for cell in self.cells.values()}
        poller = select.poll()
        for fd in (self.tun, sys.stdin.fileno(), *by_fd):
            poller.register(fd, select.POLLIN)
        print("ready", flush=True)
        while True:
            for fd, _ in poller.poll():
                if fd == self.tun:
                    self.uplink()
                elif fd in by_fd:
                    self.downlink(by_fd[fd])
                else:
                    reply = self.command(sys.stdin.readline())
                    if reply is None:
                        return
                    print(reply, flush=True)


def main(argv: list[str]) -> None:
    gnb = Gnb(Config(**json.loads(argv[0])))
    gnb.setup()
    gnb.run()


if __name__ == "__main__":
    main(sys.argv[1:])
