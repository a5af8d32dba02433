"""The pipeline on a real emulated edge site: veth links between network namespaces, the XDP
program attached natively on the NetApp node, real frames sent by the RAN side.

Checks that priority services land on their CPUs, that best effort stays local, that overflow and
forward rules reach the alternative node rewritten and with valid checksums, and that the
counters agree with what was sent.
"""

from __future__ import annotations

import os
import time

import pytest
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from netapp.dataplane.facade import Dataplane
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from netapp.testbed import netns, scenario
from netapp.testbed.topology import EdgeSite
from netapp.testbed.traffic import Capture, Sender
from tests.utils.arrivals import counted_once
from tests.utils.checksums import checksums_valid
from tests.utils.kernel import build_artifact, require_kernel
from tests.utils.maps import pinned_instance

FRAMES_PER_FLOW = 40
CPUS = min(os.cpu_count() or 1, 2)
TEID_OFFSET = 14 + 20 + 8 + 8 + 14 + 20 + 8 + 4  # outer L2-L4, VXLAN, inner L2-L4, GTP flags/len


@pytest.fixture
def site():
    require_kernel()
    with EdgeSite() as edge:
        # Frames redirected into a veth are only received when its peer runs XDP.
        netns.attach_xdp_object(edge.ns("alt"), edge.alt0.ifname, str(build_artifact("xdp_pass.bpf.o")))
        yield edge


def open_node(site: EdgeSite, instance: str) -> Dataplane:
    """The NetApp's control plane starting on the node: open (or reopen) the instance and apply
    the experiment's intents, as it does on every start."""
    with netns.entered(site.ns("node")):
        dp = Dataplane.open(instance=instance)
        doc = parse_document(scenario.document(site, CPUS))
        interfaces = {p.ifname: site.ifindex(p) for p in (site.n3, site.n6, site.alt)}
        dp.apply_compiled(compile_document(doc, interfaces))
        return dp


@pytest.fixture
def instance(site):
    """A pinned instance name; whatever the test did, its pins (and link) go away afterwards."""
    with pinned_instance("it", site.ns("node")) as name:
        yield name


@pytest.fixture
def dataplane(site, instance):
    """The NetApp on the node, attached natively to n3 with the experiment applied."""
    dp = open_node(site, instance)
    with netns.entered(site.ns("node")):
        dp.attach(site.n3.ifname, "native")
    yield dp
    dp.close()


def send_experiment(site: EdgeSite, flows: list[scenario.Flow]) -> None:
    sender = Sender(site.ns("ran"), site.ran0.ifname)
    try:
        sender.send([scenario.frame(site, flow) for flow in flows], rounds=FRAMES_PER_FLOW)
    finally:
        sender.close()


def teid_of(frame: bytes) -> int:
    return int.from_bytes(frame[TEID_OFFSET : TEID_OFFSET + 4], "big")


def experiment_frames(received: list, flows: list[scenario.Flow]) -> list:
    """The captured frames that belong to the experiment (links also carry the kernel's own)."""
    teids = {flow.teid for flow in flows}
    return [rx for rx in received if len(rx.frame) > TEID_OFFSET + 4 and teid_of(rx.frame) in teids]


def arrived(capture: Capture, flows: list[scenario.Flow], count: int, timeout: float = 30.0) -> list:
    """The experiment's frames of `flows` the capture got, once `count` of them did (the kernel's own
    frames not counted towards it) or the timeout passed (a capture's thread on a loaded machine may
    take seconds)."""
    deadline = time.monotonic() + timeout
    while len(received := experiment_frames(list(capture.frames), flows)) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return received


def test_priority_services_run_on_their_cpus_and_best_effort_stays_local(site, dataplane):
    flows = scenario.flows()
    with Capture(site.ns("node"), site.n3.ifname, cpus=os.cpu_count()) as node_rx:
        send_experiment(site, flows)
        received = arrived(node_rx, flows, len(flows) * FRAMES_PER_FLOW)

    by_teid: dict[int, set[int]] = {}
    for rx in received:
        by_teid.setdefault(teid_of(rx.frame), set()).add(rx.cpu)
    for flow in flows:
        if flow.priority:
            assert by_teid.get(flow.teid) == {scenario.target_cpu(flow, CPUS)}, flow
    assert len(received) == len(flows) * FRAMES_PER_FLOW, "every frame reached the node's stack"

    stats = dataplane.rule_stats()
    for flow in flows:
        expected = FRAMES_PER_FLOW * (1 if flow.priority else len(flows) - scenario.PRIORITY_FLOWS)
        assert stats[flow.intent_id][0] == expected, flow.intent_id
    actions = dataplane.action_stats()
    assert actions["steer"][0] == scenario.PRIORITY_FLOWS * FRAMES_PER_FLOW
    assert actions["pass"][0] >= (len(flows) - scenario.PRIORITY_FLOWS) * FRAMES_PER_FLOW


# Bytes a forward may change: MAC addresses, IPv4 checksum, destination address, UDP checksum.
REWRITTEN = {*range(0, 12), 24, 25, *range(30, 34), 40, 41}


def assert_forwarded_to_alternative(site: EdgeSite, original: bytes, forwarded: bytes) -> None:
    """Destination MAC and outer destination IP rewritten, checksums valid, the rest untouched."""
    eth = Ether(forwarded)
    assert (eth.dst, eth.src) == (site.alt0.mac, site.alt.mac)
    assert eth[IP].dst == site.alt0.ip
    assert checksums_valid(forwarded)
    assert len(forwarded) == len(original)
    changed = {i for i, (a, b) in enumerate(zip(original, forwarded)) if a != b}
    assert changed <= REWRITTEN, sorted(changed - REWRITTEN)


def test_an_overloaded_cpu_sends_its_priority_services_to_the_alternative_node(site, dataplane):
    busy_cpu = CPUS - 1
    dataplane.set_cpu_overloaded(busy_cpu, True)
    moved = [f for f in scenario.flows() if f.priority and scenario.target_cpu(f, CPUS) == busy_cpu]
    kept = [f for f in scenario.flows() if f.priority and f not in moved]

    with Capture(site.ns("alt"), site.alt0.ifname, cpus=1) as alt_rx:
        send_experiment(site, moved + kept)
        received = arrived(alt_rx, moved + kept, len(moved) * FRAMES_PER_FLOW)

    originals = {flow.teid: scenario.frame(site, flow) for flow in moved}
    assert sorted({teid_of(rx.frame) for rx in received}) == sorted(originals)
    assert len(received) == len(moved) * FRAMES_PER_FLOW
    for rx in received:
        assert_forwarded_to_alternative(site, originals[teid_of(rx.frame)], rx.frame)

    reasons = dataplane.reason_stats()
    assert reasons["cpu_overloaded"][0] == len(moved) * FRAMES_PER_FLOW
    steered = counted_once(lambda: dataplane.action_stats()["steer"][0], len(kept) * FRAMES_PER_FLOW)
    assert steered == len(kept) * FRAMES_PER_FLOW  # the kept frames, sent last of each round: waited for


def test_an_overloaded_node_forwards_best_effort_instead_of_dropping_it(site, dataplane):
    for cpu in range(os.cpu_count() or 1):
        dataplane.set_cpu_overloaded(cpu, True)
    best_effort = [f for f in scenario.flows() if not f.priority]

    with Capture(site.ns("alt"), site.alt0.ifname, cpus=1) as alt_rx:
        send_experiment(site, best_effort)
        received = arrived(alt_rx, best_effort, len(best_effort) * FRAMES_PER_FLOW)

    assert len(received) == len(best_effort) * FRAMES_PER_FLOW
    assert dataplane.action_stats()["forward"][0] == len(best_effort) * FRAMES_PER_FLOW
    assert dataplane.verdict_stats()["DROP"][0] == 0


def test_traffic_and_counters_survive_a_control_plane_restart(site, instance, dataplane):
    """Pinned maps and link: traffic is handled while no control plane runs, and a restarted one
    takes the rules over with their counters."""
    flow = scenario.Flow(0)
    dataplane.close()
    send_experiment(site, [flow])

    restarted = open_node(site, instance)
    try:
        assert restarted.attached() == [site.ifindex(site.n3)]
        assert counted_once(lambda: restarted.rule_stats()[flow.intent_id][0], FRAMES_PER_FLOW) == FRAMES_PER_FLOW
        send_experiment(site, [flow])
        assert counted_once(lambda: restarted.rule_stats()[flow.intent_id][0], 2 * FRAMES_PER_FLOW) \
            == 2 * FRAMES_PER_FLOW
    finally:
        restarted.close()
