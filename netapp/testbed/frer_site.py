"""A site for FRER (IEEE 802.1CB): a talker, a replicating node, two disjoint paths (a Linux bridge
each, where a cut, a loss or a delay is made), an eliminating node and a listener.

    talker ──(t0 ↔ a0)── a ──(a1 ↔ x1)── p1 ──(y1 ↔ b1)── b ──(b0 ↔ l0)── listener
                         └───(a2 ↔ x2)── p2 ──(y2 ↔ b2)──┘

A path is cut by taking its link towards b down, or by 100% loss (drop_all). The FRER programs sit on a's a0 (the talker side: tag and replicate to a1 and a2) and on b's b1 and
b2 (the listener side: eliminate, deliver to b0). The receiving ends of frames that XDP sends into a
veth (x1, x2 from a's broadcast, l0 from b's redirect) have GRO on, which a veth needs to take them.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from netapp.testbed import netns
from netapp.testbed.topology import Port, Site


@dataclass
class FrerSite(Site):
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    t0: Port = Port("talker", "t0", "02:00:00:00:f0:01", "10.70.0.1")
    a0: Port = Port("a", "a0", "02:00:00:00:f0:02", "10.70.0.2")
    a1: Port = Port("a", "a1", "02:00:00:00:f1:01", "10.71.0.1")
    x1: Port = Port("p1", "x1", "02:00:00:00:f1:02", "10.71.0.2")
    y1: Port = Port("p1", "y1", "02:00:00:00:f1:03", "10.71.1.1")
    b1: Port = Port("b", "b1", "02:00:00:00:f1:04", "10.71.1.2")
    a2: Port = Port("a", "a2", "02:00:00:00:f2:01", "10.72.0.1")
    x2: Port = Port("p2", "x2", "02:00:00:00:f2:02", "10.72.0.2")
    y2: Port = Port("p2", "y2", "02:00:00:00:f2:03", "10.72.1.1")
    b2: Port = Port("b", "b2", "02:00:00:00:f2:04", "10.72.1.2")
    b0: Port = Port("b", "b0", "02:00:00:00:f3:01", "10.73.0.1")
    l0: Port = Port("listener", "l0", "02:00:00:00:f3:02", "10.73.0.2")
    mtu: int | None = None
    queues: int = 1
    built: bool = False

    HOSTS = ("talker", "a", "p1", "p2", "b", "listener")

    def links(self) -> list[tuple[Port, Port]]:
        return [
            (self.t0, self.a0),
            (self.a1, self.x1),
            (self.y1, self.b1),
            (self.a2, self.x2),
            (self.y2, self.b2),
            (self.b0, self.l0),
        ]

    def paths(self) -> dict[str, tuple[Port, Port]]:
        """Each path's ports: the one towards a, the one towards b."""
        return {"p1": (self.x1, self.y1), "p2": (self.x2, self.y2)}

    def build(self) -> "FrerSite":
        super().build()
        try:
            for path, ports in self.paths().items():
                ns = self.ns(path)
                netns.run(["ip", "link", "add", "br0", "type", "bridge"], netns=ns)
                for port in ports:
                    netns.run(["ip", "link", "set", port.ifname, "master", "br0"], netns=ns)
                netns.run(["ip", "link", "set", "br0", "up"], netns=ns)
            for port in (self.x1, self.x2, self.l0):
                netns.set_gro(self.ns(port.host), port.ifname, True)
        except Exception:
            self.destroy()
            raise
        return self

    def towards_b(self, path: str) -> Port:
        """The port of `path` whose egress (towards b) takes a cut, a loss or a delay."""
        return self.paths()[path][1]

    def set_link(self, path: str, up: bool) -> None:
        port = self.towards_b(path)
        netns.run(["ip", "link", "set", port.ifname, "up" if up else "down"], netns=self.ns(port.host))

    def forwards(self, path: str) -> bool:
        """Whether `path`'s port towards b is up with its carrier and its bridge forwards to it: after
        set_link(up=True) the bridge takes the port back only once the kernel has seen the carrier
        come on (asynchronously)."""
        port = self.towards_b(path)
        shown = netns.run(["ip", "-d", "link", "show", port.ifname], netns=self.ns(port.host))
        return ",LOWER_UP" in shown and " state UP " in shown and "bridge_slave state forwarding" in shown

    def drop_all(self, path: str, drop_object: str | None) -> None:
        """100% loss on `path` with its links up: an XDP program that drops every frame on the
        path's port towards a (None: removed, the path forwards again). The kernel may have no
        netem."""
        port = self.paths()[path][0]
        ns = self.ns(port.host)
        if drop_object is None:
            netns.run(["ip", "link", "set", "dev", port.ifname, "xdp", "off"], netns=ns)
        else:
            netns.attach_xdp_object(ns, port.ifname, str(drop_object))
