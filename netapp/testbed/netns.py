"""Network namespaces and veth links for the emulated edge site: create, enter, destroy."""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import socket
import struct
import subprocess
from collections.abc import Sequence

# Entering a namespace is core (the service attaches inside one); re-exported for the testbed's users.
from netapp.core.netns import CLONE_NEWNET, NETNS_DIR, entered  # noqa: F401


class TestbedError(RuntimeError):
    """A testbed command failed; the message holds the command and its stderr."""


def run(args: Sequence[str], netns: str | None = None, check: bool = True) -> str:
    """Run a command (inside `netns` when given) and return its stdout."""
    cmd = (["ip", "netns", "exec", netns] if netns else []) + list(args)
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise TestbedError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def ifindex(netns: str, ifname: str) -> int:
    with entered(netns):
        return socket.if_nametoindex(ifname)


def namespace_exists(name: str) -> bool:
    return os.path.exists(os.path.join(NETNS_DIR, name))


def add_namespace(name: str) -> None:
    """A namespace with loopback up and without IPv6 autoconfiguration, whose router and listener
    reports would otherwise mix with the traffic under test."""
    run(["ip", "netns", "add", name])
    run(["ip", "link", "set", "lo", "up"], netns=name)
    for scope in ("all", "default"):
        run(["sysctl", "-qw", f"net.ipv6.conf.{scope}.disable_ipv6=1"], netns=name)


def delete_namespace(name: str) -> None:
    """Delete a namespace and, with it, every link inside it. Missing is fine."""
    if namespace_exists(name):
        run(["ip", "netns", "delete", name], check=False)


def add_veth(a_ns: str, a_name: str, b_ns: str, b_name: str, queues: int = 1) -> None:
    """A veth pair with one end in each namespace, each end with `queues` receive and transmit
    queues (a veth receive queue has its own ring and NAPI context)."""
    tmp = f"v{os.getpid() % 100000}{a_name}"[:15]
    q = ["numtxqueues", str(queues), "numrxqueues", str(queues)]
    run(["ip", "link", "add", tmp, *q, "type", "veth", "peer", "name", b_name, *q, "netns", b_ns])
    run(["ip", "link", "set", tmp, "netns", a_ns])
    run(["ip", "link", "set", tmp, "name", a_name], netns=a_ns)


def add_ports(netns: str, names: Sequence[str]) -> None:
    """For each name a veth pair inside `netns`, name <-> name + "p", both ends up: ports whose
    peers see what leaves them."""
    for name in names:
        run(["ip", "-n", netns, "link", "add", name, "type", "veth", "peer", "name", f"{name}p"])
        for end in (name, f"{name}p"):
            run(["ip", "-n", netns, "link", "set", end, "up"])


def configure(netns: str, ifname: str, mac: str, cidr: str) -> None:
    run(["ip", "link", "set", ifname, "address", mac], netns=netns)
    run(["ip", "addr", "add", cidr, "dev", ifname], netns=netns)
    run(["ip", "link", "set", ifname, "up"], netns=netns)


def add_neighbour(netns: str, ifname: str, ip: str, mac: str) -> None:
    run(["ip", "neigh", "replace", ip, "lladdr", mac, "dev", ifname, "nud", "permanent"], netns=netns)


def attach_xdp_object(netns: str, ifname: str, obj: str, section: str = "xdp") -> None:
    """Attach a plain XDP object natively (used on veth peers that must receive XDP frames)."""
    run(["ip", "link", "set", "dev", ifname, "xdpdrv", "obj", obj, "sec", section], netns=netns)


def set_mtu(netns: str, ifname: str, mtu: int) -> None:
    run(["ip", "link", "set", ifname, "mtu", str(mtu)], netns=netns)


def sysctl(netns: str, name: str, value: str | int) -> None:
    run(["sysctl", "-qw", f"{name}={value}"], netns=netns)


# SIOCETHTOOL with the legacy one-value GRO commands (linux/ethtool.h): iproute2 cannot switch GRO
# and the ethtool tool is not everywhere.
SIOCETHTOOL = 0x8946
ETHTOOL_GTXCSUM = 0x16
ETHTOOL_STXCSUM = 0x17
ETHTOOL_GGRO = 0x2B
ETHTOOL_SGRO = 0x2C


def _ethtool_value(netns: str, ifname: str, cmd: int, data: int = 0) -> int:
    value = ctypes.create_string_buffer(struct.pack("II", cmd, data), 8)
    request = struct.pack("16sP", ifname.encode(), ctypes.addressof(value)).ljust(40, b"\0")
    with entered(netns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        fcntl.ioctl(sock.fileno(), SIOCETHTOOL, request)
    finally:
        sock.close()
    return struct.unpack("II", value.raw)[1]


def set_gro(netns: str, ifname: str, on: bool) -> None:
    """Switch GRO. On a veth it also switches its NAPI context on, without which frames sent into
    the link by XDP (XDP_TX, redirects, live-frame test runs) are dropped unless the receiving
    end runs an XDP program."""
    _ethtool_value(netns, ifname, ETHTOOL_SGRO, int(on))
    if bool(_ethtool_value(netns, ifname, ETHTOOL_GGRO)) != on:
        raise TestbedError(f"{ifname} in {netns}: GRO stayed {'off' if on else 'on'}")


def set_tx_checksum(netns: str, ifname: str, on: bool) -> None:
    """Switch transmit checksum offload. Off, the host's stack sends whole checksums, as frames
    from a NIC have them; on (a veth's default), local TCP and UDP leave with a partial checksum
    that XDP on the peer cannot complete, so what XDP redirects onwards arrives corrupt."""
    _ethtool_value(netns, ifname, ETHTOOL_STXCSUM, int(on))
    if bool(_ethtool_value(netns, ifname, ETHTOOL_GTXCSUM)) != on:
        raise TestbedError(f"{ifname} in {netns}: transmit checksumming stayed {'off' if on else 'on'}")


def _write_queue_files(netns: str, ifname: str, pattern: str, name: str, mask: int) -> None:
    """Write a CPU mask into a file of every queue matching `pattern` (rx-*, tx-0, ...), through
    `ip netns exec`, whose /sys is the namespace's own."""
    queues = f"/sys/class/net/{ifname}/queues/{pattern}"
    run(["sh", "-c", f"for q in {queues}; do echo {mask:x} > $q/{name}; done"], netns=netns)


def set_rps_cpus(netns: str, ifname: str, cpus: Sequence[int]) -> None:
    """Receive packet steering on every receive queue: which CPUs the kernel stack runs its
    packets on, spread by flow hash (none: the CPU that received them)."""
    _write_queue_files(netns, ifname, "rx-*", "rps_cpus", sum(1 << cpu for cpu in cpus))


def set_xps_cpus(netns: str, ifname: str, queue: int, cpus: Sequence[int]) -> None:
    """Transmit packet steering: the CPUs that send through transmit queue `queue`."""
    _write_queue_files(netns, ifname, f"tx-{queue}", "xps_cpus", sum(1 << cpu for cpu in cpus))


def link_stats(netns: str, ifname: str) -> dict:
    """The interface's 64-bit counters: {"rx": {...}, "tx": {...}} as `ip -s -j link` gives them."""
    link = json.loads(run(["ip", "-s", "-j", "link", "show", ifname], netns=netns))[0]
    return link["stats64"]
