"""Next hops of forwarded UPF packets: what keeps the data path's route cache current.

The data path (dataplane/bpf/nf/upf/route.h) keeps, per CPU, bpf_fib_lookup's answer for the
destinations it forwards to (a gNB, an N9 peer, an N6 server) and reuses it while the generation it
was taken under is the one in dpp_upf_route_gen. `RouteWatch` owns that generation: it listens to
the kernel's routing netlink groups (links, addresses, neighbours, routes, rules, next hop objects)
and bumps the generation after every change, so no answer outlives the tables it came from by more
than the time a netlink message takes to arrive. It keeps the generation 0, the cache off (every
packet asks the FIB, as without it), while policy routing is configured (rules other than the
kernel's defaults choose routes by more than the destination) and once it is closed.

Generations are taken from CLOCK_BOOTTIME in nanoseconds and counted up from there, so that one
watch never reuses a generation an earlier one gave (the cache's slots outlive a watch).
"""

from __future__ import annotations

import json
import logging
import os
import select
import socket
import struct
import subprocess
import threading
import time
from typing import Callable, Optional

from netapp.dataplane.tables import Table
from netapp.upf.abi import RouteGen

log = logging.getLogger(__name__)

NETLINK_ROUTE = 0
SOL_NETLINK = 270
NETLINK_ADD_MEMBERSHIP = 1
# rtnetlink multicast groups (linux/rtnetlink.h, RTNLGRP_*) whose changes can change a FIB answer.
RTNLGRP_LINK, RTNLGRP_NEIGH, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV4_RULE = 1, 3, 5, 7, 8
RTNLGRP_IPV6_IFADDR, RTNLGRP_IPV6_ROUTE, RTNLGRP_IPV6_RULE, RTNLGRP_NEXTHOP = 9, 11, 19, 32
GROUPS = (
    RTNLGRP_LINK,
    RTNLGRP_NEIGH,
    RTNLGRP_IPV4_IFADDR,
    RTNLGRP_IPV4_ROUTE,
    RTNLGRP_IPV4_RULE,
    RTNLGRP_IPV6_IFADDR,
    RTNLGRP_IPV6_ROUTE,
    RTNLGRP_IPV6_RULE,
    RTNLGRP_NEXTHOP,
)
RTM_NEWRULE, RTM_DELRULE = 32, 33
NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, sequence, port
RECV_BYTES = 1 << 16

# The rules the kernel starts with (priority, table): routing by destination alone.
DEFAULT_RULES = {4: {(0, "local"), (32766, "main"), (32767, "default")}, 6: {(0, "local"), (32766, "main")}}


def policy_routing() -> bool:
    """Whether this network namespace has routing rules beyond the kernel's defaults."""
    for family, defaults in DEFAULT_RULES.items():
        rules = json.loads(subprocess.run(
            ["ip", "-j", f"-{family}", "rule", "show"], check=True, capture_output=True, text=True
        ).stdout or "[]")
        for rule in rules:
            plain = set(rule) <= {"priority", "src", "table"} and rule.get("src", "all") == "all"
            if not plain or (rule.get("priority"), rule.get("table")) not in defaults:
                return True
    return False


def message_types(buffer: bytes) -> list[int]:
    """The types of the netlink messages in one datagram."""
    types, offset = [], 0
    while offset + NLMSG_HEADER.size <= len(buffer):
        length, kind, _, _, _ = NLMSG_HEADER.unpack_from(buffer, offset)
        if length < NLMSG_HEADER.size:
            break
        types.append(kind)
        offset += (length + 3) & ~3
    return types


class RouteWatch:
    """The route cache's generation in `table` (dpp_upf_route_gen), bumped on every change of this
    network namespace's routing (the one current when it is made). start() turns the cache on,
    close() off."""

    def __init__(self, table: Table, policy: Callable[[], bool] = policy_routing):
        self._table = table
        self._policy = policy
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_ROUTE)
        self._sock.setblocking(False)
        self._sock.bind((0, 0))
        for group in GROUPS:
            try:
                self._sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, group)
            except OSError:  # a kernel without the group (next hop objects): nothing to watch there
                log.debug("netlink group %d not available", group)
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._gen = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        self._policy_routing = False
        self._thread: Optional[threading.Thread] = None
        self.bumps = 0  # generations given (for tests and stats)

    @property
    def generation(self) -> int:
        """The generation the data path uses now (0: the cache is off)."""
        value = self._table.get(0)
        return value.gen if value is not None else 0

    def start(self) -> "RouteWatch":
        """Subscribed since __init__: nothing that happened since is missed."""
        self._policy_routing = self._policy()
        self._bump()
        self._thread = threading.Thread(target=self._run, name="upf-route-watch", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop watching; the cache goes off."""
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join()
            self._thread = None
        self._write(0)
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        self._sock.close()

    def __enter__(self) -> "RouteWatch":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        while True:
            ready, _, _ = select.select([self._sock, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            rules_changed = self._drain()
            if rules_changed:
                self._policy_routing = self._policy()
            self._bump()

    def _drain(self) -> bool:
        """Read every pending message; whether a routing rule changed (an overrun counts as one:
        what was lost is unknown)."""
        rules_changed = False
        while True:
            try:
                buffer = self._sock.recv(RECV_BYTES)
            except BlockingIOError:
                return rules_changed
            except OSError:  # ENOBUFS: messages were dropped
                rules_changed = True
                continue
            if any(kind in (RTM_NEWRULE, RTM_DELRULE) for kind in message_types(buffer)):
                rules_changed = True

    def _bump(self) -> None:
        self._gen += 1
        self.bumps += 1
        self._write(0 if self._policy_routing else self._gen)

    def _write(self, gen: int) -> None:
        self._table.update({0: RouteGen(gen=gen)})
