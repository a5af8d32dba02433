"""The UE IPv4 addresses the UPF assigns (TS 29.244 8.2.62: a PDI's UE IP Address with CHV4).

Each network instance may have a pool (setting upf.ue_pools: network instance -> IPv4 prefix); a
PDR whose UE IP Address says CHV4 gets a free address of its network instance's pool, and the PDRs
of one session in one network instance share one (the session's UE). The address is stored with
the session, in the PDR's UE IP Address (like a TEID the UPF chooses), so that a restart gives out
no address in use; the session may name it in PDRs of its own (as 29.244 has the CP use the
address it was given), and it is free again when no PDR of the session names it.

The data path finds the downlink of a pool's addresses by their offset in the pool (dpp_upf_ue4):
the pools are laid out one after the other in that array, in the order of their network instances'
names (`Pools.first`).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from typing import Any, Iterable, Mapping, Optional

from netapp.upf.models import RuleError, Session, UeIpAddress
from netapp.upf.pfcp.ies import Cause, IEType, RuleType

log = logging.getLogger("netapp.upf")

DownlinkKey = tuple[Optional[str], str]  # (network instance, UE address)


def ue_instance(named: Optional[str], default: Optional[str]) -> Optional[str]:
    """The network instance of a PDR's UE address: the one it names, else the data path's default
    (the only instance of upf.n6_interfaces). The compiler keys the downlink by it, and the UE
    addresses are told apart by it here: one rule for both."""
    return named if named is not None else default


def canonical(address: str) -> str:
    """An address as `ipaddress` writes it (a session's addresses are keys of the pools' tables): an
    IPv4 one by the C library, a fraction of `ipaddress`'s cost."""
    if ":" not in address:
        try:
            return socket.inet_ntoa(socket.inet_pton(socket.AF_INET, address))
        except OSError:
            pass
    return str(ipaddress.ip_address(address))


class Pools:
    """The pools, and the addresses of them sessions hold (address -> SEID). `default_instance`:
    the data path's default network instance (netapp.upf.compiler.Site's), for PDRs naming none."""

    def __init__(self, prefixes: Optional[Mapping[str, str]] = None, default_instance: Optional[str] = None):
        self.networks = {name: ipaddress.IPv4Network(prefix) for name, prefix in sorted((prefixes or {}).items())}
        self.default_instance = default_instance
        self.first: dict[str, int] = {}  # network instance -> its pool's first slot of dpp_upf_ue4
        slot = 0
        for name, network in self.networks.items():
            self.first[name] = slot
            slot += network.num_addresses
        self._ranges = [(int(network.network_address), int(network.broadcast_address))
                        for network in self.networks.values()]
        self.held: dict[str, int] = {}
        # network instance -> the offset in its pool of the address last held (given, or at start
        # the stored sessions' in SEID order): the next is given after it, so that an address freed
        # is given again as late as the pool allows, and a refused request moves nothing
        self._cursor: dict[str, int] = {}
        self._downlink: dict[DownlinkKey, int] = {}  # every session's downlink UE addresses -> its SEID
        self._keys_of: Optional[Session] = None  # the session whose `_keys` those are
        self._keys: list[tuple[int, DownlinkKey, bool]] = []
        self._instances_for: Optional[str] = default_instance
        self._instance_of: dict[Optional[str], Optional[str]] = {}  # `_instances`

    def hold(self, session: Session) -> None:
        for address in self._pool_addresses(session):
            if self.held.get(address) != session.seid:
                self._advance_past(address)
            self.held[address] = session.seid
        seid, downlink = session.seid, self._downlink
        for _, key, _ in self._downlink_keys(session):  # a loop, as netapp.upf.slots' holds
            downlink[key] = seid

    def release(self, session: Session) -> None:
        for address in self._pool_addresses(session):
            if self.held.get(address) == session.seid:
                del self.held[address]
        for _, key, _ in self._downlink_keys(session):
            if self._downlink.get(key) == session.seid:
                del self._downlink[key]

    def check(self, session: Session) -> None:
        """The session's downlink UE addresses are its own: no other session's (its packets would go
        down the other's tunnel, perhaps another SMF's), and an address of a pool only as the UPF
        gave it (CHV4) -- to this session, which may then name it in PDRs of its own. RuleError
        naming the PDR."""
        for pdr_id, (instance, address), chosen in self._downlink_keys(session):
            if self._downlink.get((instance, address), session.seid) != session.seid:
                problem = f"UE address {address} in network instance {instance!r} is another session's"
            elif not chosen and self.held.get(address) != session.seid and (
                self._in_a_pool(address)
            ):
                problem = f"UE address {address} is in a pool of upf.ue_pools, which the UPF assigns (CHV4)"
            else:
                continue
            raise RuleError(Cause.RULE_CREATION_MODIFICATION_FAILURE, f"PDR {pdr_id}: {problem}",
                            IEType.UE_IP_ADDRESS, (RuleType.PDR, pdr_id))

    def _pool_addresses(self, session: Session) -> set[str]:
        """The addresses of the pools the session's PDRs name, as the UPF assigned them (CHV4) or
        named again: the session's while one of its PDRs names them."""
        if not self.networks:
            return set()
        return {address for address in session.ue_ipv4() if self._in_a_pool(address)}

    def _advance_past(self, address: str) -> None:
        """The next address of the pool `address` is in is looked for after it."""
        value = ipaddress.ip_address(address)
        for name, network in self.networks.items():
            if value in network:
                self._cursor[name] = int(value) - int(network.network_address)

    def _in_a_pool(self, address: str) -> bool:
        """Whether the (canonical) address is in a pool: no parsing at all without pools, as most
        UPFs run (every downlink UE address of every request is asked)."""
        if not self.networks or ":" in address:
            return False
        value = int.from_bytes(socket.inet_aton(address), "big")
        return any(low <= value <= high for low, high in self._ranges)

    def _downlink_keys(self, session: Session) -> list[tuple[int, DownlinkKey, bool]]:
        """(PDR id, key, assigned by the UPF) of each address the session's downlink PDRs match
        packets by; read once for a session checked, then held (sessions are not changed)."""
        if self._keys_of is not session:
            # a session of the fast path says when its addresses are canonical already (netapp.upf.prepared)
            as_is, instances, keys = getattr(session, "canonical_ues", False), self._instances(), []
            for pdr_id, named, address, chosen in session.downlink_ues():
                instance = instances[named] if named in instances else instances.setdefault(named, self.instance_of(named))
                keys.append((pdr_id, (instance, address if as_is else canonical(address)), chosen))
            self._keys_of, self._keys = session, keys
        return self._keys

    def _instances(self) -> dict[Optional[str], Optional[str]]:
        """`instance_of` of the names met, kept while the default instance is the same."""
        if self._instances_for != self.default_instance:
            self._instances_for, self._instance_of = self.default_instance, {}
        return self._instance_of

    def instance_of(self, named: Optional[str]) -> Optional[str]:
        """The network instance of a PDR's UE address (`ue_instance`); with no default instance (no
        data path, or several N6 instances, where the compiler refuses a downlink PDR naming none)
        that of the only pool, if there is one."""
        instance = ue_instance(named, self.default_instance)
        if instance is None and len(self.networks) == 1:
            return next(iter(self.networks))
        return instance

    def choose(self, instance: Optional[str], seid: int, chosen: Iterable[str], pdr_id: int) -> str:
        """A free address of the instance's pool for session `seid` (`chosen`: the addresses this
        change gave already, not free); RuleError naming the PDR when there is no pool or no free
        address."""
        network = self.networks.get(instance) if instance is not None else None
        if network is None:
            known = ", ".join(self.networks) or "none"
            raise RuleError(
                Cause.RULE_CREATION_MODIFICATION_FAILURE,
                f"PDR {pdr_id}: CHV4 asks the UPF for a UE address in network instance {instance!r}, which has "
                f"no pool (setting upf.ue_pools; pools: {known})",
                IEType.UE_IP_ADDRESS,
                (RuleType.PDR, pdr_id),
            )
        assert instance is not None
        taken = set(chosen)
        # the hosts of the prefix: not its network and broadcast addresses (but all of a /31, /32)
        low, high = (0, network.num_addresses) if network.prefixlen >= 31 else (1, network.num_addresses - 1)
        base, cursor = int(network.network_address), self._cursor.get(instance, low - 1)
        for _ in range(high - low):
            cursor = low + (cursor + 1 - low) % (high - low)
            address = str(ipaddress.IPv4Address(base + cursor))
            if address not in taken and self.held.get(address, seid) == seid:
                return address
        raise RuleError(
            Cause.ALL_DYNAMIC_ADDRESSES_OCCUPIED,
            f"PDR {pdr_id}: every address of the pool of network instance {instance!r} ({network}) is held",
            IEType.UE_IP_ADDRESS,
            (RuleType.PDR, pdr_id),
        )

    def choose_for(self, base: Session, pdrs: dict[int, Any]) -> list[tuple[int, UeIpAddress]]:
        """Give every PDR of `pdrs` (the session `base` becomes, changed in place) whose UE IP Address
        says CHV4 (and has none yet) the session's UE address in its network instance: the one the
        session holds there already, else a free one of the instance's pool; the (PDR id, UE IP
        Address) given, for the Created PDRs."""
        session_ue: dict[Optional[str], str] = {}
        for pdr in base.pdrs.values():
            ue = pdr.pdi.ue_ip
            if ue is not None and ue.ipv4 is not None and (ue.choose_ipv4 or self.held.get(ue.ipv4) == base.seid):
                session_ue[self.instance_of(pdr.pdi.network_instance)] = ue.ipv4
        created = []
        for pdr_id in sorted(pdrs):
            pdr = pdrs[pdr_id]
            ue = pdr.pdi.ue_ip
            if ue is None or not ue.choose_ipv4 or ue.ipv4 is not None:
                continue
            instance = self.instance_of(pdr.pdi.network_instance)
            if instance not in session_ue:
                session_ue[instance] = self.choose(instance, base.seid, session_ue.values(), pdr_id)
            chosen = ue.model_copy(update={"ipv4": session_ue[instance]})
            pdrs[pdr_id] = pdr.model_copy(update={"pdi": pdr.pdi.model_copy(update={"ue_ip": chosen})})
            created.append((pdr_id, chosen))
        return created

    def slot(self, instance: str, address: str) -> Optional[int]:
        """The address's slot of dpp_upf_ue4, or None if it is not in the instance's pool."""
        network = self.networks.get(instance)
        value = ipaddress.IPv4Address(address)
        if network is None or value not in network:
            return None
        return self.first[instance] + int(value) - int(network.network_address)

    def layout(self, instances: Mapping[str, int], slots: int) -> dict[int, tuple[int, int, int]]:
        """The pools in dpp_upf_ue4 (of `slots` slots), by network instance id (`instances`: name ->
        id, the N6 interfaces'): (first address as an integer, addresses, first slot). A pool past the
        array's end is left out (its downlink then goes where the SMF's addresses go, netapp.upf.ways;
        logged)."""
        placed = {}
        for name, network in self.networks.items():
            first = self.first[name]
            if name not in instances:
                continue
            if first + network.num_addresses > slots:
                log.warning(
                    "upf.ue_pools.%s (%s) lies past dpp_upf_ue4's %d slots (dataplane.map_sizes): its downlink "
                    "is looked up as the SMF's addresses are (dpp_upf_dl4)", name, network, slots,
                )
                continue
            placed[instances[name]] = (int(network.network_address), network.num_addresses, first)
        return placed
