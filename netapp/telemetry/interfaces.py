"""The kernel's counters of the interfaces the pipeline is attached to, read from the interface's
network namespace (/proc/thread-self/net/dev shows the calling thread's namespace)."""

from __future__ import annotations

import logging
from typing import Optional

from netapp.core.netns import entered
from netapp.telemetry.sample import InterfaceCounters

log = logging.getLogger("netapp.telemetry")

NET_DEV = "/proc/thread-self/net/dev"
# Columns of /proc/net/dev after the interface name: receive then transmit.
RX = ("bytes", "packets", "errs", "drop", "fifo", "frame", "compressed", "multicast")
TX = ("bytes", "packets", "errs", "drop", "fifo", "colls", "carrier", "compressed")


def parse_net_dev(text: str) -> dict[str, InterfaceCounters]:
    """Interface name -> its counters, from the text of /proc/net/dev."""
    found: dict[str, InterfaceCounters] = {}
    for line in text.splitlines()[2:]:
        name, _, numbers = line.partition(":")
        values = [int(v) for v in numbers.split()]
        if len(values) < len(RX) + len(TX):
            continue
        rx = dict(zip(RX, values[: len(RX)]))
        tx = dict(zip(TX, values[len(RX) :]))
        name = name.strip()
        found[name] = InterfaceCounters(
            name=name,
            bytes_recv=rx["bytes"],
            bytes_sent=tx["bytes"],
            packets_recv=rx["packets"],
            packets_sent=tx["packets"],
            err_in=rx["errs"],
            err_out=tx["errs"],
            drop_in=rx["drop"],
            drop_out=tx["drop"],
        )
    return found


def read_interfaces(wanted: dict[str, Optional[str]]) -> tuple[InterfaceCounters, ...]:
    """Counters of each interface in `wanted` (name -> its namespace, None: ours). An interface or
    namespace that is gone is skipped: the interface points say what is there."""
    by_netns: dict[Optional[str], list[str]] = {}
    for name, netns in wanted.items():
        by_netns.setdefault(netns, []).append(name)
    found: list[InterfaceCounters] = []
    for netns, names in sorted(by_netns.items(), key=lambda item: item[0] or ""):
        try:
            table = _net_dev(netns)
        except OSError as exc:
            log.debug("interface counters of netns %s: %s", netns, exc)
            continue
        found.extend(table[name] for name in sorted(names) if name in table)
    return tuple(found)


def _net_dev(netns: Optional[str]) -> dict[str, InterfaceCounters]:
    if netns is None:
        return _read()
    with entered(netns):
        return _read()


def _read() -> dict[str, InterfaceCounters]:
    with open(NET_DEV) as net_dev:
        return parse_net_dev(net_dev.read())
