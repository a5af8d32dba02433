"""Network namespaces and veth links for the emulated edge site: create, enter, destroy."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Sequence

# Entering a namespace is core (the service attaches inside one); re-exported for the testbed's users.
from netapp.core.netns import CLONE_NEWNET, NETNS_DIR, entered  # noqa: F401


class TestbedError(RuntimeError):
    """A testbed command failed; the message holds the command and its stderr."""


def run(args: Sequence[str], netns: str | None = None, check: bool = True) -> str:
    """Run a command (inside `netns` when given) and return its stdout."""
    cmd = (["ip", "netns", "exec", netns] if netns else []) + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True)
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


def add_veth(a_ns: str, a_name: str, b_ns: str, b_name: str) -> None:
    """A veth pair with one end in each namespace."""
    tmp = f"v{os.getpid() % 100000}{a_name}"[:15]
    run(["ip", "link", "add", tmp, "type", "veth", "peer", "name", b_name, "netns", b_ns])
    run(["ip", "link", "set", tmp, "netns", a_ns])
    run(["ip", "link", "set", tmp, "name", a_name], netns=a_ns)


def configure(netns: str, ifname: str, mac: str, cidr: str) -> None:
    run(["ip", "link", "set", ifname, "address", mac], netns=netns)
    run(["ip", "addr", "add", cidr, "dev", ifname], netns=netns)
    run(["ip", "link", "set", ifname, "up"], netns=netns)


def add_neighbour(netns: str, ifname: str, ip: str, mac: str) -> None:
    run(["ip", "neigh", "replace", ip, "lladdr", mac, "dev", ifname, "nud", "permanent"], netns=netns)


def attach_xdp_object(netns: str, ifname: str, obj: str, section: str = "xdp") -> None:
    """Attach a plain XDP object natively (used on veth peers that must receive XDP frames)."""
    run(["ip", "link", "set", "dev", ifname, "xdpdrv", "obj", obj, "sec", section], netns=netns)
