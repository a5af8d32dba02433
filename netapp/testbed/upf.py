"""A 5G edge site around the UPF: a UE behind two gNBs, the UPF node, a data network and an SMF.

    ue (ue0: TUN of the gNB process, netapp.testbed.gnb)
     ├─ gnb1 ──(n3 ↔ n3a)──┐
     └─ gnb2 ──(n3 ↔ n3b)──┤ upf ──(n6 ↔ dn0)── dn (the server)
                 smf ──(n4 ↔ n4)──┘

The UPF's N3 (GTP-U) address is on its loopback, reached by each gNB through its own link; the UPF
routes the data network and the gNBs by the kernel's FIB (forwarding on, static neighbours), and
the data network reaches the UE pool through the UPF. The data network sends whole checksums
(transmit checksum offload off on dn0), as a NIC would hand them to the UPF: a veth's partial ones
are not completed by XDP. Frames the UPF's XDP sends into a veth are received only when the peer
runs XDP: `ready_for_xdp` attaches a pass-through program to the gNBs' and the data network's ends.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Sequence

from netapp.testbed import netns
from netapp.testbed.topology import Port, Site

UE_POOL = "10.45.0.0/16"


@dataclass
class UpfSite(Site):
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    n3_address: str = "10.30.0.1"  # the UPF's GTP-U endpoint (pfcp.n3_ipv4)
    ue_address: str = "10.45.0.2"
    gnb1: Port = Port("gnb1", "n3", "02:00:00:00:31:02", "10.31.0.2")
    n3a: Port = Port("upf", "n3a", "02:00:00:00:31:01", "10.31.0.1")
    gnb2: Port = Port("gnb2", "n3", "02:00:00:00:32:02", "10.32.0.2")
    n3b: Port = Port("upf", "n3b", "02:00:00:00:32:01", "10.32.0.1")
    n6: Port = Port("upf", "n6", "02:00:00:00:60:01", "10.60.0.1")
    dn0: Port = Port("dn", "dn0", "02:00:00:00:60:02", "10.60.0.2")
    n4: Port = Port("upf", "n4", "02:00:00:00:40:01", "10.40.0.1")
    smf: Port = Port("smf", "n4", "02:00:00:00:40:02", "10.40.0.2")
    mtu: int | None = None
    queues: int = 1
    built: bool = False

    HOSTS = ("ue", "gnb1", "gnb2", "upf", "dn", "smf")

    def links(self) -> list[tuple[Port, Port]]:
        return [(self.gnb1, self.n3a), (self.gnb2, self.n3b), (self.n6, self.dn0), (self.n4, self.smf)]

    def build(self) -> "UpfSite":
        super().build()
        try:
            upf = self.ns("upf")
            netns.run(["ip", "addr", "add", f"{self.n3_address}/32", "dev", "lo"], netns=upf)
            netns.sysctl(upf, "net.ipv4.ip_forward", 1)  # bpf_fib_lookup answers only where it is on
            for gnb in (self.gnb1, self.gnb2):
                gateway = self.n3a if gnb is self.gnb1 else self.n3b
                netns.run(["ip", "route", "add", f"{self.n3_address}/32", "via", gateway.ip], netns=self.ns(gnb.host))
            netns.run(["ip", "route", "add", UE_POOL, "via", self.n6.ip], netns=self.ns("dn"))
            netns.set_tx_checksum(self.ns("dn"), self.dn0.ifname, False)
        except Exception:
            self.destroy()
            raise
        return self

    def ready_for_xdp(self, xdp_pass_object: str) -> None:
        """A pass-through XDP program on the peers of the UPF's XDP interfaces (see the docstring)."""
        for port in (self.gnb1, self.gnb2, self.dn0):
            netns.attach_xdp_object(self.ns(port.host), port.ifname, xdp_pass_object)

    def upf_settings(self, more_peer_networks: Sequence[str] = ()) -> dict:
        """The UPF's settings of `netapp serve` (pfcp, upf) on this site; the UPF sends to the gNBs
        and to `more_peer_networks` (a test's own peers, e.g. a DUPL collector)."""
        return {
            "pfcp": {"address": self.n4.ip, "n3_ipv4": self.n3_address, "peers": [self.smf.ip]},
            "upf": {"n3_interfaces": [self.n3a.ifname, self.n3b.ifname], "n6_interfaces": {self.n6.ifname: "internet"},
                    "peer_networks": [f"{self.gnb1.ip}/32", f"{self.gnb2.ip}/32", *more_peer_networks]},
        }
