"""MEC 011 DUPLICATE_ENCAPSULATED and DUPLICATE_DECAPSULATED rules end to end on the veth edge site
(netapp.testbed.topology): the service on the node, its API served by uvicorn, real frames from the
RAN side (VXLAN / GTP-U / UE packet) counted where they arrive.

    ran ──(ran0 ↔ n3)── node ──(n6 ↔ core0)── core
                         └───(alt ↔ alt0)──── alt

Two tenants own one UE each (grants on the UE's address). tenant-a's application duplicates its
UE's UDP to port 5004 out of the node's n6 and alt, named by their MACs; a PUT of the rule over
tenant-b's UE is refused and changes nothing (a rule lies inside its tenant's traffic). Each copy of tenant-a's UE's
frames arrives once at core and once at alt, as it came (still in its tunnels); tenant-b's UE's
frames, of the same port, are not duplicated: they reach the node's stack, once each.

The same rule PUT as DUPLICATE_DECAPSULATED: the first dstInterface's copy (n6's, the application's)
arrives at core as the UE packet behind the outer Ethernet addresses, compared byte for byte with the
UE packet scapy built, for a frame in VXLAN over IPv4 and one in GTP-U over IPv6; alt's copy arrives
as it was sent. PUT INACTIVE, every frame reaches the node's stack and no copy leaves.

Needs root and libdpp (tests/utils/kernel.py: skipped outside CI, a failure under CI)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from netapp.tenancy.models import Destinations, TenantSpec, TrafficGrant
from netapp.testbed import scenario
from netapp.testbed.topology import EdgeSite
from netapp.testbed.traffic import Capture, Sender
from tests.mec.test_e2e_veth import APP, KEPT, MOVED, TENANT, Node, node_mac, serving_node, wait_for_flows
from tests.utils import packets
from tests.utils.arrivals import decapsulated, received, wait_for
from tests.utils.mec import traffic_rule

pytestmark = pytest.mark.slow

OTHER = "tenant-b"  # owns KEPT's UE
FRAMES = 50  # per flow
RULES = f"/mec_app_support/v1/applications/{APP}/traffic_rules"


def duplicate_rule(rule_id: str = "copies", ue_ip: str = MOVED.ue_ip, action: str = "DUPLICATE_ENCAPSULATED",
                   state: str = "ACTIVE") -> dict:
    """A UE's UDP to port 5004, a copy out of n6 and one out of alt (n6's, the first, is the
    application's: the one DUPLICATE_DECAPSULATED decapsulates)."""
    return traffic_rule(
        rule_id, action=action, state=state,
        trafficFilter=[{"srcAddress": [f"{ue_ip}/32"], "protocol": ["UDP"], "dstPort": ["5004"]}],
        dstInterface=[{"interfaceType": "MAC", "srcMacAddress": node_mac(mac)} for mac in (EdgeSite.n6.mac,
                                                                                          EdgeSite.alt.mac)],
    )


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    # tenant-a's copies leave by n6 and alt: its destinations (a confined tenant's default: none)
    copies_out = Destinations(interfaces=[EdgeSite.n6.ifname, EdgeSite.alt.ifname])
    tenants = {TENANT: TenantSpec(traffic=[TrafficGrant(src=f"{MOVED.ue_ip}/32")], destinations=copies_out),
               OTHER: TenantSpec(traffic=[TrafficGrant(src=f"{KEPT.ue_ip}/32")])}
    with serving_node(tmp_path, tenants, [duplicate_rule()], receivers=("alt", "core")) as serving:
        yield serving


def test_a_duplicate_rule_sends_a_copy_to_each_interface_and_leaves_another_tenants_flow_alone(node):
    site = node.site
    stored = node.api.get(f"{RULES}/copies")
    assert stored.status_code == 200 and len(stored.json()["dstInterfaces"]) == 2, stored.text
    others = node.api.put(f"{RULES}/copies", json=duplicate_rule(ue_ip=KEPT.ue_ip))
    assert others.status_code == 400, others.text
    assert others.json()["invalid-params"][0]["name"] == "trafficFilter[0].srcAddress"
    assert "outside the traffic of tenant 'tenant-a'" in others.json()["detail"]
    assert node.api.get(f"{RULES}/copies").json() == stored.json()
    sender = Sender(site.ns("ran"), site.ran0.ifname)
    try:
        with Capture(site.ns("core"), site.core0.ifname, cpus=1) as core_rx, \
                Capture(site.ns("alt"), site.alt0.ifname, cpus=1) as alt_rx, \
                Capture(site.ns("node"), site.n3.ifname, cpus=1) as node_rx:
            sender.send([node.frame(MOVED), node.frame(KEPT)], rounds=FRAMES)
            at_node = wait_for_flows(node_rx, {MOVED.index: 0, KEPT.index: FRAMES})
            at_core = wait_for_flows(core_rx, {MOVED.index: FRAMES, KEPT.index: 0})
            at_alt = wait_for_flows(alt_rx, {MOVED.index: FRAMES, KEPT.index: 0})
    finally:
        sender.close()
    assert at_core == at_alt == {MOVED.index: FRAMES, KEPT.index: 0}
    assert at_node == {MOVED.index: 0, KEPT.index: FRAMES}
    copies = [rx.frame for rx in core_rx.frames + alt_rx.frames if rx.frame == node.frame(MOVED)]
    assert len(copies) == 2 * FRAMES  # as they came: the RAN's frame, byte for byte


# --- DUPLICATE_DECAPSULATED: the application's copy (dstInterface[0], n6's) without its tunnels -----


def over_ipv6(site: EdgeSite) -> tuple[bytes, bytes]:
    """A frame of MOVED's UE from the RAN side in GTP-U over IPv6 (no overlay), and the UE packet it
    carries: a longer one than MOVED's VXLAN frame's, so that the two decapsulated copies differ."""
    ue = scenario.ue_packet(MOVED, payload_len=96)
    frame = packets.outer_gtpu(packets.gtpu(MOVED.teid, scenario.BEST_EFFORT_QFI, ul=True, inner=ue), family=6)
    frame.src, frame.dst = site.ran0.mac, site.n3.mac
    return bytes(frame), ue


def put_decapsulating(node: Node, state: str) -> None:
    response = node.api.put(f"{RULES}/copies", json=duplicate_rule(action="DUPLICATE_DECAPSULATED", state=state))
    assert response.status_code == 200, response.text
    assert response.json()["action"] == "DUPLICATE_DECAPSULATED" and response.json()["state"] == state


def test_a_duplicate_decapsulated_rule_sends_the_application_the_ue_packets_and_the_other_copy_as_it_came(node):
    site = node.site
    sent = [(node.frame(MOVED), scenario.ue_packet(MOVED)), over_ipv6(site)]  # IPv4 (VXLAN) and IPv6 outer
    frames = [frame for frame, _ in sent]
    put_decapsulating(node, "ACTIVE")
    sender = Sender(site.ns("ran"), site.ran0.ifname)
    try:
        with Capture(site.ns("core"), site.core0.ifname, cpus=1) as core_rx, \
                Capture(site.ns("alt"), site.alt0.ifname, cpus=1) as alt_rx:
            sender.send(frames, rounds=FRAMES)
            for frame, ue in sent:
                # n6's copy, the application's: the outer Ethernet addresses, then the UE packet
                assert wait_for(core_rx, decapsulated(frame, ue), FRAMES) == FRAMES
                assert wait_for(alt_rx, frame, FRAMES) == FRAMES  # alt's: byte for byte as sent
        for frame, ue in sent:
            assert received(core_rx, frame) == received(alt_rx, decapsulated(frame, ue)) == 0
            assert received(core_rx, decapsulated(frame, ue)) == received(alt_rx, frame) == FRAMES  # once each

        put_decapsulating(node, "INACTIVE")
        with Capture(site.ns("core"), site.core0.ifname, cpus=1) as core_rx, \
                Capture(site.ns("alt"), site.alt0.ifname, cpus=1) as alt_rx, \
                Capture(site.ns("node"), site.n3.ifname, cpus=1) as node_rx:
            sender.send(frames, rounds=FRAMES)
            # Every frame reached the node's stack: a frame the rule duplicates is not passed too.
            assert [wait_for(node_rx, frame, FRAMES) for frame in frames] == [FRAMES, FRAMES]
    finally:
        sender.close()
    for frame, ue in sent:
        assert received(core_rx, decapsulated(frame, ue)) == received(alt_rx, frame) == 0, "copies after INACTIVE"
