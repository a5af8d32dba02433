"""The GTP-U dispatcher ("XDP RSS") in the kernel (BPF_PROG_TEST_RUN): on a dispatcher interface a
T-PDU is redirected to the worker CPU the hash of (TEID, QFI) picks, as netapp.qos.rss_abi's model
of the hash says; a steering rule's CPU wins over the hash; other traffic, and other interfaces'
T-PDUs, stay on the receiving CPU. A plain test run returns the verdict without carrying out the
redirect: the trace says which CPU, and dpp_rss_stats counts it. 10,000 tunnels' spread is
measured through the program."""

from __future__ import annotations

import contextlib
import os
import random
from typing import Iterator

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.core import netns
from netapp.dataplane.facade import Dataplane, interface_index
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from netapp.qos.dispatch import DispatchPlan, Dispatcher, worker_of
from tests.utils.kernel import veth_namespace
from tests.utils.packets.gtp import gtp_echo_request, gtpu

WORKERS = (0, 1)
N3_IP, GNB = "10.3.0.1", "10.3.0.9"
MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}
TUNNELS = 10_000
SPREAD_BOUND = 1.1  # max/min over 2 workers: 5000 each, a binomial's 3 sigma is 3% either way


def t_pdu(teid: int, qfi: int | None = 9, gnb: str = GNB) -> bytes:
    ue = IP(src="10.45.0.7", dst="192.0.2.10") / UDP(sport=40000, dport=5004) / (b"u" * 32)
    return bytes(Ether(**MACS) / IP(src=gnb, dst=N3_IP) / UDP(sport=2152, dport=2152)
                 / gtpu(teid, qfi, ul=True, inner=ue))


@contextlib.contextmanager
def dispatching(*, trace: bool = True) -> Iterator[tuple[Dataplane, Dispatcher, int, int]]:
    """An instance in a namespace of its own, dispatching on n3 to WORKERS; (dp, dispatcher, n3's
    ifindex, the other end's ifindex, which does not dispatch)."""
    if (os.cpu_count() or 1) < len(WORKERS):
        pytest.skip(f"needs {len(WORKERS)} CPUs for {len(WORKERS)} workers")
    with veth_namespace("dpp-rss", "n3", "ot") as name, netns.entered(name):
        n3, other = interface_index("n3"), interface_index("ot")
        with Dataplane.open(trace=trace) as dp:
            dispatcher = Dispatcher(dp)
            dispatcher.apply(DispatchPlan(WORKERS, (n3,)))
            yield dp, dispatcher, n3, other


@contextlib.contextmanager
def steering(dp: Dataplane, n3: int, intent_id: str, match: dict, cpu: int) -> Iterator[None]:
    """One intent steering `match` to `cpu` on n3, removed afterwards."""
    intent = {"id": intent_id, "match": match, "action": {"type": "steer", "cpu": cpu}}
    document = {"intents": [intent], "cpus": [{"cpu": worker} for worker in WORKERS]}
    dp.apply_compiled(compile_document(parse_document(document), {"n3": n3}))
    try:
        yield
    finally:
        dp.apply_compiled(compile_document(parse_document({"intents": []}), {"n3": n3}))


@pytest.fixture(scope="module")
def rss():
    with dispatching() as opened:
        yield opened


def test_a_t_pdu_goes_to_the_worker_the_model_of_the_hash_picks(rss):
    dp, _, n3, _ = rss
    rng = random.Random(18)
    cases = [(rng.getrandbits(32), rng.choice([None, 1, 5, 9, 63])) for _ in range(200)]
    for teid, qfi in cases:
        out = dp.test_run(t_pdu(teid, qfi), n3)
        assert (out.verdict, out.action, out.intent) == ("REDIRECT", "steer", None), hex(teid)
        assert out.cpu == worker_of(teid, qfi or 0, WORKERS), (hex(teid), qfi)
    assert {worker_of(teid, qfi or 0, WORKERS) for teid, qfi in cases} == set(WORKERS)


def test_a_steering_rule_wins_over_the_hash(rss):
    dp, _, n3, _ = rss
    teid = 0x8894D0D4
    hashed = worker_of(teid, 9, WORKERS)
    steered = next(cpu for cpu in WORKERS if cpu != hashed)
    with steering(dp, n3, "pin-tunnel", {"teid": teid}, steered):
        out = dp.test_run(t_pdu(teid), n3)
        assert (out.verdict, out.action, out.intent, out.cpu) == ("REDIRECT", "steer", "pin-tunnel", steered)
        assert dp.test_run(t_pdu(teid + 1), n3).intent is None  # the rule's tunnel only


def test_a_steering_rule_on_the_tunnel_source_wins_over_the_hash(rss):
    """The dispatcher classifies with the tunnel's ids in the key (dataplane/bpf/core/ends.h), as
    the worker does: else a rule naming the gNB's address is not seen until the hash chose a CPU."""
    dp, _, n3, _ = rss
    teid = 0x8894D0D4
    steered = next(cpu for cpu in WORKERS if cpu != worker_of(teid, 9, WORKERS))
    with steering(dp, n3, "pin-gnb", {"tunnel_src": GNB}, steered):
        out = dp.test_run(t_pdu(teid), n3)
        assert (out.verdict, out.action, out.intent, out.cpu) == ("REDIRECT", "steer", "pin-gnb", steered)
        other = dp.test_run(t_pdu(teid, gnb="10.3.0.8"), n3)  # another gNB's tunnel: hashed
        assert (other.intent, other.cpu) == (None, worker_of(teid, 9, WORKERS))


@pytest.mark.parametrize(
    "frame",
    [
        lambda: bytes(Ether(**MACS) / IP(src=GNB, dst=N3_IP) / UDP(sport=40000, dport=5004) / (b"x" * 32)),
        lambda: bytes(Ether(**MACS) / IP(src=GNB, dst=N3_IP) / UDP(sport=2152, dport=2152) / gtp_echo_request(7)),
        lambda: t_pdu(0x1001)[:60],  # cut inside the GTP-U header: the parser's fault, not a tunnel
    ],
    ids=["plain-udp", "gtp-echo", "truncated-t-pdu"],
)
def test_what_is_not_a_t_pdu_stays_on_the_receiving_cpu(rss, frame):
    dp, _, n3, _ = rss
    out = dp.test_run(frame(), n3)
    assert out.verdict != "REDIRECT" and out.cpu is None


def test_a_t_pdu_of_an_interface_that_does_not_dispatch_stays(rss):
    dp, _, _, other = rss
    out = dp.test_run(t_pdu(0x1001), other)
    assert (out.verdict, out.cpu) == ("PASS", None)


def test_after_clear_nothing_is_dispatched():
    with dispatching() as (dp, dispatcher, n3, _):
        dispatcher.clear()
        assert list(dp.table("dpp_rss_cpu_map").items()) == []
        out = dp.test_run(t_pdu(0x1001), n3)
        assert (out.verdict, out.cpu) == ("PASS", None)


def spread(counts: dict[int, int]) -> float:
    return max(counts.values()) / max(min(counts.values()), 1)


@pytest.mark.parametrize("teids", ["sequential", "random"])
def test_ten_thousand_tunnels_spread_evenly_over_the_workers(teids):
    """Through the program, untraced (the counters tell): max/min load over the workers."""
    rng = random.Random(2023)
    chosen = range(0x1000, 0x1000 + TUNNELS) if teids == "sequential" else rng.sample(range(1 << 32), TUNNELS)
    with dispatching(trace=False) as (dp, dispatcher, n3, _):
        for teid in chosen:
            assert dp.test_run(t_pdu(teid), n3).verdict == "REDIRECT"
        counts = dispatcher.dispatched()
    assert sum(counts.values()) == TUNNELS
    assert counts == {cpu: sum(worker_of(t, 9, WORKERS) == cpu for t in chosen) for cpu in WORKERS}
    ratio = spread(counts)
    print(f"{teids} TEIDs: {counts}, max/min {ratio:.3f}")
    assert ratio <= SPREAD_BOUND
