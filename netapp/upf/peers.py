"""The operator's allow-lists of the UPF: which SMFs may use N4 (setting `pfcp.peers`) and where the
UPF may send GTP-U (setting `upf.peer_networks`). A tenant is a PFCP association; these lists are
what keeps a tenant's rules from sending packets where the operator did not allow, and a host the
operator did not name from associating at all.

- `SmfPeers` (pfcp.peers): prefixes, each optionally with the Node IDs that may associate from it.
  The endpoint screens every datagram by its source address (`PeerGate`, called at one place of
  netapp.upf.pfcp.server) before anything else is done with it: an Association Setup Request from
  an address no entry covers, or with a Node ID its entries do not list, is answered with Cause
  Request rejected (29.244 6.2.6.2.2: the UP function that does not accept a setup answers with a
  cause telling why); every other datagram from an address no entry covers is dropped, not acted
  on. Both are counted (`refused_peer`) and logged once per address. Usage reports go only to an
  association whose address and Node ID the list still admits (the list may have narrowed since it
  was set up).
- `Destinations` (upf.peer_networks): the prefixes GTP-U may be sent to -- the peer address of a
  FAR's outer header creation (N3 gNBs, N9 UPFs), and so the End Markers to an old peer, and the
  outer header creation of a duplicating FAR (`check_address`). Unspecified and multicast addresses
  are refused whatever the list says.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import logging
from typing import Iterable, Optional, Union

from netapp.upf.models import RuleError, Session
from netapp.upf.pfcp.ies import Cause, IEType, RuleType

log = logging.getLogger("netapp.upf.pfcp")

IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
ANYWHERE = ("0.0.0.0/0", "::/0")


def smf_address(address: str) -> str:
    """An SMF's address as pfcp.peers judges it: an IPv4 SMF of a dual-stack endpoint (pfcp.address
    `::`) sends from ::ffff:a.b.c.d, and is the IPv4 host a.b.c.d (an entry ::/0 does not admit it)."""
    try:
        mapped = ipaddress.ip_address(address)
    except ValueError:
        return address
    inner = mapped.ipv4_mapped if isinstance(mapped, ipaddress.IPv6Address) else None
    return str(inner) if inner is not None else address


def _covered(networks: tuple[IPNetwork, ...], address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip.version == net.version and ip in net for net in networks)


@dataclasses.dataclass(frozen=True)
class SmfPeer:
    """An entry of pfcp.peers: the prefix SMFs may send from; `node_ids`: those that may associate
    from it (empty: any)."""

    prefix: IPNetwork
    node_ids: frozenset[str] = frozenset()


class SmfPeers:
    """pfcp.peers: who may use N4."""

    def __init__(self, entries: Iterable[SmfPeer]):
        self.entries = tuple(entries)
        self._networks = tuple(entry.prefix for entry in self.entries)

    @classmethod
    def anyone(cls) -> "SmfPeers":
        return cls(SmfPeer(ipaddress.ip_network(text)) for text in ANYWHERE)

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - a handful of SMFs, the list lives as long as the endpoint
    def admits(self, address: str) -> bool:
        """An entry covers the address (an IPv4-mapped one as its IPv4 address)."""
        return _covered(self._networks, smf_address(address))

    def admits_node(self, address: str, node_id: str) -> bool:
        """An entry covers the address (an IPv4-mapped one as its IPv4 address, also an
        association's stored so) and lists the Node ID, or lists none."""
        address = smf_address(address)
        for entry in self.entries:
            if _covered((entry.prefix,), address) and (not entry.node_ids or node_id in entry.node_ids):
                return True
        return False


class PeerGate:
    """The endpoint's screen of datagrams by their source (netapp.upf.pfcp.server): what it refuses
    is counted by the caller and logged here once per address, for the first LOGGED addresses (a
    flood from spoofed sources neither fills the memory nor the log; the count goes on)."""

    LOGGED = 1024

    def __init__(self, peers: SmfPeers):
        self.peers = peers
        self._logged: set[str] = set()

    def refusal(self, address: str, node_id: Optional[str] = None) -> Optional[str]:
        """Why a datagram from `address` (an Association Setup naming `node_id`) is not acted on;
        None: it is."""
        if not self.peers.admits(address):
            why = f"{address} is not in pfcp.peers"
        elif node_id is not None and not self.peers.admits_node(address, node_id):
            why = f"Node ID {node_id} may not associate from {address} (pfcp.peers)"
        else:
            return None
        if address not in self._logged and len(self._logged) < self.LOGGED:  # once per peer, not per datagram
            self._logged.add(address)
            log.warning("PFCP: refused %s; what it sends is not acted on", why)
            if len(self._logged) == self.LOGGED:
                log.warning("PFCP: %d addresses refused: those refused from now on are counted, not logged", self.LOGGED)
        return why


class Destinations:
    """upf.peer_networks: where the UPF may send GTP-U."""

    def __init__(self, prefixes: Iterable[Union[str, IPNetwork]]):
        self.networks = tuple(ipaddress.ip_network(prefix) for prefix in prefixes)

    @classmethod
    def anywhere(cls) -> "Destinations":
        return cls(ANYWHERE)

    @functools.lru_cache(maxsize=65536)  # noqa: B019 - gNBs and UPFs: a bounded set of addresses
    def allows(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        if ip.is_unspecified or ip.is_multicast:
            return False
        return _covered(self.networks, address)

    def check_address(self, far_id: int, address: str, ie_type: IEType = IEType.OUTER_HEADER_CREATION) -> None:
        """Refuse the FAR (cause 73, Failed Rule ID the FAR) whose tunnel goes to `address` outside
        the list. For the outer header creation of the forwarding and the duplicating parameters."""
        if not self.allows(address):
            allowed = ", ".join(str(net) for net in self.networks) or "none"
            raise RuleError(
                Cause.RULE_CREATION_MODIFICATION_FAILURE,
                f"FAR {far_id}: outer header creation to {address}, outside upf.peer_networks ({allowed})",
                ie_type,
                (RuleType.FAR, far_id),
            )

    def check_session(self, session: Session) -> None:
        """Every tunnel of the session's FARs (netapp.upf.sessions, before a change is made: all or
        nothing): their forwarding parameters' outer header creation and their duplicating
        parameters'."""
        for far_id, address, ie_type in session.tunnels():
            self.check_address(far_id, address, ie_type)
