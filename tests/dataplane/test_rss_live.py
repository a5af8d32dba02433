"""The GTP-U dispatcher with its redirect carried out (BPF_F_TEST_XDP_LIVE_FRAMES): T-PDUs received
on the dispatcher's CPU go through CPUMAP to the worker, whose program (dpp_rss_worker) runs the UPF
there: the decapsulated UE packet reaches the stack of the veth end, and the counters say the UPF ran
on the worker, the dispatch on the receiving CPU."""

from __future__ import annotations

import os
import select
import socket
import threading

import pytest

from bench.libbpf import test_run_live as run_live
from netapp.core import netns
from netapp.dataplane.abi import Action
from netapp.dataplane.facade import Dataplane, interface_index
from netapp.qos.dispatch import DispatchPlan, Dispatcher
from netapp.upf.abi import Output, Role
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.compiler import Site
from tests.upf.test_datapath import N3_IP, N3_IP6, TEID, decapsulated, session, uplink_frame
from tests.utils.kernel import veth_namespace

FRAMES = 64
RECEIVER, WORKER = 0, 1
ETH_P_ALL = 0x0003


def receive(sock: socket.socket, wanted: bytes, count: int, timeout_s: float = 5.0) -> int:
    """Frames equal to `wanted` read from sock until `count` of them came or nothing came for timeout_s."""
    got = 0
    while got < count:
        ready, _, _ = select.select([sock], [], [], timeout_s)
        if not ready:
            break
        got += sock.recv(4096) == wanted
    return got


def per_cpu(dp: Dataplane, name: str, index: int) -> list[int]:
    return [counter.packets for counter in dp.table(name).get(index)]


def live_on(cpu: int, prog_fd: int, frame: bytes, ifindex: int) -> None:
    """FRAMES live frames of `frame`, sent from a thread pinned to `cpu` (the receiving CPU)."""
    def send() -> None:
        os.sched_setaffinity(0, {cpu})
        run_live(prog_fd, frame, FRAMES, ifindex)

    thread = threading.Thread(target=send)
    thread.start()
    thread.join()


def test_dispatched_t_pdus_are_decapsulated_by_the_upf_on_the_worker():
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 CPUs: a receiving CPU and a worker")
    with veth_namespace("dpp-rss-live", "n3", "n3p") as name, netns.entered(name):
        n3 = interface_index("n3")
        with Dataplane.open() as dp, socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL)) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)  # every frame kept until read
            sock.bind(("n3", 0))
            site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP,
                        n3_ipv6=N3_IP6, output=Output.PASS)
            BpfApplier(dp.table, site, iface_entries({n3: (Role.N3, 0)}, N3_IP, N3_IP6)).apply(None, session())
            Dispatcher(dp).apply(DispatchPlan((WORKER,), (n3,)))

            live_on(RECEIVER, dp.program_fd("dpp_xdp"), uplink_frame(TEID), n3)

            assert receive(sock, decapsulated(), FRAMES) == FRAMES
            assert per_cpu(dp, "dpp_rss_stats", WORKER)[RECEIVER] == FRAMES
            assert per_cpu(dp, "dpp_actions", Action.STEER)[RECEIVER] == FRAMES
            assert per_cpu(dp, "dpp_actions", Action.UPF)[WORKER] == FRAMES
            assert per_cpu(dp, "dpp_actions", Action.UPF)[RECEIVER] == 0
