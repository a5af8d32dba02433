"""The private routing tables' maps (dpp_routes, dpp_neighs): keys and values from routes and
neighbours, written through the generic tables. Every write bumps the route cache's generation
(through `bump`: netapp.upf.nexthop.RouteWatch owns it), so that no cached answer outlives the
entries it came from."""

from __future__ import annotations

import ipaddress
from typing import Callable, Iterator, Optional, Union

from netapp.dataplane.tables import Table
from netapp.routing.abi import ROUTE_KEY_PREFIX, Neigh, NeighKey, RouteFlag, RouteKey, RouteValue

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
TableOf = Callable[[str], Table]


def words(address: Address) -> list[int]:
    """An address as the ABI's four __u32 words in network order (IPv4 in the first)."""
    packed = address.packed.ljust(16, b"\0")
    return [int.from_bytes(packed[i:i + 4], "little") for i in range(0, 16, 4)]


def address_of(family: int, words4: object) -> Address:
    packed = b"".join(int(word).to_bytes(4, "little") for word in words4)  # type: ignore[attr-defined]
    return ipaddress.ip_address(packed[:4] if family == 4 else packed)


def mac_bytes(mac: str) -> bytes:
    return bytes(int(part, 16) for part in mac.split(":"))


def route_key(instance: int, network: Network) -> RouteKey:
    key = RouteKey(prefixlen=ROUTE_KEY_PREFIX + network.prefixlen, net_instance=instance, family=network.version)
    key.addr[:] = words(network.network_address)
    return key


def neigh_key(instance: int, address: Address) -> NeighKey:
    key = NeighKey(net_instance=instance, family=address.version)
    key.addr[:] = words(address)
    return key


class RoutingTable:
    """dpp_routes and dpp_neighs of one loaded instance."""

    def __init__(self, table_of: TableOf, bump: Callable[[], None] = lambda: None):
        self._routes = table_of("dpp_routes")
        self._neighs = table_of("dpp_neighs")
        self.bump = bump

    def put_route(self, instance: int, network: Network, gateway: Optional[Address], ifindex: int) -> None:
        value = RouteValue(ifindex=ifindex, flags=RouteFlag.ONLINK if gateway is None else 0)
        if gateway is not None:
            value.gateway[:] = words(gateway)
        self._routes.update([(route_key(instance, network), value)])
        self.bump()

    def delete_route(self, instance: int, network: Network) -> None:
        self._routes.delete([route_key(instance, network)])
        self.bump()

    def put_neigh(self, instance: int, address: Address, dmac: str, smac: str, ifindex: int) -> None:
        value = Neigh(ifindex=ifindex)
        value.dmac[:] = mac_bytes(dmac)
        value.smac[:] = mac_bytes(smac)
        self._neighs.update([(neigh_key(instance, address), value)])
        self.bump()

    def delete_neigh(self, instance: int, address: Address) -> None:
        self._neighs.delete([neigh_key(instance, address)])
        self.bump()

    def neigh(self, instance: int, address: Address) -> Optional[Neigh]:
        return self._neighs.get(neigh_key(instance, address))

    def route_keys(self) -> Iterator[tuple[int, Network]]:
        """(instance, network) of every route in the map."""
        for key, _ in self._routes.items():
            address = address_of(key.family, key.addr)
            yield key.net_instance, ipaddress.ip_network(f"{address}/{key.prefixlen - ROUTE_KEY_PREFIX}")

    def neigh_keys(self) -> Iterator[tuple[int, Address]]:
        for key, _ in self._neighs.items():
            yield key.net_instance, address_of(key.family, key.addr)
