"""FAR BUFF, NOCP and DUPL through the UPF on the veth site of tests/integration/test_upf_e2e.py
(its fixtures: the site, `netapp serve` with XDP in the UPF's namespace, the SMF as a process of its
own in its namespace), with a sender in the data network and plain UDP sockets on the far side:

- BUFF + NOCP: numbered datagrams from the data network to the UE are buffered by the UPF; the SMF
  gets one Session Report Request, a Downlink Data Report naming the downlink PDR; it makes the FAR
  forward to gNB 1, while more datagrams are sent, and gNB 1 receives them all in GTP-U with its
  TEID, none lost, none twice: the buffered ones in order -- replayed through the XDP program on the
  N6 interface --, and those sent once the SMF has the response after every other, in order.
- DUPL: a FAR that forwards to gNB 1 and duplicates to a collector in a namespace of its own linked
  to the UPF: the collector gets a GTP-U copy of each datagram (its TEID, the UE packet inside), and
  gNB 1 still gets every one.

Needs root, libdpp and nsenter (skipped outside CI, a failure under CI).
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
from typing import Iterator

import pytest

from netapp.core.netns import entered
from netapp.dataplane.abi import Reason
from netapp.testbed import netns
from netapp.testbed.gnb import GTP_TPDU, GTPU_PORT, gtpu_parse
from netapp.testbed.topology import Port
from netapp.testbed.upf import UpfSite
from tests.integration.test_upf_e2e import (  # noqa: F401 - the fixtures
    ACCEPTED, DEADLINE_S, GNB1_TEID, LineProcess, ask, instance, serve, site, smf, wait_until,
)
from tests.utils.maps import second_handle

DATAGRAMS = 64  # buffered, then as many live: well within upf.buffer_session_packets
IN_FLIGHT = 32  # sent while the FAR's modification is in flight: buffered, or forwarded at once
UE_PORT = 9000
DOWNLINK_PDR = 2  # tests/upf/smf_agent.py's
DUP_TEID = 0xD0
UPF_DUP = Port("upf", "dup0", "02:00:00:00:70:01", "10.70.0.1")
COLLECTOR = Port("col", "col0", "02:00:00:00:70:02", "10.70.0.2")


@pytest.fixture
def more_peer_networks() -> list[str]:
    """The collector is a peer the UPF may send copies to (upf.peer_networks)."""
    return [f"{COLLECTOR.ip}/32"]


@pytest.fixture
def collector(site: UpfSite) -> Iterator[socket.socket]:
    """A namespace of its own, linked to the UPF's, with a UDP socket on the GTP-U port."""
    name = site.ns(COLLECTOR.host)
    try:
        netns.add_namespace(name)
        netns.add_veth(site.ns("upf"), UPF_DUP.ifname, name, COLLECTOR.ifname)
        for end, peer in ((UPF_DUP, COLLECTOR), (COLLECTOR, UPF_DUP)):
            netns.configure(site.ns(end.host), end.ifname, end.mac, f"{end.ip}/{end.prefix}")
            netns.add_neighbour(site.ns(end.host), end.ifname, peer.ip, peer.mac)
        with gtpu_socket(name, COLLECTOR.ip) as sock:
            yield sock
    finally:
        netns.delete_namespace(name)


@contextlib.contextmanager
def gtpu_socket(ns: str, address: str) -> Iterator[socket.socket]:
    with entered(ns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sock.bind((address, GTPU_PORT))
        yield sock


@contextlib.contextmanager
def dn_sender(site: UpfSite) -> Iterator[socket.socket]:
    with entered(site.ns("dn")):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with sock:
        sock.connect((site.ue_address, UE_PORT))
        yield sock


def send(sock: socket.socket, numbers: range) -> None:
    for number in numbers:
        sock.send(struct.pack("!I", number) * 8)


def receive(sock: socket.socket, count: int) -> list[tuple[int, int]]:
    """(TEID, datagram number) of `count` GTP-U T-PDUs carrying a UDP datagram of `send` to the UE;
    fails if they do not come within the deadline, or if one is anything else."""
    received = []
    sock.settimeout(DEADLINE_S)
    while len(received) < count:
        try:
            data = sock.recv(65535)
        except socket.timeout:
            raise AssertionError(f"{len(received)} of {count} T-PDUs arrived: {received}") from None
        kind, teid, packet = gtpu_parse(data) or (None, None, b"")
        assert kind == GTP_TPDU, data[:16].hex()
        header = (packet[0] & 0x0F) * 4
        assert packet[9] == socket.IPPROTO_UDP and socket.inet_ntoa(packet[16:20]) == UpfSite.ue_address, packet[:28].hex()
        assert struct.unpack_from("!H", packet, header + 2)[0] == UE_PORT
        payload = packet[header + 8 :]
        assert payload == payload[:4] * 8, payload.hex()
        received.append((teid, struct.unpack_from("!I", payload)[0]))
    return received


def buffered_by_xdp(instance: str) -> int:
    handle = second_handle(instance)
    try:
        return handle.stats_reasons()[Reason.UPF_BUFFERED][0]
    finally:
        handle.close()


def test_buffered_downlink_is_reported_then_replayed_in_order_before_the_live_packets(
    site, instance, serve, smf: LineProcess
):
    ask(smf, op="associate")
    session = ask(smf, op="establish", ue=site.ue_address, gnb=site.gnb1.ip, teid=GNB1_TEID, buffer=True)
    with gtpu_socket(site.ns("gnb1"), site.gnb1.ip) as gnb1, dn_sender(site) as dn:
        send(dn, range(DATAGRAMS))
        report = ask(smf, op="next_report")
        assert (report["types"], report["dldr_pdrs"]) == (["DLDR"], [DOWNLINK_PDR]), report
        wait_until(lambda: buffered_by_xdp(instance) >= DATAGRAMS, "the UPF buffers every datagram")

        smf.send(json.dumps({"op": "forward_downlink", "seid": session["seid"], "gnb": site.gnb1.ip,
                             "teid": GNB1_TEID}))
        send(dn, range(DATAGRAMS, DATAGRAMS + IN_FLIGHT))
        assert json.loads(smf.read_line())["cause"] == ACCEPTED
        after = range(DATAGRAMS + IN_FLIGHT, 2 * DATAGRAMS + IN_FLIGHT)
        send(dn, after)
        arrived = receive(gnb1, 2 * DATAGRAMS + IN_FLIGHT)
        numbers = [number for _, number in arrived]
        assert {teid for teid, _ in arrived} == {GNB1_TEID}
        assert sorted(numbers) == list(range(2 * DATAGRAMS + IN_FLIGHT)), "none lost, none twice"
        assert [number for number in numbers if number < DATAGRAMS] == list(range(DATAGRAMS)), "replayed in order"
        assert numbers[-DATAGRAMS:] == list(after), "no datagram sent after the response overtakes another"
        quiet = json.loads(smf.ask(json.dumps({"op": "next_report", "timeout": 0.5})))
        assert quiet.get("error", "").startswith("TimeoutError"), f"a second report: {quiet}"
    assert DATAGRAMS <= buffered_by_xdp(instance) <= DATAGRAMS + IN_FLIGHT


def test_duplicated_downlink_reaches_the_collector_and_the_gnb(site, instance, serve, smf: LineProcess, collector):
    ask(smf, op="associate")
    ask(smf, op="establish", ue=site.ue_address, gnb=site.gnb1.ip, teid=GNB1_TEID, duplicate=[COLLECTOR.ip, DUP_TEID])
    with gtpu_socket(site.ns("gnb1"), site.gnb1.ip) as gnb1, dn_sender(site) as dn:
        send(dn, range(DATAGRAMS))
        assert receive(gnb1, DATAGRAMS) == [(GNB1_TEID, number) for number in range(DATAGRAMS)]
        copies = receive(collector, DATAGRAMS)
    assert sorted(copies) == [(DUP_TEID, number) for number in range(DATAGRAMS)]
