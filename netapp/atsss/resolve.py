"""The Ethernet addresses of a path that names an interface instead of giving them: the interface's
own address (the source) and the kernel's neighbour entry of the path's peer there (the next hop),
both asked in the calling thread's network namespace."""

from __future__ import annotations

import json
import subprocess
from typing import Optional

from netapp.atsss.models import AtsssPath
from netapp.routing.neighbours import device_mac, resolve


class Unresolved(LookupError):
    """A path's MAC address could not be found: `field` names it, the message says why."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def neighbour_mac(peer: str, interface: str) -> Optional[str]:
    """The MAC of the kernel's usable neighbour entry of `peer` on `interface`, None without one."""
    done = subprocess.run(["ip", "-j", "neigh", "show", "to", peer, "dev", interface],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        return None
    for entry in json.loads(done.stdout):
        states = set(entry.get("state", []))
        if entry.get("lladdr") and not states & {"FAILED", "INCOMPLETE"}:
            return str(entry["lladdr"]).lower()
    return None


def path_macs(path: AtsssPath, index: int, ifindex: Optional[int]) -> tuple[str, str]:
    """(source, next hop) of `path`, the session's `index`-th; `ifindex`: its interface's, None when
    it has none here (Unresolved when it names one that is not there, or a neighbour not known yet:
    the kernel is then asked to resolve it, and a later write of the session finds it)."""
    if path.source_mac is not None and path.next_hop_mac is not None:
        return path.source_mac, path.next_hop_mac
    assert path.interface is not None
    where = f"paths[{index}].interface"
    if ifindex is None:
        raise Unresolved(where, f"interface {path.interface!r} is not on this node")
    source = path.source_mac or device_mac(ifindex)
    if source is None:
        raise Unresolved(where, f"interface {path.interface!r} has no MAC address")
    next_hop = path.next_hop_mac or neighbour_mac(str(path.peer), path.interface)
    if next_hop is None:
        resolve(path.peer, path.interface)
        raise Unresolved(where, f"no neighbour entry of peer {path.peer} on {path.interface!r} yet: the kernel "
                         "was asked to resolve it; write the session again, or give next_hop_mac")
    return source, next_hop
