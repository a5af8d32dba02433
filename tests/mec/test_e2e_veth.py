"""The MEC front doors end to end on the veth edge site (netapp.testbed.topology.EdgeSite): `netapp
serve`'s service on the node, attached natively to n3, its API served by uvicorn; real frames from
the RAN side (VXLAN / GTP-U / UE packet, netapp.testbed.scenario) counted where they arrive.

    ran ──(ran0 ↔ n3)── node ──(alt ↔ alt0)── alt

- A MEC 011 PACKET rule on one UE's flow (the GTP-U packet's inner headers), PASSTHROUGH to the
  MAC of the node's `alt` interface, sends that flow's frames to the alternative node and leaves
  another UE's flow on the node; INACTIVE gives the flow back to the node.
- A MEC 011 PACKET rule on a GTP-U tunnel's source address (srcTunnelAddress, the IP header inside
  VXLAN that carries GTP-U) does the same to every frame of that gNB's tunnel, and leaves GTP-U from
  another gNB on the node.
- A MEC 015 bandwidth allocation on one UE's uplink limits what of its flow the node delivers to
  the allocation's rate (and burst), offered at twice the rate, while another flow is untouched.

Needs root and libdpp (tests/utils/kernel.py: skipped outside CI, a failure under CI)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import httpx
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.layers.vxlan import VXLAN

from netapp.api.auth import write_tokens_file
from netapp.api.main import create_app
from netapp.core.config import InterfaceSetting, QosSettings, Settings
from netapp.qos.spec import PoliceDefaults
from netapp.service.service import NetAppService
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
from netapp.testbed import netns, scenario
from netapp.testbed.topology import EdgeSite
from netapp.testbed.traffic import Capture, Sender
from tests.api.conftest import CALLERS, token_of, tokens_file_for
from tests.api.server import ServerThread
from tests.utils.kernel import build_artifact, require_kernel
from tests.utils.maps import pinned_instance
from tests.utils.mec import traffic_rule
from tests.utils.service import ADMIN

pytestmark = pytest.mark.slow

APP, TENANT = "app-e2e", "tenant-a"
MOVED, KEPT = scenario.Flow(3), scenario.Flow(12)  # two UEs' uplink flows (UDP to port 5004)
FRAMES = 200  # per flow and round
RULE = f"/mec_app_support/v1/applications/{APP}/traffic_rules/to-alt"
ALLOCATIONS = "/bwm/v1/bw_allocations"
TEID_OFFSET = 14 + 20 + 8 + 8 + 14 + 20 + 8 + 4  # outer L2-L4, VXLAN, inner L2-L4, GTP-U flags/length
# A policer's burst: half a second of its rate, so that a sender that a busy CPU holds back for a
# moment, then catches up, is not cut below the rate it offers over the run.
BURST_MS = 500
ARRIVAL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Node:
    site: EdgeSite
    service: NetAppService
    api: httpx.Client  # tenant-a's

    def frame(self, flow: scenario.Flow) -> bytes:
        return scenario.frame(self.site, flow)


@contextlib.contextmanager
def serving_node(tmp_path: Path, tenants: dict[str, TenantSpec], rules: list[dict],
                 receivers: tuple[str, ...] = ("alt",)) -> Iterator[Node]:
    """An edge site whose node runs the service, with `tenants`, and APP of tenant-a holding `rules`,
    as declared by the administrator; `receivers`: the hosts whose end of their link with the node
    receives what the node redirects to it."""
    require_kernel()
    tokens = tmp_path / "tokens.yaml"
    write_tokens_file(tokens, tokens_file_for(CALLERS))
    with EdgeSite() as site, pinned_instance("mece2e", site.ns("node")) as instance:
        # Frames redirected into a veth are only received when its peer runs XDP.
        for host in receivers:
            port = {"alt": site.alt0, "core": site.core0}[host]
            netns.attach_xdp_object(site.ns(host), port.ifname, str(build_artifact("xdp_pass.bpf.o")))
        settings = Settings(state_dir=tmp_path / "state", instance=instance, max_rules=256, tokens_file=tokens,
                            netns=site.ns("node"), interfaces=[InterfaceSetting(name=site.n3.ifname, mode="native")],
                            qos=QosSettings(default_burst_ms=BURST_MS))
        service = NetAppService(settings)
        service.start()
        try:
            for name, spec in tenants.items():
                TenantService(lambda: service.store).put_tenant(ADMIN, name, spec)
            with ServerThread(create_app(settings, service)) as server:
                admin, api = (httpx.Client(base_url=server.url, timeout=30,
                                           headers={"Authorization": f"Bearer {token_of(name)}"})
                              for name in ("admin", TENANT))
                with admin, api:
                    declared = admin.post("/api/v1/mec/applications", json={
                        "appInstanceId": APP, "tenant": TENANT, "trafficRules": rules})
                    assert declared.status_code == 201, declared.text
                    yield Node(site, service, api)
        finally:
            service.close()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    with serving_node(tmp_path, {TENANT: TenantSpec(site=True)}, [moved_rule("INACTIVE")]) as serving:
        yield serving


def teid_of(frame: bytes) -> int:
    return int.from_bytes(frame[TEID_OFFSET : TEID_OFFSET + 4], "big")


def count_by_flow(received: list, flows: tuple[scenario.Flow, ...]) -> dict[int, int]:
    """Frames received per flow index (links also carry the kernel's own frames: not counted)."""
    by_teid = {flow.teid: flow.index for flow in flows}
    counts = {flow.index: 0 for flow in flows}
    for rx in received:
        index = by_teid.get(teid_of(rx.frame)) if len(rx.frame) > TEID_OFFSET + 4 else None
        if index is not None:
            counts[index] += 1
    return counts


def wait_for_flows(capture: Capture, expected: dict[int, int]) -> dict[int, int]:
    """The frames per flow once each flow has at least its expected count (or the timeout passed)."""
    flows = tuple(scenario.Flow(index) for index in expected)
    deadline = time.monotonic() + ARRIVAL_TIMEOUT_S
    while True:
        counts = count_by_flow(list(capture.frames), flows)
        if all(counts[index] >= n for index, n in expected.items()) or time.monotonic() > deadline:
            return counts
        time.sleep(0.02)


def send_both(node: Node) -> None:
    sender = Sender(node.site.ns("ran"), node.site.ran0.ifname)
    try:
        sender.send([node.frame(MOVED), node.frame(KEPT)], rounds=FRAMES)
    finally:
        sender.close()


def moved_rule(state: str) -> dict:
    """MOVED's UE packets (inside GTP-U inside VXLAN) out of the node's alt interface."""
    return traffic_rule(
        "to-alt", state=state, action="PASSTHROUGH",
        trafficFilter=[{"srcAddress": [f"{MOVED.ue_ip}/32"], "protocol": ["UDP"], "dstPort": ["5004"]}],
        dstInterface={"interfaceType": "MAC", "srcMacAddress": node_mac(EdgeSite.alt.mac)},
    )  # fmt: skip


def node_mac(mac: str) -> str:
    return mac.replace(":", "-").upper()  # MEC 011's MacAddress notation


def put_rule(node: Node, state: str) -> None:
    response = node.api.put(RULE, json=moved_rule(state))
    assert response.status_code == 200, response.text


def test_a_traffic_rule_moves_one_ues_gtpu_flow_to_the_alternative_node_and_inactive_gives_it_back(node):
    site = node.site
    put_rule(node, "ACTIVE")
    with Capture(site.ns("alt"), site.alt0.ifname, cpus=1) as alt_rx, \
            Capture(site.ns("node"), site.n3.ifname, cpus=1) as node_rx:
        send_both(node)
        at_alt = wait_for_flows(alt_rx, {MOVED.index: FRAMES, KEPT.index: 0})
        at_node = wait_for_flows(node_rx, {MOVED.index: 0, KEPT.index: FRAMES})
    # Each frame arrives once: all of MOVED's at the alternative node, all of KEPT's at the node.
    assert at_alt == {MOVED.index: FRAMES, KEPT.index: 0}
    assert at_node == {MOVED.index: 0, KEPT.index: FRAMES}

    put_rule(node, "INACTIVE")
    with Capture(site.ns("node"), site.n3.ifname, cpus=1) as node_rx:
        send_both(node)
        at_node = wait_for_flows(node_rx, {MOVED.index: FRAMES, KEPT.index: FRAMES})
    # Every frame of both flows reached the node's stack: none of them went to the alternative node.
    assert at_node == {MOVED.index: FRAMES, KEPT.index: FRAMES}


def allocation(rate_bps: int) -> dict:
    session = {"sourceIp": MOVED.ue_ip, "protocol": "UDP", "dstPort": ["5004"]}
    return {"appInsId": APP, "requestType": 1, "fixedAllocation": str(rate_bps), "allocationDirection": "01",
            "sessionFilter": [session]}


def paced(send: Callable[[], None], per_second: float, seconds: float) -> float:
    """Call `send` `per_second * seconds` times, never faster than `per_second` (pacing the offered
    load, not waiting on anything); the time it took. A call that comes late (a stalled sender on a
    busy machine) moves the schedule on instead of being caught up in a burst: the policer never
    sees more than the offered rate, whatever the machine's load, only for longer."""
    start = due = time.monotonic()
    for _ in range(int(per_second * seconds)):
        ahead = due - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        else:
            due -= ahead  # late: from now on
        send()
        due += 1 / per_second
    return time.monotonic() - start


def test_a_bandwidth_allocation_limits_what_the_node_delivers_of_the_ues_flow_to_its_rate(node):
    site = node.site
    moved, kept = node.frame(MOVED), node.frame(KEPT)
    per_second, seconds = 400, 3.0
    rate_bps = len(moved) * 8 * per_second // 2  # the flow is offered at twice the allocation
    created = node.api.post(ALLOCATIONS, json=allocation(rate_bps))
    assert created.status_code == 201, created.text

    sender = Sender(site.ns("ran"), site.ran0.ifname)
    try:
        with Capture(site.ns("node"), site.n3.ifname, cpus=1) as node_rx:
            elapsed = paced(lambda: sender.send([moved, kept]), per_second, seconds)
            sent = int(per_second * seconds)
            # The frames go in pairs down one queue: once KEPT's last is in, MOVED's were all decided.
            received = wait_for_flows(node_rx, {MOVED.index: 0, KEPT.index: sent})
    finally:
        sender.close()

    assert received[KEPT.index] == sent, "a flow outside the allocation lost frames"
    settings = node.service.settings.qos
    burst = PoliceDefaults.of(settings.default_algorithm, settings.default_burst_ms).burst(rate_bps)
    allowed = (rate_bps * elapsed / 8 + burst) / len(moved)  # token bucket: the rate over the time, and the burst
    assert received[MOVED.index] <= allowed + 1, (received, allowed, sent)
    # The allocation passes its rate: half of what was offered (more where the sender stalled and the
    # bucket filled meanwhile), not a trickle.
    assert received[MOVED.index] >= 0.4 * sent, (received, sent)


# GTP-U tunnels: the scenario's gNB (the IP header inside VXLAN that carries GTP-U) and another one.
TUNNEL_RULE = f"/mec_app_support/v1/applications/{APP}/traffic_rules/gnb-to-alt"
OTHER_GNB = "172.16.0.99"


def tunnel_rule(state: str) -> dict:
    """Every GTP-U packet from the scenario's gNB out of the node's alt interface (MEC 011's tunnel
    filter: "used for GTP tunnel based traffic rule")."""
    return traffic_rule(
        "gnb-to-alt", state=state, action="PASSTHROUGH",
        trafficFilter=[{"srcTunnelAddress": [scenario.INNER_SRC_IP], "dstTunnelPort": ["2152"]}],
        dstInterface={"interfaceType": "MAC", "srcMacAddress": node_mac(EdgeSite.alt.mac)},
    )  # fmt: skip


def from_gnb(frame: bytes, gnb: str) -> bytes:
    """The frame with its GTP-U tunnel sent from `gnb` (checksums computed again)."""
    packet = Ether(frame)
    tunnel = packet[VXLAN][IP]
    tunnel.src = gnb
    del tunnel.chksum, tunnel[UDP].chksum
    return bytes(packet)


@pytest.fixture
def tunnel_node(tmp_path: Path) -> Iterator[Node]:
    with serving_node(tmp_path, {TENANT: TenantSpec(site=True)}, [tunnel_rule("INACTIVE")]) as serving:
        yield serving


def test_a_tunnel_filter_moves_the_gtpu_of_one_gnb_to_the_alternative_node_and_inactive_gives_it_back(tunnel_node):
    node, site = tunnel_node, tunnel_node.site
    # MOVED's frames come through the named gNB's tunnel, KEPT's through another gNB's: the rule names
    # no UE, TEID or inner header, so only the tunnel's source tells them apart.
    frames = [node.frame(MOVED), from_gnb(node.frame(KEPT), OTHER_GNB)]

    def send() -> None:
        sender = Sender(site.ns("ran"), site.ran0.ifname)
        try:
            sender.send(frames, rounds=FRAMES)
        finally:
            sender.close()

    response = node.api.put(TUNNEL_RULE, json=tunnel_rule("ACTIVE"))
    assert response.status_code == 200, response.text
    with Capture(site.ns("alt"), site.alt0.ifname, cpus=1) as alt_rx, \
            Capture(site.ns("node"), site.n3.ifname, cpus=1) as node_rx:
        send()
        at_alt = wait_for_flows(alt_rx, {MOVED.index: FRAMES, KEPT.index: 0})
        at_node = wait_for_flows(node_rx, {MOVED.index: 0, KEPT.index: FRAMES})
    assert at_alt == {MOVED.index: FRAMES, KEPT.index: 0}
    assert at_node == {MOVED.index: 0, KEPT.index: FRAMES}

    response = node.api.put(TUNNEL_RULE, json=tunnel_rule("INACTIVE"))
    assert response.status_code == 200, response.text
    with Capture(site.ns("node"), site.n3.ifname, cpus=1) as node_rx:
        send()
        at_node = wait_for_flows(node_rx, {MOVED.index: FRAMES, KEPT.index: FRAMES})
    assert at_node == {MOVED.index: FRAMES, KEPT.index: FRAMES}
