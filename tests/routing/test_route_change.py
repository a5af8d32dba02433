"""A change of the host's routes takes effect under traffic, with the route cache on (issue 18):
uplink T-PDUs are sent through the program as live frames (BPF_F_TEST_XDP_LIVE_FRAMES: their
redirect carried out) to the data network's router on N6 while the route watch keeps the cache's
generation; `ip route replace` moves the data network to another router, and frames with the new
router's MAC arrive at N6's peer. The cache keeps an answer for as long as its generation stands
(no age), so only the watch's bump brings the new route in: without it no such frame ever comes.
How long it takes (issue 18's bound: 100 ms) is a figure of the machine's load as much as of the
code: printed here, not asserted (a loaded machine spends that on starting `ip` alone)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from netapp.dataplane.facade import interface_index
from netapp.testbed import netns
from netapp.upf.nexthop import RouteWatch
from tests.upf.test_nexthop import DATA_NETWORK, ROUTER_MAC, site, uplink_frame  # noqa: F401 - fixture
from tests.utils.kernel import one_cpu  # noqa: F401 - a fixture

OTHER_ROUTER, OTHER_ROUTER_MAC = "10.6.0.3", "02:00:00:00:06:03"
DEADLINE_S = 10.0  # generous for a loaded machine; only a failure waits it out
UNDER_TRAFFIC = 100  # frames sent before the route changes
ETH_P_ALL = 0x0003
XDP_PASS_OBJECT = Path(__file__).resolve().parents[2] / "dataplane" / "build" / "xdp_pass.bpf.o"


class Arrivals:
    """The frames N6's peer receives: the time each destination MAC was first seen."""

    def __init__(self, ifname: str):
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self._sock.bind((ifname, 0))
        self._sock.settimeout(0.05)
        self.first: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                frame = self._sock.recv(2048)
            except socket.timeout:
                continue
            mac = ":".join(f"{byte:02x}" for byte in frame[:6])
            self.first.setdefault(mac, time.monotonic())

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()


class Traffic:
    """Live frames into the program on N3 as fast as one thread sends them."""

    def __init__(self, dp, frame: bytes, ifindex: int):
        self._dp, self._frame, self._ifindex = dp, frame, ifindex
        self._stop = threading.Event()
        self.sent = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._dp.upf_replay(self._frame, self._ifindex)
            self.sent += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def wait_for_mac(arrivals: Arrivals, mac: str) -> float:
    deadline = time.monotonic() + DEADLINE_S
    while mac not in arrivals.first:
        assert time.monotonic() < deadline, f"no frame to {mac} arrived"
        time.sleep(0.001)
    return arrivals.first[mac]


def wait_for_sent(traffic: Traffic, frames: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while traffic.sent <= frames:
        assert time.monotonic() < deadline, f"{traffic.sent} frames sent"
        time.sleep(0.001)


def test_a_route_change_takes_effect_under_traffic(site, one_cpu):  # noqa: F811
    """The sender's thread on one CPU (it inherits the test's affinity): the cache is per CPU, and a
    CPU that never cached the old answer would ask the FIB whatever the generation."""
    name, dp = site
    netns.add_neighbour(name, "n6", OTHER_ROUTER, OTHER_ROUTER_MAC)
    netns.attach_xdp_object(name, "n6p", str(XDP_PASS_OBJECT))  # a veth delivers redirected frames so
    with RouteWatch(dp.table("dpp_upf_route_gen")) as watch:
        assert watch.generation != 0, "the cache is on"
        arrivals = Arrivals("n6p")
        traffic = Traffic(dp, uplink_frame(), interface_index("n3"))
        try:
            wait_for_mac(arrivals, ROUTER_MAC)
            wait_for_sent(traffic, UNDER_TRAFFIC)  # the change lands among frames being sent
            netns.run(["ip", "route", "replace", DATA_NETWORK, "via", OTHER_ROUTER], netns=name)
            changed = time.monotonic()  # the kernel holds the new route: `ip` has returned
            took = wait_for_mac(arrivals, OTHER_ROUTER_MAC) - changed
        finally:
            traffic.close()
            arrivals.close()
        print(f"\nthe new route took {took * 1000:.1f} ms after `ip route replace` returned")
        assert traffic.sent > UNDER_TRAFFIC
