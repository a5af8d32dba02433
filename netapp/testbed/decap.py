"""The node's kernel path for the experiment's traffic, without the NetApp: the VXLAN segment ends
in a kernel VXLAN device on the node, and the GTP-U packets inside are routed out of n6 to the core.

    n3 (VXLAN, VNI 0x445, UDP 4789) -> vx0 (decapsulates) -> IPv4 forwarding -> n6 -> core0

Both systems of the throughput benchmark go through it: the kernel alone, and the NetApp, whose
steered and passed packets continue into the same stack. The core side sees the inner packets
(Ethernet / IPv4 172.16.0.1 -> 172.16.0.2 / UDP 2152 / GTP-U).
"""

from __future__ import annotations

from netapp.testbed import netns, scenario
from netapp.testbed.topology import EdgeSite

VXLAN_DEVICE = "vx0"
VXLAN_PORT = 4789
VXLAN_OVERHEAD = 50  # outer Ethernet, IPv4, UDP, VXLAN


def enable(site: EdgeSite) -> None:
    """Create the VXLAN device (it takes the inner Ethernet destination's MAC, so the inner frames
    are for this host) and route the inner destination to the core with forwarding on and reverse
    path filtering off (the inner source is reachable through nothing on the node)."""
    ns = site.ns("node")
    mtu = (site.mtu or 1500) - VXLAN_OVERHEAD
    netns.run(
        [
            "ip",
            "link",
            "add",
            VXLAN_DEVICE,
            "type",
            "vxlan",
            "id",
            str(scenario.VNI),
            "dstport",
            str(VXLAN_PORT),
            "local",
            site.n3.ip,
            "dev",
            site.n3.ifname,
            "nolearning",
        ],
        netns=ns,
    )
    netns.run(
        ["ip", "link", "set", VXLAN_DEVICE, "address", scenario.INNER_DST_MAC, "mtu", str(mtu), "up"],
        netns=ns,
    )
    netns.sysctl(ns, "net.ipv4.ip_forward", 1)
    for scope in ("all", "default", VXLAN_DEVICE, site.n3.ifname):
        netns.sysctl(ns, f"net.ipv4.conf.{scope}.rp_filter", 0)
    netns.run(
        [
            "ip",
            "route",
            "replace",
            f"{scenario.INNER_DST_IP}/32",
            "via",
            site.core0.ip,
            "dev",
            site.n6.ifname,
        ],
        netns=ns,
    )
    # With a queue per CPU, CPU i sends to the core through queue i: each CPU then fills a ring of
    # its own on the core side, and no CPU waits for another to empty a shared one.
    if site.queues > 1:
        for queue in range(site.queues):
            netns.set_xps_cpus(ns, site.n6.ifname, queue, [queue])
