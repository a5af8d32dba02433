"""The PFCP codec adapter: datagrams to `Message`s of `IE`s and back. The only module that imports
the codec library (scapy's `scapy.contrib.pfcp`).

The framing is ours and strict: the header (29.244 7.2.2) and every IE's type and length are walked
here, so that a length that does not add up is found whatever the library would make of it, and
the error names the IE. The bodies of the leaf IEs a session request is made of are read and
written by our own code (netapp.upf.pfcp.leaves: the library costs about 40 us an IE), with the
library's field names and values; the library decodes and encodes the bodies of the other IEs it
knows (leaves: the fields it names, lower-cased; grouped IEs: their children, walked by us), and
those our code does not read with certainty; an IE it does not know keeps its raw body. Decoding is
eager for the IEs the library knows, lazy for none: a request is fully checked before anything acts
on it.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import struct
from typing import Any, Callable, Generic, NamedTuple, Optional, TypeVar

from netapp.upf.pfcp.ies import PFCP_VERSION, SESSION_MESSAGES, IEType, MsgType
from netapp.upf.pfcp.leaves import DECODERS, ENCODERS, Fields

logging.getLogger("scapy").setLevel(logging.ERROR)  # its "APN prematured end" warnings, per datagram

from scapy.contrib import pfcp as _scapy  # noqa: E402  (after quieting its logger)

K = TypeVar("K")
V = TypeVar("V")
NODE_HEADER = 8  # flags, type, length, sequence number (3), spare
SESSION_HEADER = 16  # ... and the SEID (8)
IE_HEADER = 4
_IE_HEADER = struct.Struct("!HH")
_SKIPPED_FIELDS = frozenset({"ietype", "length", "spare", "extra_data", "ie_list"})
_GROUPED = frozenset(ie_type for ie_type, cls in _scapy.ietypecls.items() if issubclass(cls, _scapy.IE_Compound))
_MESSAGE_TYPES = frozenset(MsgType.__members__.values())
# Our readers of leaf IEs, by IE type (netapp.upf.pfcp.leaves); `decode(data, leaves={})`: the library alone.
Leaves = dict[int, Callable[[bytes], Optional[Fields]]]


class MalformedMessage(Exception):
    """A datagram that is not a PFCP message we can act on. `kind` counts it ("too_short",
    "bad_version", "unknown_type", "bad_length", "bad_ie"); `header` is the part that could be read
    (None when not even that), so that a request can still be answered."""

    def __init__(self, kind: str, reason: str, header: Optional["Header"] = None, ie_type: Optional[int] = None):
        super().__init__(reason)
        self.kind = kind
        self.header = header
        self.ie_type = ie_type


class Header(NamedTuple):
    """A message's header. A named tuple, not a frozen dataclass: every datagram's is made on the
    event loop's thread (a dataclass's frozen __init__ cost some 1.5 us of it)."""

    version: int
    type: int
    seq: int
    seid: Optional[int]  # None: a node message (S=0)


class IE:
    """One information element: a leaf with `fields` (the library's field names, lower-cased), or a
    grouped IE with `children`. `raw` is the body as received (empty for IEs we build). Not to be
    changed once made (a plain class with slots: a request makes some seventy of them)."""

    __slots__ = ("type", "fields", "children", "raw")

    def __init__(
        self, type: int, fields: Optional[dict[str, Any]] = None, children: tuple["IE", ...] = (), raw: bytes = b""
    ):
        self.type = type
        self.fields = {} if fields is None else fields
        self.children = children
        self.raw = raw

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IE):
            return NotImplemented
        mine, theirs = (self.type, self.fields, self.children, self.raw), (other.type, other.fields, other.children, other.raw)
        return mine == theirs

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"IE(type={self.type}, fields={self.fields!r}, children={self.children!r}, raw={self.raw!r})"

    def all(self, ie_type: int) -> list["IE"]:
        return [child for child in self.children if child.type == ie_type]

    def one(self, ie_type: int) -> Optional["IE"]:
        for child in self.children:
            if child.type == ie_type:
                return child
        return None

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)


def leaf(ie_type: int, **fields: Any) -> IE:
    return IE(int(ie_type), fields=fields)


def group(ie_type: int, *children: Optional[IE]) -> IE:
    return IE(int(ie_type), children=tuple(child for child in children if child is not None))


@dataclasses.dataclass(frozen=True)
class Message:
    type: int
    seq: int
    seid: Optional[int]
    ies: IE  # a grouped IE of type 0 holding the message's IEs

    @property
    def header(self) -> Header:
        return Header(PFCP_VERSION, self.type, self.seq, self.seid)


def message(msg_type: int, seq: int, seid: Optional[int], *ies: Optional[IE]) -> Message:
    return Message(int(msg_type), seq, seid, group(0, *ies))


# --- decoding ------------------------------------------------------------------------------------


def decode_header(data: bytes) -> tuple[Header, int]:
    """The header and the length of the whole message it announces; MalformedMessage if unreadable."""
    if len(data) < NODE_HEADER:
        raise MalformedMessage("too_short", f"{len(data)} bytes, shorter than a PFCP header")
    flags, msg_type, length = struct.unpack_from("!BBH", data)
    version, has_seid = flags >> 5, flags & 0x01
    if has_seid and len(data) < SESSION_HEADER:
        raise MalformedMessage("too_short", f"{len(data)} bytes, shorter than a session message header")
    if has_seid:
        seid = struct.unpack_from("!Q", data, 4)[0]
        seq = int.from_bytes(data[12:15], "big")
    else:
        seid, seq = None, int.from_bytes(data[4:7], "big")
    header = Header(version, msg_type, seq, seid)
    if version != PFCP_VERSION:
        raise MalformedMessage("bad_version", f"PFCP version {version}", header)
    return header, length + 4


def decode(data: bytes, leaves: Leaves = DECODERS) -> Message:
    """The message in `data` (one datagram); MalformedMessage naming what is wrong."""
    header, total = decode_header(data)
    if header.type not in _MESSAGE_TYPES:
        raise MalformedMessage("unknown_type", f"message type {header.type}", header)
    if (header.seid is not None) != (header.type in SESSION_MESSAGES):
        raise MalformedMessage("bad_ie", "the S flag does not fit the message type", header)
    start = SESSION_HEADER if header.seid is not None else NODE_HEADER
    if total < start or total > len(data):
        raise MalformedMessage(
            "bad_length", f"message length {total} does not fit the datagram ({len(data)} bytes)", header
        )
    # Bytes after the message: a piggybacked message (FO flag) we do not take; ignored.
    seen = _SEEN if leaves is DECODERS else None
    children = _decode_ies(data, start, total, header, leaves, seen)
    return Message(header.type, header.seq, header.seid, IE(0, children=children))


class Recent(Generic[K, V]):
    """What was made lately from the same input, at most `size` entries, the oldest put forgotten
    first. For values that are a function of their key and are not changed once made. Kept small:
    what it holds is walked by the garbage collector's young collections (4,096 IEs held made them
    take some 60 ms, 256 about 2 ms, as without it)."""

    def __init__(self, size: int = 256):
        self._size = size
        self._values: collections.OrderedDict[K, V] = collections.OrderedDict()  # O(1) to forget the oldest

    def get(self, key: K) -> Optional[V]:
        return self._values.get(key)

    def put(self, key: K, value: V) -> None:
        if len(self._values) >= self._size:
            self._values.popitem(last=False)
        self._values[key] = value

    def __len__(self) -> int:
        return len(self._values)


# The IEs decoded lately, by their bytes (header included): an SMF sends most IEs of a session
# request byte for byte as in the requests before (the uplink PDRs, the FARs, QERs and URRs of a
# profile; their leaves), and an IE is a function of its bytes, so it is decoded once and shared (IEs
# are not changed once made). Only IEs decoded whole are kept, none longer than MAX_SEEN bytes.
_SEEN: Recent[bytes, IE] = Recent()
MAX_SEEN = 512


def _decode_ies(
    data: bytes, offset: int, end: int, header: Header, leaves: Leaves, seen: Optional[Recent[bytes, IE]]
) -> tuple[IE, ...]:
    children = []
    while offset < end:
        if end - offset < IE_HEADER:
            raise MalformedMessage("bad_length", "an IE header is cut short", header)
        ie_type, length = _IE_HEADER.unpack_from(data, offset)
        body_start = offset + IE_HEADER
        body_end = body_start + length
        if body_end > end:
            raise MalformedMessage(
                "bad_length", f"IE {ie_type}: length {length} runs past its message or group", header, ie_type
            )
        if seen is None:
            children.append(_decode_ie(data, ie_type, body_start, body_end, header, leaves, seen))
        else:
            key = data[offset:body_end]
            ie = seen.get(key)
            if ie is None:
                ie = _decode_ie(data, ie_type, body_start, body_end, header, leaves, seen)
                if length <= MAX_SEEN:
                    seen.put(key, ie)
            children.append(ie)
        offset = body_end
    return tuple(children)


def _decode_ie(
    data: bytes, ie_type: int, start: int, end: int, header: Header, leaves: Leaves, seen: Optional[Recent[bytes, IE]]
) -> IE:
    body = data[start:end]
    if ie_type in _GROUPED:
        return IE(ie_type, children=_decode_ies(data, start, end, header, leaves, seen), raw=body)
    ours = leaves.get(ie_type)
    if ours is not None and (fields := ours(body)) is not None:
        return IE(ie_type, fields=fields, raw=body)
    cls = None if ie_type & 0x8000 else _scapy.ietypecls.get(ie_type)
    if cls is None:
        return IE(ie_type, raw=body)  # vendor-specific or unknown to the library: kept, not read
    try:
        packet = cls(bytes(data[start - IE_HEADER : end]))
        fields = {
            field.name.lower(): packet.getfieldval(field.name)
            for field in packet.fields_desc
            if field.name.lower() not in _SKIPPED_FIELDS
        }
    except Exception as exc:  # the library's own errors (struct.error, IndexError, ...): a bad body
        raise MalformedMessage("bad_ie", f"IE {ie_type}: {exc}", header, ie_type) from exc
    return IE(ie_type, fields=fields, raw=body)


# --- encoding ------------------------------------------------------------------------------------


def encode(msg: Message, leaves: dict[int, Callable[[Fields], Optional[bytes]]] = ENCODERS) -> bytes:
    """The datagram of `msg`; `leaves={}`: every leaf IE by the library."""
    body = b"".join(_encode_ie(ie, leaves) for ie in msg.ies.children)
    if msg.seid is not None:
        head = struct.pack("!BBHQ", (PFCP_VERSION << 5) | 0x01, msg.type, len(body) + 12, msg.seid)
    else:
        head = struct.pack("!BBH", PFCP_VERSION << 5, msg.type, len(body) + 4)
    return head + msg.seq.to_bytes(3, "big") + b"\x00" + body


def _encode_ie(ie: IE, leaves: dict[int, Callable[[Fields], Optional[bytes]]]) -> bytes:
    if ie.children or ie.type in _GROUPED:
        body = b"".join(_encode_ie(child, leaves) for child in ie.children)
        return struct.pack("!HH", ie.type, len(body)) + body
    cls = _scapy.ietypecls.get(ie.type)
    if cls is None or (ie.raw and not ie.fields):
        return struct.pack("!HH", ie.type, len(ie.raw)) + ie.raw
    ours = leaves.get(ie.type)
    if ours is not None and (encoded := ours(ie.fields)) is not None:
        return encoded
    names = {field.name.lower(): field.name for field in cls.fields_desc}
    try:
        return bytes(cls(**{names[name]: value for name, value in ie.fields.items()}))
    except KeyError as exc:
        raise ValueError(f"IE {IEType(ie.type).name}: no field {exc}") from exc
