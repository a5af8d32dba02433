"""FRER's part of the data plane ABI (dataplane/include/dpp/nf/frer.h) as ctypes mirrors: its
constants, enums and the recovery function's slot, checked against the BTF of the built object by
tests/frer/test_abi.py.

Only ctypes, enum and netapp.dataplane.cenum here, as the other functions' ABI modules."""

from __future__ import annotations

import enum
from ctypes import Structure, c_int64, c_uint8, c_uint16, c_uint32, c_uint64

from netapp.dataplane.cenum import c_enum

MAX_STREAMS = 4096
MAX_IDENTITIES = 16384
MAX_PORTS = 64
MAX_IP_MASKS = 8
RTAG_ETHERTYPE = 0xF1C1
RTAG_LEN = 6
SEQ_SPACE = 65536
HISTORY_MIN = 2
HISTORY_MAX = 32
HISTORY_DEFAULT = 2
VLAN_ANY = 0xFFFF  # a null identity's VLAN when it gives none: any VLAN, tagged or not
REASON_BASE_FRER = 160

CONSTANTS = {
    "DPP_MAX_FRER_STREAMS": MAX_STREAMS,
    "DPP_MAX_FRER_IDENTITIES": MAX_IDENTITIES,
    "DPP_MAX_FRER_PORTS": MAX_PORTS,
    "DPP_FRER_IP_MASKS": MAX_IP_MASKS,
    "DPP_FRER_RTAG_ETHERTYPE": RTAG_ETHERTYPE,
    "DPP_FRER_RTAG_LEN": RTAG_LEN,
    "DPP_FRER_SEQ_SPACE": SEQ_SPACE,
    "DPP_REASON_BASE_FRER": REASON_BASE_FRER,
    "DPP_FRER_HISTORY_MIN": HISTORY_MIN,
    "DPP_FRER_HISTORY_MAX": HISTORY_MAX,
    "DPP_FRER_HISTORY_DEFAULT": HISTORY_DEFAULT,
    "DPP_FRER_VLAN_ANY": VLAN_ANY,
}


class Algo(enum.IntEnum):
    VECTOR = 0
    MATCH = 1


class Flags(enum.IntFlag):
    INDIVIDUAL = 1
    TAKE_NO_SEQUENCE = 2
    POP = 4
    LATENT = 8


class Gate(enum.IntFlag):
    """dpp_frer_gate[0]: the kinds of stream identification the node has entries for."""

    NULL = 1
    IP = 2
    NULL_ANY = 4  # null identities of any VLAN: a second lookup


class Role(enum.IntEnum):
    NONE = 0
    GENERATE = 1
    RECOVER = 2


class Decision(enum.IntEnum):
    NO_STREAM = 0
    TAKE_ANY = 1
    IN_ORDER = 2
    OUT_OF_ORDER = 3
    DUPLICATE = 4
    ROGUE = 5
    TAGLESS_PASSED = 6
    TAGLESS_DISCARDED = 7

    @property
    def passes(self) -> bool:
        return self not in (Decision.DUPLICATE, Decision.ROGUE, Decision.TAGLESS_DISCARDED)


class SpinLock(Structure):
    C_NAME = "bpf_spin_lock"
    _fields_ = [("val", c_uint32)]


COUNTERS = ("passed", "discarded", "out_of_order", "rogue", "lost", "tagless", "resets", "latent_errors", "latent_resets")


class Recovery(Structure):
    C_NAME = "dpp_frer_recovery"
    _fields_ = [
        ("lock", SpinLock),
        ("algo", c_uint8),
        ("history_len", c_uint8),
        ("flags", c_uint8),
        ("latent_paths", c_uint8),
        ("history", c_uint32),
        ("seq", c_uint16),
        ("span", c_uint8),
        ("take_any", c_uint8),
        ("reset_ns", c_uint64),
        ("restart_ns", c_uint64),
        ("passed", c_uint64),
        ("discarded", c_uint64),
        ("out_of_order", c_uint64),
        ("lost", c_uint64),
        ("rogue", c_uint64),
        ("tagless", c_uint64),
        ("resets", c_uint64),
        ("latent_errors", c_uint64),
        ("latent_resets", c_uint64),
        ("latent_difference", c_uint32),
        ("reserved", c_uint32),
        ("latent_period_ns", c_uint64),
        ("latent_reset_period_ns", c_uint64),
        ("latent_test_ns", c_uint64),
        ("latent_reset_ns", c_uint64),
        ("base_difference", c_int64),
        ("reserved2", c_uint64 * 5),
    ]

    def counters(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNTERS}


class CpuCounts(Structure):
    """dpp_frer_cpu_counts's value on one CPU: the frames it passed and discarded without the slot's
    lock (netapp.frer.slots.with_cpu_counts adds them to the slot's)."""

    C_NAME = "dpp_frer_cpu_counts"
    _fields_ = [("passed", c_uint64), ("discarded", c_uint64)]


class NullKey(Structure):
    C_NAME = "dpp_frer_null_key"
    _fields_ = [("dmac", c_uint8 * 6), ("vlan", c_uint16)]


class Stream(Structure):
    C_NAME = "dpp_frer_stream"
    _fields_ = [
        ("next_seq", c_uint32),
        ("role", c_uint8),
        ("reserved", c_uint8 * 3),
        ("deliver_ifindex", c_uint32),
        ("tx_group", c_uint32),
    ]


class MemberKey(Structure):
    C_NAME = "dpp_frer_member_key"
    _fields_ = [("stream", c_uint32), ("ifindex", c_uint32)]


class Member(Structure):
    C_NAME = "dpp_frer_member"
    _fields_ = [("vlan", c_uint16), ("reserved", c_uint16)]


class PortStats(Structure):
    C_NAME = "dpp_frer_port_stats"
    _fields_ = [("encode_errors", c_uint64), ("ungrouped", c_uint64)]


ENUMS = (
    c_enum("dpp_frer_algo", "DPP_FRER_ALGO_")(Algo),
    c_enum("dpp_frer_flags", "DPP_FRER_")(Flags),
    c_enum("dpp_frer_role", "DPP_FRER_ROLE_")(Role),
    c_enum("dpp_frer_decision", "DPP_FRER_")(Decision),
    c_enum("dpp_frer_gate", "DPP_FRER_GATE_")(Gate),
)
STRUCTS = (Recovery, CpuCounts, NullKey, Stream, MemberKey, Member, PortStats)
# name -> (map type, key, value, size)
MAPS = {
    "dpp_frer_recovery": ("ARRAY", c_uint32, Recovery, "DPP_MAX_FRER_STREAMS"),
    "dpp_frer_cpu_counts": ("PERCPU_ARRAY", c_uint32, CpuCounts, "DPP_MAX_FRER_STREAMS"),
    "dpp_frer_streams": ("ARRAY", c_uint32, Stream, "DPP_MAX_FRER_STREAMS"),
    "dpp_frer_null": ("HASH", NullKey, c_uint32, "DPP_MAX_FRER_IDENTITIES"),
    "dpp_frer_ip": ("HASH", "dpp_flow_key", c_uint32, "DPP_MAX_FRER_IDENTITIES"),
    "dpp_frer_ip_masks": ("ARRAY", c_uint32, "dpp_flow_key", "DPP_FRER_IP_MASKS"),
    "dpp_frer_members": ("HASH", MemberKey, Member, "DPP_MAX_FRER_IDENTITIES"),
    # a map of maps: a stream's group is written as an inner map's fd and read back as its id
    "dpp_frer_tx": ("ARRAY_OF_MAPS", c_uint32, c_uint32, "DPP_MAX_FRER_STREAMS"),
    "dpp_frer_port_stats": ("PERCPU_HASH", c_uint32, PortStats, "DPP_MAX_FRER_PORTS"),
    "dpp_frer_gate": ("ARRAY", c_uint32, c_uint32, 1),
    "dpp_frer_onward": ("PERCPU_ARRAY", c_uint32, c_uint32, 1),
}
# maps of maps: name -> (their inner maps' type, key, value, size)
INNER_MAPS = {"dpp_frer_tx": ("DEVMAP_HASH", c_uint32, "bpf_devmap_val", MAX_PORTS)}
