"""Where the values of a Session Establishment Request that differ from one session to the next are
in its bytes (netapp.upf.pfcp.templates): its sequence number, the CP F-SEID's SEID, each Create
PDR's UE IPv4 address and each Create FAR's GTP-U/UDP/IPv4 tunnel (the gNB's TEID and address). The
rest of the request -- its rules, their ids, the lengths of every IE -- is its shape: two requests
whose bytes are the same but at those places are of one shape, and their IEs are read alike.

Each place is the one the full path reads (netapp.upf.pfcp.rules: the first IE of its type in its
group), with where the full path puts its value in the session (`Varying.path`); an IE that has
other flags (a UE address with IPv6 or CHV4, a tunnel over IPv6 or to a port) is not a place but
part of the shape.
"""

from __future__ import annotations

import dataclasses
import functools
import socket
import struct
from typing import Any, Callable, Iterator, Optional

from netapp.upf.pfcp.ies import IEType, MsgType

SESSION_HEADER = 16
_IE_HEADER = struct.Struct("!HH")
# The width of each kind of value, in a request and a response (big-endian; an address packed).
WIDTHS = {"seq": 3, "seid": 8, "teid": 4, "slot": 4, "address": 4}
UE_V4 = 0x02  # the UE IP Address flags (29.244 8.2.62) of an IPv4 address; S/D aside (0x04), no other
GTPU_UDP_IPV4 = b"\x01\x00"  # the Outer Header Creation description (29.244 8.2.56): GTP-U/UDP/IPv4 only


# How a value of each kind is read from its bytes: an int, or an address's text.
READERS: dict[str, Callable[[bytes], Any]] = {
    kind: socket.inet_ntoa if kind == "address" else functools.partial(int.from_bytes, byteorder="big")
    for kind in WIDTHS
}


@dataclasses.dataclass(frozen=True)
class Varying:
    """A value's place: its offset, its kind (`WIDTHS`) and where the full path puts it in the
    session (None: the sequence number, which only the response carries)."""

    offset: int
    kind: str
    path: Optional[tuple[Any, ...]]

    @property
    def end(self) -> int:
        return self.offset + WIDTHS[self.kind]

    def read(self, data: bytes) -> Any:
        """The value at its place: an int, or an address's text."""
        return READERS[self.kind](data[self.offset : self.end])

    def write(self, data: bytearray, value: Any) -> None:
        data[self.offset : self.end] = encode(self.kind, value)


# How a value of each kind is carried: an int's bytes, an address packed (READERS' inverse).
ENCODERS: dict[str, Callable[[Any], bytes]] = {
    kind: socket.inet_aton if kind == "address" else functools.partial(int.to_bytes, length=width, byteorder="big")
    for kind, width in WIDTHS.items()
}


def encode(kind: str, value: Any) -> bytes:
    """A value of the kind as PFCP carries it."""
    return ENCODERS[kind](value)


@dataclasses.dataclass(frozen=True)
class Layout:
    """The places of a request's values, and the spans of its shape between them (`kept`)."""

    length: int
    places: tuple[Varying, ...]
    kept: tuple[tuple[int, int], ...]
    hashed: int = dataclasses.field(compare=False)  # the layout is a key of every request's look-up

    def __hash__(self) -> int:
        return self.hashed

    def __post_init__(self) -> None:
        # `shape` compiled for these spans (one join of a tuple display, the offsets written in): it is
        # asked of every request on the event loop's thread
        spans = ", ".join(f"d[{start}:{end}]" for start, end in self.kept)
        object.__setattr__(self, "shape", eval(f"lambda d: b''.join(({spans},))"))  # noqa: S307 - our own text

    @classmethod
    def of(cls, length: int, places: list[Varying]) -> "Layout":
        places.sort(key=lambda place: place.offset)
        spans, at = [], 0
        for place in places:
            spans.append((at, place.offset))
            at = place.end
        spans.append((at, length))
        kept = tuple(span for span in spans if span[0] < span[1])
        return cls(length, tuple(places), kept, hash((length, tuple(places), kept)))

    def shape(self, data: bytes) -> bytes:
        """The request's bytes but for its values: equal for two requests of one shape (each layout
        has its own compiled in place of this one, `__post_init__`)."""
        return b"".join([data[start:end] for start, end in self.kept])

    def raw(self, data: bytes) -> list[bytes]:
        return [data[place.offset : place.end] for place in self.places]


def layout_of(data: bytes) -> Optional[Layout]:
    """The places of a Session Establishment Request's values (its IEs' framing must be whole, as
    in a request the full path has read)."""
    if len(data) < SESSION_HEADER or data[1] != MsgType.SESSION_ESTABLISHMENT_REQUEST or not data[0] & 0x01:
        return None
    places = [Varying(12, "seq", None)]
    top = list(_ies(data, SESSION_HEADER, len(data)))
    fseid = _first(top, IEType.F_SEID)
    if fseid is not None and fseid[1] - fseid[0] >= 9:
        places.append(Varying(fseid[0] + 1, "seid", ("remote", "seid")))
    for start, end in _all(top, IEType.CREATE_PDR):
        places += _pdr_places(data, start, end)
    for start, end in _all(top, IEType.CREATE_FAR):
        places += _far_places(data, start, end)
    return Layout.of(len(data), places)


def _pdr_places(data: bytes, start: int, end: int) -> list[Varying]:
    """A Create PDR's UE IPv4 address (the first of its PDI)."""
    children = list(_ies(data, start, end))
    pdr_id, pdi = _first(children, IEType.PDR_ID), _first(children, IEType.PDI)
    if pdr_id is None or pdr_id[1] - pdr_id[0] != 2 or pdi is None:
        return []
    ue = _first(list(_ies(data, *pdi)), IEType.UE_IP_ADDRESS)
    if ue is None or ue[1] - ue[0] != 5 or data[ue[0]] & ~0x04 != UE_V4:
        return []
    rule = int.from_bytes(data[pdr_id[0] : pdr_id[1]], "big")
    return [Varying(ue[0] + 1, "address", ("pdrs", rule, "pdi", "ue_ip", "ipv4"))]


def _far_places(data: bytes, start: int, end: int) -> list[Varying]:
    """A Create FAR's GTP-U/UDP/IPv4 tunnel (the first outer header creation of its forwarding
    parameters): its TEID and address."""
    children = list(_ies(data, start, end))
    far_id, forwarding = _first(children, IEType.FAR_ID), _first(children, IEType.FORWARDING_PARAMETERS)
    if far_id is None or far_id[1] - far_id[0] != 4 or forwarding is None:
        return []
    creation = _first(list(_ies(data, *forwarding)), IEType.OUTER_HEADER_CREATION)
    if creation is None or creation[1] - creation[0] != 10 or data[creation[0] : creation[0] + 2] != GTPU_UDP_IPV4:
        return []
    rule = int.from_bytes(data[far_id[0] : far_id[1]], "big")
    path = ("fars", rule, "forwarding", "outer_header_creation")
    return [Varying(creation[0] + 2, "teid", (*path, "teid")), Varying(creation[0] + 6, "address", (*path, "address"))]


Span = tuple[int, int]  # an IE's body: (start, end)


def _ies(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(type, body start, body end) of the IEs between start and end."""
    while start + _IE_HEADER.size <= end:
        ie_type, length = _IE_HEADER.unpack_from(data, start)
        body = start + _IE_HEADER.size
        if body + length > end:
            return
        yield ie_type, body, body + length
        start = body + length


def _first(ies: list[tuple[int, int, int]], ie_type: int) -> Optional[Span]:
    return next(((start, end) for each, start, end in ies if each == ie_type), None)


def _all(ies: list[tuple[int, int, int]], ie_type: int) -> list[Span]:
    return [(start, end) for each, start, end in ies if each == ie_type]
