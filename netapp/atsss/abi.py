"""ATSSS's part of the data plane ABI (dataplane/include/dpp/nf/atsss.h) as ctypes mirrors: its
constants, enums, the session, the path and its counters, the uplink's path index, per-path state,
node settings and Ack records, checked against the BTF of the built object by
tests/atsss/test_abi.py.

Only ctypes, enum and netapp.dataplane.cenum here, as the other functions' ABI modules."""

from __future__ import annotations

import enum
import sys
from ctypes import Structure, c_int32, c_uint8, c_uint16, c_uint32, c_uint64

from netapp.dataplane.cenum import c_enum

MAX_SESSIONS = 16384
MAX_PATHS_PER_SESSION = 4
MAX_PATHS = 65536
IPPROTO_DCCP = 33
DCCP_HDR_LEN = 16
DCCP_TYPE_DATA = 2
DCCP_TYPE_ACK = 3
DCCP_TYPE_DATAACK = 4
DCCP_ACK_LEN = 8
DCCP_OPT_PADDING = 0
DCCP_SEQ_BITS = 48
TTL = 64
IP_DF = 0x4000
HEAD4_LEN = 40
DCCP_OPT_MULTIPATH = 46
MP_SEQ = 4
MP_SEQ_LEN = 9
OPTIONS_LEN = 12
MAX_OPTIONS = 32
DCCP_OPT_ACK_VECTOR0 = 38
DCCP_OPT_ACK_VECTOR1 = 39
ACK_VECTOR_MAX = 64
LOSS_REORDER = 3
LOSS_MARKED = 1 << 63
ACK_RING_SIZE = 262144
ACK_FRAME_MAX = 88
UE_FILTER_LOG2 = 18
UE_FILTER_WORDS = (1 << UE_FILTER_LOG2) // 64
UE_FILTER_MULTIPLIER = 0x9E3779B1
INDEX_LOG2 = 13
INDEX_BUCKETS = 1 << INDEX_LOG2
INDEX4_WAYS = 7
INDEX6_WAYS = 3
TX_GROUPS = 256
MAX_FLOW_STATES = 16384
RULE_MODE_BITS = 8

CONSTANTS = {
    "DPP_MAX_ATSSS_SESSIONS": MAX_SESSIONS,
    "DPP_ATSSS_MAX_PATHS": MAX_PATHS_PER_SESSION,
    "DPP_MAX_ATSSS_PATHS": MAX_PATHS,
    "DPP_ATSSS_IPPROTO_DCCP": IPPROTO_DCCP,
    "DPP_ATSSS_DCCP_HDR_LEN": DCCP_HDR_LEN,
    "DPP_ATSSS_DCCP_TYPE_DATA": DCCP_TYPE_DATA,
    "DPP_ATSSS_DCCP_TYPE_ACK": DCCP_TYPE_ACK,
    "DPP_ATSSS_DCCP_TYPE_DATAACK": DCCP_TYPE_DATAACK,
    "DPP_ATSSS_DCCP_ACK_LEN": DCCP_ACK_LEN,
    "DPP_ATSSS_DCCP_OPT_PADDING": DCCP_OPT_PADDING,
    "DPP_ATSSS_DCCP_SEQ_BITS": DCCP_SEQ_BITS,
    "DPP_ATSSS_TTL": TTL,
    "DPP_ATSSS_IP_DF": IP_DF,
    "DPP_ATSSS_HEAD4_LEN": HEAD4_LEN,
    "DPP_ATSSS_DCCP_OPT_MULTIPATH": DCCP_OPT_MULTIPATH,
    "DPP_ATSSS_MP_SEQ": MP_SEQ,
    "DPP_ATSSS_MP_SEQ_LEN": MP_SEQ_LEN,
    "DPP_ATSSS_OPTIONS_LEN": OPTIONS_LEN,
    "DPP_ATSSS_MAX_OPTIONS": MAX_OPTIONS,
    "DPP_ATSSS_DCCP_OPT_ACK_VECTOR0": DCCP_OPT_ACK_VECTOR0,
    "DPP_ATSSS_DCCP_OPT_ACK_VECTOR1": DCCP_OPT_ACK_VECTOR1,
    "DPP_ATSSS_ACK_VECTOR_MAX": ACK_VECTOR_MAX,
    "DPP_ATSSS_LOSS_REORDER": LOSS_REORDER,
    "DPP_ATSSS_LOSS_MARKED": LOSS_MARKED,
    "DPP_ATSSS_ACK_RING_SIZE": ACK_RING_SIZE,
    "DPP_ATSSS_ACK_FRAME_MAX": ACK_FRAME_MAX,
    "DPP_ATSSS_UE_FILTER_LOG2": UE_FILTER_LOG2,
    "DPP_ATSSS_UE_FILTER_WORDS": UE_FILTER_WORDS,
    "DPP_ATSSS_UE_FILTER_MULTIPLIER": UE_FILTER_MULTIPLIER,
    "DPP_ATSSS_INDEX_LOG2": INDEX_LOG2,
    "DPP_ATSSS_INDEX_BUCKETS": INDEX_BUCKETS,
    "DPP_ATSSS_INDEX4_WAYS": INDEX4_WAYS,
    "DPP_ATSSS_INDEX6_WAYS": INDEX6_WAYS,
    "DPP_ATSSS_TX_GROUPS": TX_GROUPS,
    "DPP_MAX_ATSSS_FLOW_STATES": MAX_FLOW_STATES,
    "DPP_ATSSS_RULE_MODE_BITS": RULE_MODE_BITS,
}


@c_enum("dpp_atsss_mode", "DPP_ATSSS_")
class Mode(enum.IntEnum):
    ROUND_ROBIN = 0
    WEIGHTED = 1
    ACTIVE_STANDBY = 2
    SMALLEST_DELAY = 3
    PRIORITY = 4
    REDUNDANT = 5


@c_enum("dpp_atsss_uplink_reason", "DPP_ATSSS_UP_", has_max=True)
class UplinkReason(enum.IntEnum):
    """What became of an uplink packet: the first two are MP-DCCP of a known path, the rest why a
    packet was not (and ACK_LOST: an Ack owed the UE that the ring had no room for)."""

    DECAPSULATED = 0
    ACK = 1
    TRUNC_HEADER = 2
    BAD_HEADER = 3
    TRUNC_OPTIONS = 4
    BAD_OPTIONS = 5
    BAD_CHECKSUM = 6
    UNKNOWN_PATH = 7
    BAD_INNER = 8
    ACK_LOST = 9


@c_enum("dpp_atsss_uplink_flags", "DPP_ATSSS_")
class UplinkFlags(enum.IntFlag):
    DROP_INVALID = 1


@c_enum("dpp_atsss_access", "DPP_ATSSS_ACCESS_")
class Access(enum.IntEnum):
    THREE_GPP = 0
    NON_THREE_GPP = 1


@c_enum("dpp_atsss_session_flags", "DPP_ATSSS_")
class SessionFlags(enum.IntFlag):
    """HEADER_CHECKSUM: the downlink's DCCP checksum covers the header and options only (CsCov 1).
    FLOW_RULES: MTS sessions with flow filters select flows of the UE's downlink (netapp.atsss.flows):
    the stage looks its frames up in the classifier."""

    HEADER_CHECKSUM = 1
    FLOW_RULES = 2


@c_enum("dpp_atsss_path_flags", "DPP_ATSSS_PATH_")
class PathFlags(enum.IntFlag):
    UP = 1
    CONGESTED = 2


def ue_hash(words: tuple[int, int, int, int]) -> int:
    """The hash of an address given as the ABI's four 32-bit words (network order in memory, read in
    host order) that the UE filter and the index take their top bits of: its words xored, read in
    network order, times the multiplier, the low 32 bits (bpf: atsss_ue_hash)."""
    folded = words[0] ^ words[1] ^ words[2] ^ words[3]
    number = int.from_bytes(folded.to_bytes(4, sys.byteorder), "big")
    return (number * UE_FILTER_MULTIPLIER) & 0xFFFFFFFF


def ue_filter_bit(words: tuple[int, int, int, int]) -> int:
    """The bit of the UE filter (dpp_atsss_ues) for an address: the top UE_FILTER_LOG2 bits of its hash."""
    return ue_hash(words) >> (32 - UE_FILTER_LOG2)


def index_bucket(words: tuple[int, int, int, int]) -> int:
    """The bucket of the index (dpp_atsss_index4 or 6) of an address: the top INDEX_LOG2 bits of its hash."""
    return ue_hash(words) >> (32 - INDEX_LOG2)


def paired_path_slots(session_slot: int) -> tuple[int, int]:
    """The path slots the downlink requests with the session in `session_slot` of dpp_atsss_slots
    (bpf: atsss_touch_paths): 2s - 1 and 2s, the slots the store gives a two-path session's paths."""
    return 2 * session_slot - 1, 2 * session_slot


def paired_session_slot(first_path: int) -> int:
    """The session slot whose pair (paired_path_slots) starts at or holds the path slot
    `first_path`; 0 (no session) for path slot 0."""
    return (first_path + 1) // 2


class SpinLock(Structure):
    C_NAME = "bpf_spin_lock"
    _fields_ = [("val", c_uint32)]


class SessionKey(Structure):
    C_NAME = "dpp_atsss_session_key"
    _fields_ = [("family", c_uint8), ("reserved", c_uint8 * 3), ("addr", c_uint32 * 4)]


class Session(Structure):
    C_NAME = "dpp_atsss_session"
    _fields_ = [
        ("lock", SpinLock),
        ("mode", c_uint8),
        ("n_paths", c_uint8),
        ("flags", c_uint8),
        ("tx_group", c_uint8),
        ("weight", c_uint16 * MAX_PATHS_PER_SESSION),
        ("current", c_int32 * MAX_PATHS_PER_SESSION),
        ("path", c_uint32 * MAX_PATHS_PER_SESSION),
        ("priority", c_uint8 * MAX_PATHS_PER_SESSION),
        ("up", c_uint8),
        ("reserved", c_uint8 * 3),
        ("mp_seq", c_uint64),
    ]


class FlowState(Structure):
    C_NAME = "dpp_atsss_flow_state"
    _fields_ = [
        ("lock", SpinLock),
        ("current", c_int32 * MAX_PATHS_PER_SESSION),
        ("reserved", c_uint32),
        ("turns", c_uint64),
        ("reserved2", c_uint64 * 4),
    ]


def rule_arg(mode: Mode, state: int) -> int:
    """An ATSSS rule's arg: its flows' mode, and above RULE_MODE_BITS the slot of their MTS session's
    scheduler state (dpp_atsss_flow_state; 0: the session's own)."""
    return int(mode) | state << RULE_MODE_BITS


class SessionWords(Structure):
    C_NAME = "dpp_atsss_session_words"
    _fields_ = [
        ("key", SessionKey),
        ("slot", c_uint32),
        ("control", c_uint32),
        ("fewer", c_uint32),
        ("weight", c_uint64),
        ("path", c_uint64 * 2),
        ("priority", c_uint64),
    ]


class Index4(Structure):
    C_NAME = "dpp_atsss_index4"
    _fields_ = [("addr", c_uint32 * INDEX4_WAYS), ("slot", c_uint32 * INDEX4_WAYS), ("live", c_uint8),
                ("reserved", c_uint8 * 7)]


class Index6(Structure):
    C_NAME = "dpp_atsss_index6"
    _fields_ = [("addr", (c_uint32 * 4) * INDEX6_WAYS), ("slot", c_uint32 * INDEX6_WAYS), ("live", c_uint8),
                ("reserved", c_uint8 * 3)]


class Path(Structure):
    C_NAME = "dpp_atsss_path"
    _fields_ = [
        ("dccp_seq", c_uint64),
        ("access", c_uint8),
        ("family", c_uint8),
        ("flags", c_uint8),
        ("reserved", c_uint8),
        ("rtt_us", c_uint32),
        ("sport", c_uint16),
        ("dport", c_uint16),
        ("smac", c_uint8 * 6),
        ("dmac", c_uint8 * 6),
        ("local", c_uint32 * 4),
        ("peer", c_uint32 * 4),
        ("packets", c_uint64),
        ("bytes", c_uint64),
        ("head4", c_uint8 * HEAD4_LEN),
        ("head4_dccp_sum", c_uint32),
        ("head4_ip_sum", c_uint16),
        ("reserved2", c_uint16),
    ]


class PathStats(Structure):
    C_NAME = "dpp_atsss_path_stats"
    _fields_ = [("rx_packets", c_uint64), ("rx_bytes", c_uint64), ("rx_acks", c_uint64)]


class UplinkKey(Structure):
    C_NAME = "dpp_atsss_uplink_key"
    _fields_ = [
        ("family", c_uint8),
        ("reserved", c_uint8),
        ("sport", c_uint16),
        ("dport", c_uint16),
        ("reserved2", c_uint16),
        ("peer", c_uint32 * 4),
        ("local", c_uint32 * 4),
    ]


class Uplink(Structure):
    C_NAME = "dpp_atsss_uplink"
    _fields_ = [("path", c_uint32), ("family", c_uint8), ("reserved", c_uint8 * 3), ("ue", c_uint32 * 4)]


class PathRx(Structure):
    C_NAME = "dpp_atsss_path_rx"
    _fields_ = [("gsr", c_uint64), ("gar", c_uint64), ("last_heard_ns", c_uint64), ("unacked", c_uint64),
                ("loss_mark", c_uint64), ("delivered", c_uint64), ("lost", c_uint64)]


class Config(Structure):
    C_NAME = "dpp_atsss_config"
    _fields_ = [("flags", c_uint32), ("ack_ratio", c_uint32)]


class Ack(Structure):
    C_NAME = "dpp_atsss_ack"
    _fields_ = [("ifindex", c_uint32), ("len", c_uint32), ("frame", c_uint8 * ACK_FRAME_MAX)]


ENUMS = (Mode, Access, SessionFlags, PathFlags, UplinkReason, UplinkFlags)
STRUCTS = (SessionKey, Session, SessionWords, Index4, Index6, Path, PathStats, UplinkKey, Uplink, PathRx, Config, Ack)
# name -> (map type, key, value, size)
MAPS = {
    "dpp_atsss_sessions": ("HASH", SessionKey, Session, "DPP_MAX_ATSSS_SESSIONS"),
    "dpp_atsss_slots": ("ARRAY", c_uint32, Session, "DPP_MAX_ATSSS_SESSIONS"),
    "dpp_atsss_index4": ("ARRAY", c_uint32, Index4, "DPP_ATSSS_INDEX_BUCKETS"),
    "dpp_atsss_index6": ("ARRAY", c_uint32, Index6, "DPP_ATSSS_INDEX_BUCKETS"),
    "dpp_atsss_paths": ("ARRAY", c_uint32, Path, "DPP_MAX_ATSSS_PATHS"),
    "dpp_atsss_path_stats": ("PERCPU_ARRAY", c_uint32, PathStats, "DPP_MAX_ATSSS_PATHS"),
    "dpp_atsss_uplink": ("HASH", UplinkKey, Uplink, "DPP_MAX_ATSSS_PATHS"),
    "dpp_atsss_path_rx": ("ARRAY", c_uint32, PathRx, "DPP_MAX_ATSSS_PATHS"),
    "dpp_atsss_uplink_stats": ("PERCPU_ARRAY", c_uint32, "unsigned long long", len(UplinkReason)),
    "dpp_atsss_config": ("ARRAY", c_uint32, Config, 1),
    # a map of maps: a group's entry is written as an inner map's fd and read back as its id
    "dpp_atsss_tx": ("ARRAY_OF_MAPS", c_uint32, c_uint32, "DPP_ATSSS_TX_GROUPS"),
    "dpp_atsss_gate": ("ARRAY", c_uint32, c_uint32, 1),
    "dpp_atsss_ues": ("ARRAY", c_uint32, "unsigned long long", UE_FILTER_WORDS),
}
# The pipeline's maps alone (its stage classifies flows, nf/atsss/flows.h; xdp_atsss has none of them):
# the mirrors checked against dataplane/build/dpp.bpf.o.
FLOW_STRUCTS = (FlowState,)
FLOW_MAPS = {"dpp_atsss_flow_state": ("ARRAY", c_uint32, FlowState, "DPP_MAX_ATSSS_FLOW_STATES")}
# maps of maps: name -> (their inner maps' type, key, value, size)
INNER_MAPS = {"dpp_atsss_tx": ("DEVMAP", c_uint32, "bpf_devmap_val", MAX_PATHS_PER_SESSION)}
# rings: name -> (map type, size); their records are struct dpp_atsss_ack (Ack)
RINGS = {"dpp_atsss_acks": ("RINGBUF", "DPP_ATSSS_ACK_RING_SIZE")}
