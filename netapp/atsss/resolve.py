"""The Ethernet addresses of a path that names an interface instead of giving them: the interface's
own address (the source) and the kernel's neighbour entry of the path's peer there (the next hop),
both asked in the calling thread's network namespace; and the sessions' entries made of them
(`resolved_tables`), the sessions whose addresses are not found left out."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
from typing import Callable, Optional

from netapp.atsss.models import AtsssPath, AtsssSession
from netapp.atsss.table import AtsssTables, Macs
from netapp.routing.neighbours import device_mac, resolve
from netapp.service.contract import InvalidInput

log = logging.getLogger(__name__)


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


def interface_index(name: str) -> Optional[int]:
    try:
        return socket.if_nametoindex(name)
    except OSError:
        return None


def resolve_macs(session: AtsssSession, index: int, ifindex: Optional[int]) -> Macs:
    return path_macs(session.paths[index], index, ifindex)


def resolved_tables(sessions: list[AtsssSession], changed: Optional[AtsssSession],
                    macs_of: Callable[[AtsssSession], list[Macs]], group_of: Callable[[AtsssSession], int],
                    unserved: Optional[dict[str, str]]) -> AtsssTables:
    """The entries of `sessions` whose paths' MACs are found (`macs_of`), each naming its group of
    ports (`group_of`); `changed`'s not found are the caller's error (InvalidInput naming the path),
    any other's leave it out, told in `unserved` and logged (None: told nowhere, as a put back's are);
    a session found is taken out of it."""
    tables = AtsssTables()
    for session in sessions:
        key = f"{session.tenant}/{session.name}"
        try:
            tables.add(session, macs_of(session), group_of(session))
        except Unresolved as exc:
            if changed is not None and (session.tenant, session.name) == (changed.tenant, changed.name):
                raise InvalidInput(str(exc), field=exc.field) from None
            if unserved is not None:
                unserved[key] = f"{exc.field}: {exc}"
                log.warning("ATSSS session %s is stored but not in the data path: %s", key, unserved[key])
            continue
        if unserved is not None:
            unserved.pop(key, None)
    return tables
