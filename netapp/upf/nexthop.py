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
import subprocess
import threading
import time
from typing import Callable

from netapp.core.netlink import RECV_BYTES, NetlinkListener, messages
from netapp.dataplane.tables import Table
from netapp.upf.abi import RouteGen

log = logging.getLogger(__name__)

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
    return [kind for kind, _ in messages(buffer)]


class RouteWatch(NetlinkListener):
    """The route cache's generation in `table` (dpp_upf_route_gen), bumped on every change of this
    network namespace's routing (the one current when it is made). start() turns the cache on,
    close() off."""

    THREAD_NAME = "upf-route-watch"

    def __init__(self, table: Table, policy: Callable[[], bool] = policy_routing):
        super().__init__(GROUPS)
        self._table = table
        self._policy = policy
        self._gen = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        self._policy_routing = False
        self._lock = threading.Lock()  # one generation at a time, from the watch or from bump()
        self.bumps = 0  # generations given (for tests and stats)

    @property
    def generation(self) -> int:
        """The generation the data path uses now (0: the cache is off)."""
        value = self._table.get(0)
        return value.gen if value is not None else 0

    def start(self) -> "RouteWatch":
        """Subscribed since __init__: nothing that happened since is missed."""
        self._policy_routing = self._policy()
        self.bump()
        self._start_thread()
        return self

    def close(self) -> None:
        """Stop watching; the cache goes off."""
        self._stop()
        with self._lock:
            self._policy_routing = True  # a bump() from now on keeps it off
            self._write(0)

    def __enter__(self) -> "RouteWatch":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _drain(self) -> None:
        if self._read():
            self._policy_routing = self._policy()
        self.bump()

    def _read(self) -> bool:
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

    def bump(self) -> None:
        """A new generation: every cached answer is asked again. Also for tables the kernel does
        not hold (the private routing tables, netapp.routing.table)."""
        with self._lock:
            self._gen += 1
            self.bumps += 1
            self._write(0 if self._policy_routing else self._gen)

    def _write(self, gen: int) -> None:
        self._table.update({0: RouteGen(gen=gen)})
