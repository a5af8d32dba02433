"""A site for ATSSS: a data network host, an edge router, the NetApp node on one arm of it, two
access paths and a UE with an address on each access.

    dn ──(dn0 ↔ r0)── r ──(r1 ↔ n0)── node
                      r ──(r2 ↔ n1)──┘
                      r ──(a1 ↔ x1)── p1 ──(y1 ↔ ue1)── ue
                      r ──(a2 ↔ x2)── p2 ──(y2 ↔ ue2)── ue

The router sends what goes to the UE's own address (UE_ADDRESS, on the UE's loopback) to the node,
whose XDP puts it into MP-DCCP towards the UE's address on the access its scheduler picks and sends
it back out of n0 (XDP_TX: the downlink leaves by the port it came in on); the router then routes
it to that access. A redundant session's copies leave by its paths' interfaces, one each (n0 and n1:
the kernel's devmap broadcast runs one program per interface and flush, so two positions on one
interface would both get the first's copy); r2 has r1's MAC address, so a path's next hop is the
same whichever of n0 and n1 its frame leaves by. Each access path is a Linux bridge (x ↔ y), where a cut
(cut: every frame dropped), a loss (an XDP program dropping at random on x,
loss_port), a delay (a user-space relay from x to y, bench.frer.relay) or a rate (tbf on y) is
made: this kernel may have no netem. The router's r1 and r2 take the frames the node's XDP sends
into the links only with an XDP program of their own (receive_xdp_frames; GRO alone did not make this
kernel's veth take XDP_TX's frames).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from netapp.testbed import netns
from netapp.testbed.topology import Port, Site

UE_ADDRESS = "10.45.0.2"  # the UE's own address, which the data network sends to
UE_PREFIX = "10.45.0.0/16"  # room for a UE address each of 10,000 UEs (bench/atsss/testbed.py)


@dataclass
class AtsssSite(Site):
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    dn0: Port = Port("dn", "dn0", "02:00:00:00:a0:01", "10.80.0.1")
    r0: Port = Port("r", "r0", "02:00:00:00:a0:02", "10.80.0.2")
    r1: Port = Port("r", "r1", "02:00:00:00:a1:01", "10.81.0.1")
    n0: Port = Port("node", "n0", "02:00:00:00:a1:02", "10.81.0.2")
    r2: Port = Port("r", "r2", "02:00:00:00:a1:01", "10.84.0.1")  # r1's MAC: see above
    n1: Port = Port("node", "n1", "02:00:00:00:a4:02", "10.84.0.2")
    a1: Port = Port("r", "a1", "02:00:00:00:b1:01", "10.82.0.254")
    x1: Port = Port("p1", "x1", "02:00:00:00:b1:02", "10.82.0.252")
    y1: Port = Port("p1", "y1", "02:00:00:00:b1:03", "10.82.0.253")
    ue1: Port = Port("ue", "ue1", "02:00:00:00:b1:04", "10.82.0.2")
    a2: Port = Port("r", "a2", "02:00:00:00:b2:01", "10.83.0.254")
    x2: Port = Port("p2", "x2", "02:00:00:00:b2:02", "10.83.0.252")
    y2: Port = Port("p2", "y2", "02:00:00:00:b2:03", "10.83.0.253")
    ue2: Port = Port("ue", "ue2", "02:00:00:00:b2:04", "10.83.0.2")
    mtu: int | None = None
    queues: int = 1
    built: bool = False

    HOSTS = ("dn", "r", "node", "p1", "p2", "ue")

    def links(self) -> list[tuple[Port, Port]]:
        return [
            (self.dn0, self.r0),
            (self.r1, self.n0),
            (self.r2, self.n1),
            (self.a1, self.x1),
            (self.y1, self.ue1),
            (self.a2, self.x2),
            (self.y2, self.ue2),
        ]

    def paths(self) -> dict[str, tuple[Port, Port, Port]]:
        """Each access path's ports: the router's, the path's towards the router and towards the UE."""
        return {"p1": (self.a1, self.x1, self.y1), "p2": (self.a2, self.x2, self.y2)}

    def ue_port(self, path: str) -> Port:
        """The UE's port on `path`: its address there is where the path's MP-DCCP goes."""
        return {"p1": self.ue1, "p2": self.ue2}[path]

    def build(self) -> "AtsssSite":
        super().build()
        try:
            self._bridge_paths()
            self._route()
        except Exception:
            self.destroy()
            raise
        return self

    def _bridge_paths(self) -> None:
        for path, (_, towards_r, towards_ue) in self.paths().items():
            ns = self.ns(path)
            netns.run(["ip", "link", "add", "br0", "type", "bridge"], netns=ns)
            for port in (towards_r, towards_ue):
                netns.run(["ip", "link", "set", port.ifname, "master", "br0"], netns=ns)
            netns.run(["ip", "link", "set", "br0", "up"], netns=ns)

    def _route(self) -> None:
        """The data network reaches the UE through the router, which hands the UE's prefix to the
        node and reaches each access's UE address on that access (static neighbours: no ARP in the
        way). No reverse-path filter: the node's outer packets come from its own address, in at r1,
        out to the accesses; no redirects: the router sends the UE's packets back out of the port
        towards the node on purpose."""
        dn, r, ue = self.ns("dn"), self.ns("r"), self.ns("ue")
        netns.run(["ip", "route", "add", "default", "via", self.r0.ip], netns=dn)
        netns.run(["ip", "route", "add", UE_PREFIX, "via", self.n0.ip], netns=r)
        for path, (router_port, _, _) in self.paths().items():
            ue_port = self.ue_port(path)
            netns.add_neighbour(r, router_port.ifname, ue_port.ip, ue_port.mac)
            netns.add_neighbour(ue, ue_port.ifname, router_port.ip, router_port.mac)
        netns.run(["ip", "addr", "add", f"{UE_ADDRESS}/32", "dev", "lo"], netns=ue)
        netns.run(["ip", "route", "add", "default", "via", self.a1.ip], netns=ue)
        netns.sysctl(r, "net.ipv4.ip_forward", 1)
        for host in ("r", "ue"):
            for conf in ("all", "default", *(p.ifname for a, b in self.links() for p in (a, b) if p.host == host)):
                netns.sysctl(self.ns(host), f"net.ipv4.conf.{conf}.rp_filter", 0)
        for conf in ("all", self.r1.ifname):
            netns.sysctl(r, f"net.ipv4.conf.{conf}.send_redirects", 0)

    def receive_xdp_frames(self, pass_object: str) -> None:
        """Let r1 and r2 take the frames the node's XDP sends (XDP_TX, broadcast): the XDP program
        of `pass_object` (dataplane/build/xdp_pass.bpf.o) attached to each, passing every frame on."""
        for port in (self.r1, self.r2):
            netns.attach_xdp_object(self.ns("r"), port.ifname, pass_object)

    def cut(self, path: str, drop_object: str | None) -> None:
        """Cut `path` with its links up, by 100% loss: the XDP program of `drop_object`
        (dataplane/build/xdp_drop.bpf.o) on its port towards the router; None: restored. (A link
        taken down would also take a relay's socket on that port with it.)"""
        port = self.loss_port(path)
        if drop_object is None:
            netns.run(["ip", "link", "set", "dev", port.ifname, "xdp", "off"], netns=self.ns(path))
        else:
            netns.attach_xdp_object(self.ns(path), port.ifname, drop_object)

    def loss_port(self, path: str) -> Port:
        """`path`'s port towards the router, where an XDP program makes its loss (xdp_loss.bpf.o)."""
        return self.paths()[path][1]

    def limit_rate(self, path: str, rate: str, burst: str = "32kb", limit: str = "4mb") -> None:
        """A token bucket on `path`'s port towards the UE: `rate` (tc's units, e.g. "200mbit")."""
        port = self.paths()[path][2]
        netns.run(["tc", "qdisc", "replace", "dev", port.ifname, "root", "tbf", "rate", rate, "burst", burst,
                   "limit", limit], netns=self.ns(path))  # fmt: skip

    def relay_ports(self, path: str) -> tuple[str, str]:
        """Take `path`'s bridge out of the way towards the UE: its port towards the router leaves the
        bridge, so a relay (bench.frer.relay) run in the path's namespace from the first interface
        returned to the second carries the downlink, with its delay."""
        _, towards_r, towards_ue = self.paths()[path]
        netns.run(["ip", "link", "set", towards_r.ifname, "nomaster"], netns=self.ns(path))
        return towards_r.ifname, towards_ue.ifname
