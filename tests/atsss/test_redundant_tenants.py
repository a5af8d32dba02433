"""REDUNDANT sessions of two tenants over other interfaces, put through the service (netapp.atsss)
into the maps of the downlink program in the kernel (xdp_atsss.bpf.o): each set of ports gets its
own group of dpp_atsss_tx, and xdp_atsss run in live-frame mode (BPF_F_TEST_XDP_LIVE_FRAMES, the
broadcast carried out) sends each tenant's copies out of its own ports only, byte for byte what
RFC 4340 and the MP_SEQ layout say. What leaves each port is read on its veth peer (an AF_PACKET
socket behind an XDP program that passes, which veth needs to take redirected frames)."""

from __future__ import annotations

import secrets
import socket
from typing import Any, Iterator

import pytest

from bench.libbpf import BpfObject
from bench.libbpf import test_run_live as run_live  # not collected as a test
from bench.throughput.sink import attach_native
from netapp.atsss.models import AtsssSessionSpec
from netapp.atsss.service import Atsss
from netapp.atsss.table import AtsssMaps
from netapp.core import netns as namespaces
from netapp.service.contract import Principal, Scope
from netapp.service.store import Store
from netapp.testbed import netns
from tests.atsss.atsss import PathSpec, delete_every_session, ethernet, expected_frame, path_body, ue_packet
from tests.atsss.test_redundant import received
from tests.utils.kernel import build_artifact
from tests.utils.object_tables import ObjectTables
from tests.utils.service import grant_subnets

ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
CAROL = Principal("carol", frozenset({Scope.READ, Scope.INTENTS_WRITE}))
DAVE = Principal("dave", frozenset({Scope.READ, Scope.INTENTS_WRITE}))
# each tenant's UE and the ports its paths leave by
TENANTS = {"carol": ("10.60.0.2", ("c0", "c1")), "dave": ("10.70.0.2", ("d0", "d1"))}
PATHS = {
    "carol": [PathSpec("10.0.1.1", "10.0.1.2", sport=5001, dport=5002),
              PathSpec("10.0.2.1", "10.0.2.2", sport=5003, dport=5004, dmac=bytes.fromhex("02000000bb02"))],
    "dave": [PathSpec("10.0.3.1", "10.0.3.2", sport=6001, dport=6002, dmac=bytes.fromhex("02000000bb03")),
             PathSpec("10.0.4.1", "10.0.4.2", sport=6003, dport=6004, dmac=bytes.fromhex("02000000bb04"))],
}  # fmt: skip
PACKETS = 16  # at most 64: a live run writes the frame into its pool's 64 pages once
ETH_P_ALL = 0x0003


class Site:
    """A namespace: the ingress port in0 and each tenant's ports (each with its path's local address),
    their peers captured; the service over the program's maps, looking the ports up in that namespace."""

    def __init__(self, program: Any, store: Store):
        self.ns = f"dppred-{secrets.token_hex(3)}"
        self.program = program
        self.ports = [port for _, ports in TENANTS.values() for port in ports]
        self.passer = BpfObject(build_artifact("xdp_pass.bpf.o"))
        self.captures: dict[str, socket.socket] = {}
        netns.add_namespace(self.ns)
        netns.add_ports(self.ns, ("in0", *self.ports))
        for tenant, (_, ports) in TENANTS.items():  # each path's local: its port's address on the node
            for spec, port in zip(PATHS[tenant], ports):
                netns.run(["ip", "addr", "add", f"{spec.local}/32", "dev", port], netns=self.ns)
        with namespaces.entered(self.ns):
            for port in self.ports:
                attach_native(socket.if_nametoindex(f"{port}p"), self.passer.program_fd("xdp_pass"))
                capture = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                capture.bind((f"{port}p", 0))
                capture.settimeout(5)
                self.captures[port] = capture
            self.ifindex = {port: socket.if_nametoindex(port) for port in ("in0", *self.ports)}
        self.maps = AtsssMaps(ObjectTables(program.obj).table)
        self.atsss = Atsss(store, self.maps, netns=self.ns, program_fd=program.obj.program_fd)

    def send(self, ue: str, count: int) -> bytes:
        inner = ue_packet(ue, f"to {ue}".encode())
        with namespaces.entered(self.ns):
            run_live(self.program.prog, ethernet(inner), count, self.ifindex["in0"])
        return inner

    def close(self) -> None:
        delete_every_session(self.atsss, ADMIN)
        for capture in self.captures.values():
            capture.close()
        netns.delete_namespace(self.ns)
        self.passer.close()


@pytest.fixture
def site(atsss, tmp_path) -> Iterator[Site]:
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    grant_subnets(store, TENANTS)
    site = Site(atsss, store)
    try:
        yield site
    finally:
        site.close()
        store.close()


def redundant(tenant: str) -> AtsssSessionSpec:
    ue, ports = TENANTS[tenant]
    return AtsssSessionSpec.model_validate({"name": "ue", "ue": ue, "mode": "redundant", "paths": [
        path_body(spec, interface=port) for spec, port in zip(PATHS[tenant], ports)]})


def test_two_tenants_redundant_sessions_send_their_copies_out_of_their_own_ports_only(site):
    site.atsss.create_session(CAROL, "ue", redundant("carol"))
    site.atsss.create_session(DAVE, "ue", redundant("dave"))
    groups = {tuple(ifindex for _, (ifindex, _) in sorted(ports.items())) for ports in site.maps.groups_ports().values()}
    assert groups == {tuple(site.ifindex[port] for port in ports) for _, ports in TENANTS.values()}

    # carol's packets first: a copy of one on dave's ports would be read there before dave's own
    sent = {tenant: site.send(TENANTS[tenant][0], PACKETS) for tenant in ("carol", "dave")}

    for tenant, (_, ports) in TENANTS.items():
        for position, port in enumerate(ports):
            expected = [expected_frame(PATHS[tenant][position], n, n, sent[tenant]) for n in range(PACKETS)]
            assert received(site.captures[port], PACKETS) == expected, f"{tenant}'s {port}"


def test_a_group_goes_with_the_last_session_naming_its_ports_and_the_other_stays(site):
    site.atsss.create_session(CAROL, "ue", redundant("carol"))
    site.atsss.create_session(DAVE, "ue", redundant("dave"))
    carol_group = site.maps.session(site.atsss.get_session(CAROL, "ue").ue).tx_group

    site.atsss.delete_session(DAVE, "ue")

    assert list(site.maps.groups_ports()) == [carol_group]
    inner = site.send(TENANTS["carol"][0], PACKETS)
    for position, port in enumerate(TENANTS["carol"][1]):
        assert received(site.captures[port], PACKETS) == [
            expected_frame(PATHS["carol"][position], n, n, inner) for n in range(PACKETS)]
