"""The emulated edge site: RAN-side source, NetApp node, core-side sink and an alternative node.

    ran ──(ran0 ↔ n3)── node ──(n6 ↔ core0)── core
                         └───(alt ↔ alt0)──── alt

The NetApp's XDP program sits on the node's n3. Every name carries a tag, so several sites can
exist at once and one that a crashed run left behind can be found and removed. PeerSite is the
scale-out variant: two NetApp nodes, each the other's alternative node.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from typing import TypeVar

from netapp.testbed import netns


@dataclass(frozen=True)
class Port:
    """One end of a link: its host, interface, addresses."""

    host: str
    ifname: str
    mac: str
    ip: str
    prefix: int = 24


SiteT = TypeVar("SiteT", bound="Site")


class Site:
    """Namespaces and veth links of a topology: its HOSTS, links() and ns() say which."""

    HOSTS: tuple[str, ...] = ()
    tag: str
    mtu: int | None
    queues: int
    built: bool

    def ns(self, host: str) -> str:
        return f"dpp-{self.tag}-{host}"

    def links(self) -> list[tuple[Port, Port]]:
        raise NotImplementedError

    def build(self: SiteT) -> SiteT:
        """Create namespaces, links, addresses and static neighbours (no ARP in the way)."""
        try:
            for host in self.HOSTS:
                netns.add_namespace(self.ns(host))
            for a, b in self.links():
                netns.add_veth(self.ns(a.host), a.ifname, self.ns(b.host), b.ifname, self.queues)
                for end, peer in ((a, b), (b, a)):
                    if self.mtu is not None:
                        netns.set_mtu(self.ns(end.host), end.ifname, self.mtu)
                    netns.configure(self.ns(end.host), end.ifname, end.mac, f"{end.ip}/{end.prefix}")
                    netns.add_neighbour(self.ns(end.host), end.ifname, peer.ip, peer.mac)
            self.built = True
        except Exception:
            self.destroy()
            raise
        return self

    def destroy(self) -> None:
        for host in self.HOSTS:
            netns.delete_namespace(self.ns(host))
        self.built = False

    def ifindex(self, port: Port) -> int:
        return netns.ifindex(self.ns(port.host), port.ifname)

    def __enter__(self: SiteT) -> SiteT:
        return self.build()

    def __exit__(self, *exc: object) -> None:
        self.destroy()


@dataclass
class EdgeSite(Site):
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    ran0: Port = Port("ran", "ran0", "02:00:00:00:01:01", "10.10.0.1")
    n3: Port = Port("node", "n3", "02:00:00:00:02:03", "10.10.0.2")
    n6: Port = Port("node", "n6", "02:00:00:00:02:06", "10.20.0.1")
    core0: Port = Port("core", "core0", "02:00:00:00:03:01", "10.20.0.2")
    alt: Port = Port("node", "alt", "02:00:00:00:02:0a", "10.30.0.1")
    alt0: Port = Port("alt", "alt0", "02:00:00:00:04:01", "10.30.0.2")
    mtu: int | None = None  # of every link; None: the kernel's default (1500)
    queues: int = 1  # receive and transmit queues of every veth end
    built: bool = False

    HOSTS = ("ran", "node", "core", "alt")

    def links(self) -> list[tuple[Port, Port]]:
        return [(self.ran0, self.n3), (self.n6, self.core0), (self.alt, self.alt0)]


def leftover_sites() -> list[str]:
    """Tags of sites whose namespaces still exist (for cleaning up after a crash)."""
    names = os.listdir(netns.NETNS_DIR) if os.path.isdir(netns.NETNS_DIR) else []
    return sorted({n.split("-")[1] for n in names if n.startswith("dpp-") and n.count("-") == 2})


@dataclass
class PeerSite(Site):
    """Two NetApp nodes, each the other's alternative node, and a RAN-side source in front of A:

        ran ──(ran0 ↔ n3)── a ──(alt ↔ alt)── b

    Both nodes call their end of the alternative-node link `alt`, as the charm's `alt-interface`
    would. The RAN side's ports keep EdgeSite's names and addresses, so scenario frames fit.
    """

    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    ran0: Port = Port("ran", "ran0", "02:00:00:00:01:01", "10.10.0.1")
    n3: Port = Port("a", "n3", "02:00:00:00:02:03", "10.10.0.2")
    a_alt: Port = Port("a", "alt", "02:00:00:00:0a:01", "10.30.0.1")
    b_alt: Port = Port("b", "alt", "02:00:00:00:0b:01", "10.30.0.2")
    mtu: int | None = None
    queues: int = 1
    built: bool = False

    HOSTS = ("ran", "a", "b")

    def links(self) -> list[tuple[Port, Port]]:
        return [(self.ran0, self.n3), (self.a_alt, self.b_alt)]
