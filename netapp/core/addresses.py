"""The node's own IP addresses: every address of every interface of the current network namespace,
asked of the kernel with one rtnetlink dump (RTM_GETADDR). What a tunnel's outer source may be
(netapp.tenancy.destinations.check_source): an address the node answers to, never another host's.
"""

from __future__ import annotations

import os
import socket
import struct
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Union

from netapp.core.netlink import NETLINK_ROUTE, NLMSG_HEADER, RECV_BYTES, messages

Address = Union[IPv4Address, IPv6Address]

RTM_NEWADDR, RTM_GETADDR = 20, 22
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
IFADDRMSG = struct.Struct("=BBBBI")  # family, prefix length, flags, scope, interface index
RTATTR = struct.Struct("=HH")  # length, type
IFA_ADDRESS, IFA_LOCAL = 1, 2


def node_addresses() -> frozenset[Address]:
    """Every address of the current namespace's interfaces (loopback's too: a service address there
    is the node's). OSError when the kernel cannot be asked."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_ROUTE) as sock:
        sock.bind((0, 0))
        request = IFADDRMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
        sock.send(NLMSG_HEADER.pack(NLMSG_HEADER.size + len(request), RTM_GETADDR,
                                    NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + request)
        found: set[Address] = set()
        while True:
            for kind, body in messages(sock.recv(RECV_BYTES)):
                if kind == NLMSG_DONE:
                    return frozenset(found)
                if kind == NLMSG_ERROR:
                    code = -struct.unpack_from("=i", body)[0]
                    raise OSError(code, f"RTM_GETADDR: {os.strerror(code)}")
                if kind == RTM_NEWADDR:
                    found.update(_address_of(body))


def _address_of(body: bytes) -> set[Address]:
    """The interface's own address in one RTM_NEWADDR: IFA_LOCAL where given (on a point-to-point
    link IFA_ADDRESS is the far end's), else IFA_ADDRESS."""
    family = body[0]
    attributes: dict[int, bytes] = {}
    offset = IFADDRMSG.size
    while offset + RTATTR.size <= len(body):
        length, kind = RTATTR.unpack_from(body, offset)
        if length < RTATTR.size:
            break
        attributes[kind] = body[offset + RTATTR.size:offset + length]
        offset += (length + 3) & ~3
    raw = attributes.get(IFA_LOCAL, attributes.get(IFA_ADDRESS))
    if raw is None or family not in (socket.AF_INET, socket.AF_INET6):
        return set()
    return {ip_address(raw)}
