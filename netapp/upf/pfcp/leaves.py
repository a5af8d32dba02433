"""Our own decoders and encoders of the leaf IEs a session request is made of: the fast path of the
codec adapter (netapp.upf.pfcp.codec), which falls back to the library for everything else.

A decoder returns the IE's fields exactly as the library names and values them (lower-cased names,
its defaults for the fields the flags leave out, addresses as text), so that nothing above the
adapter can tell the two apart; or None when the body is not one it reads with certainty (shorter
than the flags ask, a length the library would read its own way): the library then decodes it,
whatever it makes of it. Tests compare both on the same bytes, valid and mutated (tests/upf).

An encoder returns the whole IE (header included) from the fields, or None for the library to do it.
"""

from __future__ import annotations

import socket
import struct
from typing import Any, Callable, Optional

from netapp.upf.pfcp.ies import IEType

Fields = dict[str, Any]
_U16, _U32, _U64 = struct.Struct("!H"), struct.Struct("!I"), struct.Struct("!Q")
_IE_HEADER = struct.Struct("!HH")


def _ipv4(body: bytes, at: int) -> str:
    return socket.inet_ntoa(body[at : at + 4])


def _ipv6(body: bytes, at: int) -> str:
    return socket.inet_ntop(socket.AF_INET6, body[at : at + 16])


def _u8(body: bytes, at: int) -> int:
    return body[at]


def _u16(body: bytes, at: int) -> int:
    return _U16.unpack_from(body, at)[0]


def _u24(body: bytes, at: int) -> int:
    return int.from_bytes(body[at : at + 3], "big")


def _u32(body: bytes, at: int) -> int:
    return _U32.unpack_from(body, at)[0]


def _u64(body: bytes, at: int) -> int:
    return _U64.unpack_from(body, at)[0]


# One optional value: (field name, present?, size, reader).
Part = tuple[str, int, int, Callable[[bytes, int], Any]]


def _flagged(body: bytes, at: int, fields: Fields, parts: tuple[Part, ...]) -> Optional[Fields]:
    """`fields` with the values the flags say are present, read in order from `at` on; None when
    the body is too short for them."""
    if len(body) < at + sum(size for _, present, size, _ in parts if present):
        return None
    for name, present, size, read in parts:
        if present:
            fields[name] = read(body, at)
            at += size
    return fields


def apn(data: bytes) -> bytes:
    """The library's reading of a length-prefixed label string (its APNStrLenField), dots between."""
    out, rest = b"", data
    while rest:
        end = rest[0] + 1
        out += rest[1:end]
        rest = rest[end:]
        if rest:
            out += b"."
    return out


# --- decoders: (body) -> fields, or None ---------------------------------------------------------


def _uint(name: str, size: int) -> Callable[[bytes], Optional[Fields]]:
    read = {1: _u8, 2: _u16, 4: _u32}[size]

    def decode(body: bytes) -> Optional[Fields]:
        return {name: read(body, 0)} if len(body) >= size else None

    return decode


def _flags(*names: str) -> Callable[[bytes], Optional[Fields]]:
    """One octet of flags, most significant bit first; None names a spare bit."""

    def decode(body: bytes) -> Optional[Fields]:
        if not body:
            return None
        octet = body[0]
        return {name: (octet >> (7 - bit)) & 1 for bit, name in enumerate(names) if name is not None}

    return decode


def _interface(body: bytes) -> Optional[Fields]:
    return {"interface": body[0] & 0x0F} if body else None


def _cause(body: bytes) -> Optional[Fields]:
    return {"cause": body[0]} if len(body) == 1 else None  # no room for extra data in the library's


def _gate_status(body: bytes) -> Optional[Fields]:
    return {"ul": (body[0] >> 2) & 0x03, "dl": body[0] & 0x03} if body else None


def _mbr(body: bytes) -> Optional[Fields]:
    if len(body) < 10:
        return None
    return {"ul": (body[0] << 32) | _U32.unpack_from(body, 1)[0], "dl": (body[5] << 32) | _U32.unpack_from(body, 6)[0]}


def _qfi(body: bytes) -> Optional[Fields]:
    return {"qfi": body[0] & 0x3F} if body else None


def _volume(body: bytes) -> Optional[Fields]:
    if not body:
        return None
    flags = body[0]
    tovol, ulvol, dlvol = flags & 1, (flags >> 1) & 1, (flags >> 2) & 1
    fields = {"dlvol": dlvol, "ulvol": ulvol, "tovol": tovol, "total": 0, "uplink": 0, "downlink": 0}
    parts = (("total", tovol, 8, _u64), ("uplink", ulvol, 8, _u64), ("downlink", dlvol, 8, _u64))
    return _flagged(body, 1, fields, parts)


def _reporting_triggers(body: bytes) -> Optional[Fields]:
    if len(body) < 2:
        return None
    return {**_FIRST_TRIGGERS(body[:1]), **_SECOND_TRIGGERS(body[1:2])}  # type: ignore[dict-item]


_FIRST_TRIGGERS = _flags(
    "linked_usage_reporting", "dropped_dl_traffic_threshold", "stop_of_traffic", "start_of_traffic",
    "quota_holding_time", "time_threshold", "volume_threshold", "periodic_reporting",
)
_SECOND_TRIGGERS = _flags(
    None, None, "event_quota", "event_threshold", "mac_addresses_reporting", "envelope_closure", "time_quota",
    "volume_quota",
)


def _fseid(body: bytes) -> Optional[Fields]:
    if len(body) < 9:
        return None
    v4, v6 = (body[0] >> 1) & 1, body[0] & 1
    fields: Fields = {"v4": v4, "v6": v6, "seid": _u64(body, 1), "ipv4": 0, "ipv6": 0}
    return _flagged(body, 9, fields, (("ipv4", v4, 4, _ipv4), ("ipv6", v6, 16, _ipv6)))


def _node_id(body: bytes) -> Optional[Fields]:
    if not body:
        return None
    kind = body[0] & 0x0F
    fields: Fields = {"id_type": kind, "ipv4": 0, "ipv6": 0, "id": b""}
    if kind == 0:
        if len(body) < 5:
            return None
        fields["ipv4"] = _ipv4(body, 1)
    elif kind == 1:
        if len(body) < 17:
            return None
        fields["ipv6"] = _ipv6(body, 1)
    elif kind == 2:
        fields["id"] = apn(body[1:])
    return fields


def _fteid(body: bytes) -> Optional[Fields]:
    if not body:
        return None
    flags = body[0]
    chid, ch, v6, v4 = (flags >> 3) & 1, (flags >> 2) & 1, (flags >> 1) & 1, flags & 1
    fields: Fields = {"chid": chid, "ch": ch, "v6": v6, "v4": v4, "teid": 0, "ipv4": 0, "ipv6": 0, "choose_id": 0}
    given = not ch
    return _flagged(body, 1, fields, (
        ("teid", given, 4, _u32), ("ipv4", given and v4, 4, _ipv4), ("ipv6", given and v6, 16, _ipv6),
        ("choose_id", chid, 1, _u8),
    ))


def _ue_ip(body: bytes) -> Optional[Fields]:
    if not body:
        return None
    sd, v4, v6 = (body[0] >> 2) & 1, (body[0] >> 1) & 1, body[0] & 1
    fields: Fields = {"sd": sd, "v4": v4, "v6": v6, "ipv4": 0, "ipv6": 0}
    return _flagged(body, 1, fields, (("ipv4", v4, 4, _ipv4), ("ipv6", v6, 16, _ipv6)))


_OHC_FLAGS = ("stag", "ctag", "ipv6", "ipv4", "udpipv6", "udpipv4", "gtpuudpipv6", "gtpuudpipv4")


def _outer_header_creation(body: bytes) -> Optional[Fields]:
    if len(body) < 2:
        return None
    flags = {name: (body[0] >> (7 - bit)) & 1 for bit, name in enumerate(_OHC_FLAGS)}
    has_teid = flags["gtpuudpipv4"] or flags["gtpuudpipv6"]
    has_v4 = flags["ipv4"] or flags["udpipv4"] or flags["gtpuudpipv4"]
    has_v6 = flags["ipv6"] or flags["udpipv6"] or flags["gtpuudpipv6"]
    has_port = flags["udpipv4"] or flags["udpipv6"]
    has_ctag, has_stag = flags["ctag"], flags["stag"]
    # The library names a flag and a value alike ("ipv4", "ctag", ...): the value, read later, wins.
    fields: Fields = {**flags, "teid": 0, "ipv4": 0, "ipv6": 0, "port": 0, "ctag": 0, "stag": 0}
    return _flagged(body, 2, fields, (
        ("teid", has_teid, 4, _u32), ("ipv4", has_v4, 4, _ipv4), ("ipv6", has_v6, 16, _ipv6),
        ("port", has_port, 2, _u16), ("ctag", has_ctag, 3, _u24), ("stag", has_stag, 3, _u24),
    ))


def _outer_header_removal(body: bytes) -> Optional[Fields]:
    if not body:
        return None
    if len(body) == 1:
        return {"header": body[0], "pdu_session_container": None}
    return {"header": body[0], "pdu_session_container": body[1] & 1}


def _sdf_filter(body: bytes) -> Optional[Fields]:
    if len(body) < 2:
        return None
    flags = body[0]
    bid, fl, spi, ttc, fd = (flags >> 4) & 1, (flags >> 3) & 1, (flags >> 2) & 1, (flags >> 1) & 1, flags & 1
    fields: Fields = {
        "bid": bid, "fl": fl, "spi": spi, "ttc": ttc, "fd": fd, "spare_oct": body[1],
        "flow_description_length": None, "flow_description": b"", "tos_traffic_class": 0, "tos_traffic_mask": 0,
        "security_parameter_index": 0, "flow_label": 0, "sdf_filter_id": 0,
    }
    at = 2
    if fd:
        if len(body) < 4:
            return None
        length = _U16.unpack_from(body, 2)[0]
        if len(body) < 4 + length:
            return None
        fields["flow_description_length"] = length
        fields["flow_description"] = body[4 : 4 + length]
        at = 4 + length
    return _flagged(body, at, fields, (
        ("tos_traffic_class", ttc, 1, _u8), ("tos_traffic_mask", ttc, 1, _u8),
        ("security_parameter_index", spi, 4, _u32), ("flow_label", fl, 3, _u24), ("sdf_filter_id", bid, 4, _u32),
    ))


def _network_instance(body: bytes) -> Optional[Fields]:
    return {"instance": apn(body)}


DECODERS: dict[int, Callable[[bytes], Optional[Fields]]] = {
    IEType.CAUSE: _cause,
    IEType.SOURCE_INTERFACE: _interface,
    IEType.F_TEID: _fteid,
    IEType.NETWORK_INSTANCE: _network_instance,
    IEType.SDF_FILTER: _sdf_filter,
    IEType.GATE_STATUS: _gate_status,
    IEType.MBR: _mbr,
    IEType.PRECEDENCE: _uint("precedence", 4),
    IEType.VOLUME_THRESHOLD: _volume,
    IEType.TIME_THRESHOLD: _uint("threshold", 4),
    IEType.REPORTING_TRIGGERS: _reporting_triggers,
    IEType.DESTINATION_INTERFACE: _interface,
    IEType.APPLY_ACTION: _flags(None, None, None, "dupl", "nocp", "buff", "forw", "drop"),
    IEType.PFCPSM_REQ_FLAGS: _flags(None, None, None, None, None, "quarr", "sndem", "drobu"),
    IEType.PDR_ID: _uint("id", 2),
    IEType.F_SEID: _fseid,
    IEType.NODE_ID: _node_id,
    IEType.MEASUREMENT_METHOD: _flags(None, None, None, None, None, "event", "volum", "durat"),
    IEType.MEASUREMENT_PERIOD: _uint("period", 4),
    IEType.VOLUME_QUOTA: _volume,
    IEType.TIME_QUOTA: _uint("quota", 4),
    IEType.URR_ID: _uint("id", 4),
    IEType.OUTER_HEADER_CREATION: _outer_header_creation,
    IEType.UE_IP_ADDRESS: _ue_ip,
    IEType.OUTER_HEADER_REMOVAL: _outer_header_removal,
    IEType.RECOVERY_TIME_STAMP: _uint("timestamp", 4),
    IEType.FAR_ID: _uint("id", 4),
    IEType.QER_ID: _uint("id", 4),
    IEType.QFI: _qfi,
}


# --- encoders: (fields) -> the whole IE, or None -------------------------------------------------


def _ie(ie_type: int, body: bytes) -> bytes:
    return _IE_HEADER.pack(ie_type, len(body)) + body


def _address(text: Any, family: int) -> bytes:
    return socket.inet_pton(family, str(text))


def _encode_cause(fields: Fields) -> Optional[bytes]:
    return _ie(IEType.CAUSE, bytes((int(fields["cause"]),))) if fields.keys() == {"cause"} else None


def _encode_u32(name: str, ie_type: IEType) -> Callable[[Fields], Optional[bytes]]:
    def encode(fields: Fields) -> Optional[bytes]:
        return _ie(ie_type, _U32.pack(int(fields[name]))) if fields.keys() == {name} else None

    return encode


def _encode_pdr_id(fields: Fields) -> Optional[bytes]:
    return _ie(IEType.PDR_ID, _U16.pack(int(fields["id"]))) if fields.keys() == {"id"} else None


def _encode_node_id(fields: Fields) -> Optional[bytes]:
    if fields.keys() == {"id_type", "ipv4"} and fields["id_type"] == 0:
        return _ie(IEType.NODE_ID, b"\x00" + _address(fields["ipv4"], socket.AF_INET))
    return None


def _encode_addressed(ie_type: IEType, v4_bit: int, head: bytes, fields: Fields, extra: set[str]) -> Optional[bytes]:
    """An IE whose body is a flags octet (v4 at `v4_bit`, v6 at the other of bits 0 and 1), `head`,
    then the IPv4 and IPv6 addresses flagged (F-SEID, F-TEID); None when the fields are not just those."""
    v4, v6 = int(fields.get("v4", 0)), int(fields.get("v6", 0))
    if fields.keys() - {"v4", "v6", "ipv4", "ipv6"} != extra or ("ipv4" in fields) != bool(v4) or (
        "ipv6" in fields
    ) != bool(v6):
        return None
    body = bytes(((v4 << v4_bit) | (v6 << (1 - v4_bit)),)) + head
    if v4:
        body += _address(fields["ipv4"], socket.AF_INET)
    if v6:
        body += _address(fields["ipv6"], socket.AF_INET6)
    return _ie(ie_type, body)


def _encode_fseid(fields: Fields) -> Optional[bytes]:
    return _encode_addressed(IEType.F_SEID, 1, _U64.pack(int(fields.get("seid", 0))), fields, {"seid"})


def _encode_fteid(fields: Fields) -> Optional[bytes]:
    return _encode_addressed(IEType.F_TEID, 0, _U32.pack(int(fields.get("teid", 0))), fields, {"teid"})


def _encode_ue_ip(fields: Fields) -> Optional[bytes]:
    """UE IP Address (29.244 8.2.62) with an IPv4 address and the S/D flag: what a Created PDR
    returns of an address the UPF assigned (CHV4)."""
    if fields.keys() != {"sd", "v4", "ipv4"} or fields["v4"] != 1:
        return None
    flags = 0x02 | (int(fields["sd"]) << 2)  # V4, S/D
    return _ie(IEType.UE_IP_ADDRESS, bytes((flags,)) + _address(fields["ipv4"], socket.AF_INET))


VOLUME_MEASUREMENT_FIELDS = ("total", "uplink", "downlink", "total_packets", "uplink_packets", "downlink_packets")


def _encode_volume_measurement(fields: Fields) -> Optional[bytes]:
    """Volume Measurement (29.244 8.2.44) with every volume and number of packets (TOVOL, ULVOL,
    DLVOL, TONOP, ULNOP, DLNOP): the library knows no numbers of packets."""
    if fields.keys() != set(VOLUME_MEASUREMENT_FIELDS):
        return None
    values = b"".join(_U64.pack(int(fields[name])) for name in VOLUME_MEASUREMENT_FIELDS)
    return _ie(IEType.VOLUME_MEASUREMENT, b"\x3f" + values)


ENCODERS: dict[int, Callable[[Fields], Optional[bytes]]] = {
    IEType.CAUSE: _encode_cause,
    IEType.NODE_ID: _encode_node_id,
    IEType.F_SEID: _encode_fseid,
    IEType.F_TEID: _encode_fteid,
    IEType.PDR_ID: _encode_pdr_id,
    IEType.UE_IP_ADDRESS: _encode_ue_ip,
    IEType.RECOVERY_TIME_STAMP: _encode_u32("timestamp", IEType.RECOVERY_TIME_STAMP),
    IEType.VOLUME_MEASUREMENT: _encode_volume_measurement,
}
