"""Where the NetApp may connect on a caller's behalf (a subscription's callback): public unicast
addresses, and what the operator's allow-list adds (setting telemetry.subscriptions.callback_allow).

Refused unless the list covers them: loopback, link-local (169.254.169.254, the cloud metadata
service, is one), private (RFC 1918, ULA fc00::/7), shared (CGNAT 100.64.0.0/10), benchmarking,
documentation, reserved, and whatever else Python's ipaddress does not call global. An IPv6 address
that carries an IPv4 one (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, NAT64
64:ff9b::/96, 6to4 2002::/16) is judged by that IPv4 address. The unspecified addresses (0.0.0.0 and
::, which reach the host itself) and multicast are refused whatever the list says.

Hosts are taken as a URI has them (httpx's parse, brackets removed): a DNS name, four decimal
numbers, or an IPv6 address. The C library takes a host whose last label is a number for an IPv4
address in any spelling (2130706433, 0x7f.1, 127.1, 0): such a host is refused as malformed, never
interpreted.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Optional, Union

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
# (host, port) -> its addresses, in the order to try them; OSError when it does not resolve.
Resolver = Callable[[str, int], Sequence[IPAddress]]

PUBLIC_ONLY = "public addresses only"

_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_NAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
_NUMBER = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$")  # what inet_aton takes for one part of an address
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

# The first that applies names the kind of a non-public address; the order makes 169.254.169.254
# link-local rather than private.
_KINDS: tuple[tuple[str, Callable[[IPAddress], bool]], ...] = (
    ("unspecified", lambda address: address.is_unspecified),
    ("multicast", lambda address: address.is_multicast),
    ("loopback", lambda address: address.is_loopback),
    ("link-local", lambda address: address.is_link_local),
    ("site-local", lambda address: isinstance(address, ipaddress.IPv6Address) and address.is_site_local),
    ("private", lambda address: address.is_private),
    ("reserved", lambda address: address.is_reserved),
    ("non-global", lambda address: not address.is_global),
)
# Never a receiver, whatever the allow-list says.
_NEVER = frozenset({"unspecified", "multicast"})


class DestinationRefused(Exception):
    """The host may not be connected to; the message says why and what is allowed."""


def host_address(host: str) -> Optional[IPAddress]:
    """The address `host` is, or None for a DNS name; ValueError for a host that is neither (an
    IPv4 address spelt otherwise than as four decimal numbers, an IPv6 zone id, stray characters)."""
    if ":" in host:
        if "%" in host:
            raise ValueError(f"{host}: an IPv6 zone id is not taken")
        return ipaddress.IPv6Address(host)
    name = host.lower()
    name = name[:-1] if name.endswith(".") else name
    if _NUMBER.match(name.rsplit(".", 1)[-1]):
        try:
            return ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(
                f"{host} is an IPv4 address in an unusual spelling (decimal, octal, hex, fewer than "
                "four parts, a trailing dot); write it as four decimal numbers, e.g. 192.0.2.10"
            ) from None
    if len(name) > 253 or not _NAME.match(name):
        raise ValueError(f"{host!r} is not a host name")
    return None


def embedded_ipv4(address: IPAddress) -> Optional[ipaddress.IPv4Address]:
    """The IPv4 address an IPv6 address reaches (mapped, compatible, NAT64, 6to4), if any."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (int(address) >> 32 == 0 and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return None


def address_kind(address: IPAddress) -> Optional[str]:
    """What kind of non-public address it is ("loopback", "private", ...); None: public unicast."""
    inner = embedded_ipv4(address)
    if inner is not None:
        return address_kind(inner)
    return next((kind for kind, applies in _KINDS if applies(address)), None)


def allow_entry(entry: str) -> Union[IPNetwork, str]:
    """An allow-list entry: a network (CIDR, or one address), or a host name in lower case without
    its trailing dot (`*.example.net`: the names under example.net). ValueError naming the entry."""
    if "/" in entry:
        try:
            return ipaddress.ip_network(entry)
        except ValueError as exc:
            raise ValueError(f"{entry!r}: not a network ({exc})") from None
    name = entry[2:] if entry.startswith("*.") else entry
    try:
        address = host_address(name)
    except ValueError as exc:
        raise ValueError(f"{entry!r}: neither a network nor a host name ({exc})") from None
    if address is not None:
        if name is not entry:
            raise ValueError(f"{entry!r}: a wildcard takes a domain name, not an address")
        return ipaddress.ip_network(address)
    return entry.lower().rstrip(".")


@dataclass(frozen=True)
class AllowList:
    """The networks and host names callbacks may reach besides public addresses."""

    networks: tuple[IPNetwork, ...] = ()
    names: tuple[str, ...] = ()  # lower case, no trailing dot; "*.example.net" for its subdomains

    @classmethod
    def of(cls, entries: Iterable[str]) -> "AllowList":
        parsed = [allow_entry(entry) for entry in entries]
        return cls(
            networks=tuple(entry for entry in parsed if not isinstance(entry, str)),
            names=tuple(entry for entry in parsed if isinstance(entry, str)),
        )

    def __str__(self) -> str:
        listed = [str(network) for network in self.networks] + list(self.names)
        return f"public addresses and {', '.join(listed)}" if listed else PUBLIC_ONLY

    def names_host(self, host: str) -> bool:
        name = host.lower().rstrip(".")
        return any(
            name.endswith(allowed[1:]) if allowed.startswith("*.") else name == allowed
            for allowed in self.names
        )

    def covers(self, address: IPAddress) -> bool:
        inner = embedded_ipv4(address)
        return any(
            candidate in network
            for candidate in (address, inner)
            if candidate is not None
            for network in self.networks
            if network.version == candidate.version
        )

    def refusal(self, host: str, addresses: Sequence[IPAddress], resolved: bool = True) -> Optional[str]:
        """Why `host`, resolved to `addresses` (not `resolved`: the one address it is), may not be
        connected to; None: it may. Every address must pass: the name may resolve to any of them."""
        named = self.names_host(host)
        for address in addresses:
            kind = address_kind(address)
            if kind is None or (kind not in _NEVER and (named or self.covers(address))):
                continue
            said = f"{host} resolves to {address}," if resolved else f"{host} is"
            inner = embedded_ipv4(address)
            if inner is not None:
                said = f"{said} which reaches {inner}," if resolved else f"{host} reaches {inner},"
            article = "an" if kind[0] in "aeiou" else "a"
            never = " (never allowed)" if kind in _NEVER else ""
            return f"{said} {article} {kind} address{never}; allowed: {self}"
        return None


def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses the system resolver gives `host`, in its order, each once."""
    found: list[IPAddress] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = ipaddress.ip_address(sockaddr[0])
        if address not in found:
            found.append(address)
    return found


class Destinations:
    """The allow-list and a resolver: checks a host and gives the one address to connect to."""

    def __init__(self, allow: AllowList, resolver: Resolver = resolve):
        self.allow = allow
        self._resolver = resolver

    def check(self, host: str, port: int) -> IPAddress:
        """Resolve `host` once and check every address: the first, to connect to. Raises
        DestinationRefused (malformed, not allowed) or OSError (it does not resolve)."""
        try:
            literal = host_address(host)
        except ValueError as exc:
            raise DestinationRefused(str(exc)) from None
        addresses = [literal] if literal is not None else list(self._resolver(host, port))
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} resolves to no address")
        refusal = self.allow.refusal(host, addresses, resolved=literal is None)
        if refusal is not None:
            raise DestinationRefused(refusal)
        return addresses[0]
