"""End Markers (TS 29.281 7.3.2, TS 23.501 5.8.2.9): when a modification moves a FAR's GTP-U tunnel
to another peer or TEID with PFCPSMReq-Flags SNDEM (a handover), the UPF tells the old peer that no
more T-PDUs come on the old tunnel: a GTP-U End Marker, with the old TEID, from our N3 address.

`EndMarkers` wraps the data path's `Applier` (netapp.upf.around): once the maps send the downlink
the new way and the change stands -- one change, or a transaction's changes at once, committed,
with the service's and the store's locks released -- it sends one End Marker per moved tunnel,
from user space (one datagram per handover, not a per-packet concern). A change undone (the maps
or the store refused a later part, the commit failed) sends none. A send that fails is logged;
the change stands. A restart reapplies sessions from none: no End Marker is sent again.
An End Marker goes only where upf.peer_networks allows (the old tunnel was allowed when it was
set; the setting may have narrowed since).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import struct
from typing import Callable, Optional

from netapp.upf.around import AroundApplier, Pair
from netapp.upf.models import Session
from netapp.upf.peers import Destinations
from netapp.upf.sessions import Applier

GTPU_PORT = 2152
GTP_END_MARKER = 254
log = logging.getLogger(__name__)

Tunnel = tuple[str, int]  # (peer address, TEID)
Send = Callable[[str, int, Optional[str]], None]


def end_marker(teid: int) -> bytes:
    """A GTP-U End Marker: version 1, PT 1, no optional fields, no payload."""
    return struct.pack("!BBHI", 0x30, GTP_END_MARKER, 0, teid)


def moved_tunnels(old: Optional[Session], new: Optional[Session]) -> list[Tunnel]:
    """The old GTP-U tunnels of the FARs of `new` that ask for an End Marker and no longer use it."""
    if old is None or new is None:
        return []
    moved = []
    for far_id, far in sorted(new.fars.items()):
        before = old.fars.get(far_id)
        if not far.send_end_marker or before is None or before.forwarding is None:
            continue
        was = before.forwarding.outer_header_creation
        now = far.forwarding.outer_header_creation if far.forwarding is not None else None
        if was is None or not was.kind.startswith("gtpu") or was.teid is None:
            continue
        if now is None or (now.address, now.teid) != (was.address, was.teid):
            moved.append((was.address, was.teid))
    return moved


def send_end_marker(peer: str, teid: int, source: Optional[str]) -> None:
    """One End Marker to the peer's GTP-U port, from `source` (our N3 address) when given."""
    family = socket.AF_INET6 if ipaddress.ip_address(peer).version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        if source is not None:
            sock.bind((source, 0))
        sock.sendto(end_marker(teid), (peer, GTPU_PORT))


class EndMarkers(AroundApplier):
    """An Applier that sends the End Markers of the changes its inner applier made."""

    def __init__(
        self,
        inner: Applier,
        n3_ipv4: Optional[str],
        n3_ipv6: Optional[str],
        send: Send = send_end_marker,
        allowed: Optional[Destinations] = None,
    ):
        super().__init__(inner)
        self._sources = {4: n3_ipv4, 6: n3_ipv6}
        self._send = send
        self._allowed = allowed  # upf.peer_networks (netapp.upf.peers); None: anywhere

    def _settled(self, pairs: list[Pair]) -> None:
        for old, new in pairs:
            self._send_end_markers(old, new)

    def _send_end_markers(self, old: Optional[Session], new: Optional[Session]) -> None:
        for peer, teid in moved_tunnels(old, new):
            if self._allowed is not None and not self._allowed.allows(peer):  # narrowed since the tunnel was set
                log.warning("UPF: End Marker to %s (TEID %#x) not sent: outside upf.peer_networks", peer, teid)
                continue
            source = self._sources[ipaddress.ip_address(peer).version]
            try:
                self._send(peer, teid, source)
            except OSError as exc:
                log.warning("UPF: End Marker to %s (TEID %#x) not sent: %s", peer, teid, exc)
