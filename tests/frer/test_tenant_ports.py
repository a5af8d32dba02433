"""Two tenants' generated streams on one node, put through the service (netapp.frer) into the
NetApp's pipeline (dpp.bpf.o with its FRER stage), each replicated to member ports of its own: the
entry run in live-frame mode (BPF_F_TEST_XDP_LIVE_FRAMES, the broadcast carried out into veth
ports) sends each tenant's tagged copies out of its own ports only, each port's exactly as many as
that tenant sent, with the VLAN id its port names, and none out of the other tenant's ports or the
ingress port.

What leaves a port is read on its veth peer (an AF_PACKET socket behind an XDP program that passes,
which veth needs to take redirected frames; the kernel takes a VLAN tag out of the frame on receipt,
so the socket's auxiliary data gives it back). A live run hands its copies to the peers' queues before
it returns; a marker frame sent out of every port afterwards queues behind them, so reading each peer
up to its marker reads all that port was given, and nothing can arrive late."""

from __future__ import annotations

import secrets
import socket
import struct
from collections import Counter
from typing import Iterator

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench.libbpf import BpfObject
from bench.libbpf import test_run_live as run_live  # not collected as a test
from bench.throughput.sink import attach_native
from netapp.core import netns as namespaces
from netapp.dataplane.facade import Dataplane
from netapp.frer.abi import RTAG_ETHERTYPE
from netapp.frer.dataplane import FrerDataplane
from netapp.frer.models import FrerStreamSpec
from netapp.frer.service import Frer
from netapp.service.contract import Principal, Scope
from netapp.service.store import Store
from netapp.testbed import netns
from tests.utils.kernel import build_artifact, require_kernel
from tests.utils.service import grant_subnets

# each tenant's listener address, its member ports and the VLAN id (0: none) each port's copies get
TENANTS = {"carol": ("10.60.0.2", {"c0": 0, "c1": 0}), "dave": ("10.70.0.2", {"d0": 0, "d1": 40})}
PORTS = ["in0", *(port for _, ports in TENANTS.values() for port in ports)]
FRAMES = {"carol": 12, "dave": 20}  # at most 64: a live run writes the frame into its 64 pages once
MARKER = 0x88B6  # the EtherType of the frame that ends each port's capture
ETH_P_ALL = 0x0003
SOL_PACKET, PACKET_AUXDATA = 263, 8
TP_STATUS_VLAN_VALID, TP_STATUS_VLAN_TPID_VALID = 0x10, 0x40
AUXDATA = struct.Struct("=IIIHHHH")  # struct tpacket_auxdata


def udp(listener: str) -> bytes:
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.50.0.1", dst=listener)
                 / UDP(sport=4000, dport=5000) / (b"p" * 40))


def tagged(frame: bytes, seq: int, vlan: int) -> bytes:
    """`frame` as a copy leaves its member port: an R-tag numbered `seq`, behind a VLAN tag if any."""
    tag = struct.pack("!HH", 0x8100, vlan) if vlan else b""
    return frame[:12] + tag + struct.pack("!HHH", RTAG_ETHERTYPE, 0, seq) + frame[12:]


def stream(tenant: str) -> FrerStreamSpec:
    listener, ports = TENANTS[tenant]
    return FrerStreamSpec.model_validate({
        "name": "protected",
        "identification": [{"ip": {"destination": listener, "protocol": "udp", "destination_port": 5000}}],
        "generation": {"ports": [{"interface": port, **({"vlan": vlan} if vlan else {})}
                                 for port, vlan in ports.items()]},
    })  # fmt: skip


def _whole(frame: bytes, ancillary: list) -> bytes:
    """The frame as it was sent, its VLAN tag (which the kernel took out on receipt) put back."""
    for level, kind, data in ancillary:
        if (level, kind) == (SOL_PACKET, PACKET_AUXDATA):
            status, _, _, _, _, tci, tpid = AUXDATA.unpack(data[: AUXDATA.size])
            if status & TP_STATUS_VLAN_VALID:
                tpid = tpid if status & TP_STATUS_VLAN_TPID_VALID else 0x8100
                return frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]
    return frame


class Node:
    """A namespace with the ingress port and every tenant's ports, their peers captured; the pipeline
    loaded and FRER's service over it, interfaces resolved and maps written in that namespace."""

    def __init__(self, store: Store):
        self.ns = f"dppfrt-{secrets.token_hex(3)}"
        self.captures: dict[str, socket.socket] = {}
        self.dp = self.passer = None
        netns.add_namespace(self.ns)
        try:
            netns.add_ports(self.ns, PORTS)
            self.passer = BpfObject(build_artifact("xdp_pass.bpf.o"))
            with namespaces.entered(self.ns):
                for port in PORTS:
                    attach_native(socket.if_nametoindex(f"{port}p"), self.passer.program_fd("xdp_pass"))
                    capture = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                    capture.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
                    capture.bind((f"{port}p", 0))
                    capture.settimeout(5)
                    self.captures[port] = capture
                self.ingress = socket.if_nametoindex("in0")
                self.dp = Dataplane.open()
            self.frer = Frer.start(store, self.dp.table, FrerDataplane(self.dp), netns=self.ns)
        except BaseException:
            self.close()
            raise

    def send(self, frame: bytes, count: int) -> None:
        with namespaces.entered(self.ns):
            run_live(self.dp.program_fd("dpp_xdp"), frame, count, self.ingress)

    def received(self) -> dict[str, list[bytes]]:
        """port -> every frame its peer took, up to the marker sent out of the port now."""
        marker = bytes(6) + bytes.fromhex("020000000099") + struct.pack("!H", MARKER) + bytes(46)
        with namespaces.entered(self.ns):
            for port in PORTS:
                with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as out:
                    out.bind((port, 0))
                    out.send(marker)
        return {port: self._until_marker(capture) for port, capture in self.captures.items()}

    @staticmethod
    def _until_marker(capture: socket.socket) -> list[bytes]:
        """The port's frames of the test (the EtherTypes it sends), up to the marker; others (IPv6
        neighbour discovery of the fresh links) skipped."""
        frames = []
        while True:
            frame = _whole(*capture.recvmsg(4096, socket.CMSG_SPACE(AUXDATA.size))[:2])
            if frame[12:14] == struct.pack("!H", MARKER):
                return frames
            if frame[12:14] in (b"\x08\x00", b"\x81\x00", struct.pack("!H", RTAG_ETHERTYPE)):
                frames.append(frame)

    def close(self) -> None:
        for capture in self.captures.values():
            capture.close()
        if self.dp is not None:
            self.dp.close()
        netns.delete_namespace(self.ns)
        if self.passer is not None:
            self.passer.close()


@pytest.fixture
def node(tmp_path) -> Iterator[Node]:
    require_kernel()
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    grant_subnets(store, TENANTS)
    try:
        node = Node(store)
        try:
            yield node
        finally:
            node.close()
    finally:
        store.close()


def test_each_tenants_copies_leave_by_its_own_ports_only(node):
    for tenant in TENANTS:
        node.frer.put_stream(Principal(tenant, frozenset({Scope.READ, Scope.INTENTS_WRITE})), "protected",
                             stream(tenant))
    for tenant, count in FRAMES.items():  # carol's first: a copy on dave's ports would be read there
        node.send(udp(TENANTS[tenant][0]), count)

    received = node.received()

    assert received["in0"] == [], "no copy back out of the ingress port"
    for tenant, (listener, ports) in TENANTS.items():
        for port, vlan in ports.items():
            expected = [tagged(udp(listener), seq, vlan) for seq in range(FRAMES[tenant])]
            assert Counter(received[port]) == Counter(expected), f"{tenant}'s {port}: its copies, each once"
            assert received[port] == expected, f"{tenant}'s {port}: in order"
