"""The neighbours of the private routes' next hops: the kernel resolves them (ARP, neighbour
discovery), `NeighWatch` copies its answers into dpp_neighs.

It listens to the kernel's neighbour messages (rtnetlink, RTNLGRP_NEIGH) and, having dumped the
table once at start, keeps one entry of dpp_neighs per (network instance, next hop) that a private
route wants: a gateway on the route's device, or for an on-link route any neighbour of its prefix
on its device. An entry whose kernel neighbour fails or goes is deleted: the data path then passes
the packets to the kernel (routing_no_neigh), which resolves again. `resolve` asks the kernel to
resolve an address on a device now (a datagram to the discard port, sent out of that device), as a
route is added: its first packets need not wait for traffic to do it.
"""

from __future__ import annotations

import fcntl
import ipaddress
import logging
import socket
import struct
import threading
from typing import Optional

from netapp.core.netlink import NLMSG_HEADER, RECV_BYTES, NetlinkListener, messages
from netapp.routing.table import Address, Network, RoutingTable

log = logging.getLogger(__name__)

RTNLGRP_NEIGH = 3
RTM_NEWNEIGH, RTM_DELNEIGH, RTM_GETNEIGH = 28, 29, 30
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NDMSG = struct.Struct("=BBHiHBB")  # family, pad, pad, ifindex, state, flags, type
RTATTR = struct.Struct("=HH")  # length, type
NDA_DST, NDA_LLADDR = 1, 2
# NUD_* (linux/neighbour.h) whose entries hold a link-layer address the kernel itself would use.
NUD_VALID = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80  # REACHABLE STALE DELAY PROBE NOARP PERMANENT
DISCARD_PORT = 9
SIOCGIFHWADDR = 0x8927

Want = tuple[int, int, Network]  # (instance id, ifindex, the addresses it wants: a gateway's /32 or /128, a prefix)


def parse_neighbours(buffer: bytes) -> list[tuple[int, int, Address, Optional[str], int]]:
    """The neighbour messages of a datagram: (type, ifindex, address, MAC or None, NUD state)."""
    found = []
    for kind, body in messages(buffer):
        parsed = _neighbour(body) if kind in (RTM_NEWNEIGH, RTM_DELNEIGH) else None
        if parsed is not None:
            found.append((kind, *parsed))
    return found


def _neighbour(body: bytes) -> Optional[tuple[int, Address, Optional[str], int]]:
    if len(body) < NDMSG.size:
        return None
    family, _, _, ifindex, state, _, _ = NDMSG.unpack_from(body)
    if family not in (socket.AF_INET, socket.AF_INET6):
        return None
    address, mac, offset = None, None, NDMSG.size
    while offset + RTATTR.size <= len(body):
        length, kind = RTATTR.unpack_from(body, offset)
        if length < RTATTR.size:
            break
        value = body[offset + RTATTR.size:offset + length]
        if kind == NDA_DST:
            address = ipaddress.ip_address(value)
        elif kind == NDA_LLADDR and len(value) == 6:
            mac = ":".join(f"{byte:02x}" for byte in value)
        offset += (length + 3) & ~3
    return None if address is None else (ifindex, address, mac, state)


def device_mac(ifindex: int) -> Optional[str]:
    """The MAC of the interface (None when it is gone), asked of this thread's network namespace
    (SIOCGIFHWADDR: /sys shows the namespace that mounted it)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            request = struct.pack("16s16x", socket.if_indextoname(ifindex).encode())
            answer = fcntl.ioctl(sock.fileno(), SIOCGIFHWADDR, request)
    except OSError:
        return None
    return ":".join(f"{byte:02x}" for byte in answer[18:24])


def resolve(address: Address, device: str) -> None:
    """Ask the kernel to resolve `address` on `device` now: a datagram to its discard port out of
    that device (the kernel assumes the address on-link there if no route says otherwise). Best
    effort: a failure is logged."""
    family = socket.AF_INET if address.version == 4 else socket.AF_INET6
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, device.encode())
            sock.setblocking(False)
            sock.sendto(b"", (str(address), DISCARD_PORT))
    except OSError as exc:
        log.info("cannot ask the kernel to resolve %s on %s: %s", address, device, exc)


class NeighWatch(NetlinkListener):
    """Copies the kernel's neighbours that the private routes want into `table`."""

    THREAD_NAME = "routing-neigh-watch"

    def __init__(self, table: RoutingTable):
        super().__init__((RTNLGRP_NEIGH,))
        self._table = table
        self._lock = threading.Lock()
        self._wants: dict[Want, int] = {}  # -> how many routes want it
        self._known: dict[tuple[int, Address], str] = {}  # (ifindex, address) -> MAC: the kernel's valid neighbours
        self._written: dict[tuple[int, Address], tuple[str, str, int]] = {}  # dpp_neighs: -> (MAC, egress MAC, ifindex)

    # --- what the routes want ----------------------------------------------------------------

    def want(self, instance: int, ifindex: int, gateway: Optional[Address], network: Network) -> None:
        """A route of `instance` out of `ifindex` via `gateway` (None: on-link, its `network`)."""
        want = (instance, ifindex, _wanted(gateway, network))
        with self._lock:
            self._wants[want] = self._wants.get(want, 0) + 1
            self._sync()

    def unwant(self, instance: int, ifindex: int, gateway: Optional[Address], network: Network) -> None:
        want = (instance, ifindex, _wanted(gateway, network))
        with self._lock:
            count = self._wants.get(want, 0) - 1
            if count > 0:
                self._wants[want] = count
            else:
                self._wants.pop(want, None)
            self._sync()

    # --- running -----------------------------------------------------------------------------

    def start(self) -> "NeighWatch":
        """Dump the kernel's neighbours, then follow their changes."""
        request = NLMSG_HEADER.pack(NLMSG_HEADER.size + NDMSG.size, RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP, 1, 0)
        self._sock.send(request + NDMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0, 0, 0))
        self._start_thread()
        return self

    def close(self) -> None:
        self._stop()

    def _drain(self) -> None:
        while True:
            try:
                buffer = self._sock.recv(RECV_BYTES)
            except BlockingIOError:
                return
            except OSError:  # ENOBUFS: messages were lost; what the kernel holds now is asked again
                log.warning("neighbour messages were lost: the next changes bring the table up to date")
                continue
            with self._lock:
                for kind, ifindex, address, mac, state in parse_neighbours(buffer):
                    if kind == RTM_NEWNEIGH and mac is not None and state & NUD_VALID:
                        self._known[(ifindex, address)] = mac
                    else:
                        self._known.pop((ifindex, address), None)
                self._sync()

    def _sync(self) -> None:
        """dpp_neighs as the wants and the kernel's neighbours say (under the lock): only what
        changed is written."""
        desired: dict[tuple[int, Address], tuple[str, str, int]] = {}
        for (instance, ifindex, network) in self._wants:
            smac = None
            for (known_ifindex, address), mac in self._known.items():
                if known_ifindex == ifindex and address.version == network.version and address in network:
                    smac = smac or device_mac(ifindex)
                    if smac is not None:
                        desired[(instance, address)] = (mac, smac, ifindex)
        for instance, address in self._written.keys() - desired.keys():
            self._table.delete_neigh(instance, address)
        for (instance, address), value in desired.items():
            if self._written.get((instance, address)) != value:
                self._table.put_neigh(instance, address, *value)
        self._written = desired

    def written(self) -> set[tuple[int, Address]]:
        """(instance, address) of the entries in dpp_neighs now."""
        with self._lock:
            return set(self._written)


def _wanted(gateway: Optional[Address], network: Network) -> Network:
    if gateway is None:
        return network
    return ipaddress.ip_network(f"{gateway}/{gateway.max_prefixlen}")

