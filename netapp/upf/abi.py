"""The UPF's part of the data plane ABI (dataplane/include/dpp/nf/upf.h) as ctypes mirrors: its
constants, enums, structs and maps. netapp.dataplane.abi joins them to the core's, so that
tests/dataplane/test_abi.py checks them against the BTF of the built object like every other.

Only ctypes, enum and netapp.dataplane.cenum here: netapp.dataplane.abi imports this module while it is
being built.
"""

from __future__ import annotations

import enum
from ctypes import CFUNCTYPE, POINTER, Structure, c_int, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p

from netapp.dataplane.cenum import c_enum

MAX_UPF_IFACES = 1024
MAX_UPF_PDRS = 1048576
MAX_UPF_TEIDS = 65536
MAX_UPF_URRS = 65536
MAX_UPF_UE4 = 65536
MAX_UPF_DL4 = 65536
DL4_WAYS = 4
DL4_HASH_MUL = 0x9E3779B1
# a way in the shadow libdpp's dpp_upf_dl4_place reads (netapp.upf.ways): clean when none is set
DL4_PUBLISHED, DL4_RETIRED, DL4_STRAY, DL4_TAKEN = 1, 2, 4, 8
DL4_HASHED, DL4_STAYS = -1, -2  # its bucket and way of an entry going to the hash, or staying
MAX_UPF_SDF_PDRS = 65536
QFI_ANY = 0xFF
ROUTE_SLOTS = 256
REASON_BASE_UPF = 80
PUNT_RING_SIZE = 4 << 20
PUNT_FRAME_MAX = 2048
PDU_NO_CONTAINER = 0xFF  # PdrAction.pdu_type: GTP-U without a PDU Session Container

CONSTANTS = {
    "DPP_MAX_UPF_IFACES": MAX_UPF_IFACES,
    "DPP_MAX_UPF_PDRS": MAX_UPF_PDRS,
    "DPP_MAX_UPF_TEIDS": MAX_UPF_TEIDS,
    "DPP_MAX_UPF_URRS": MAX_UPF_URRS,
    "DPP_MAX_UPF_UE4": MAX_UPF_UE4,
    "DPP_MAX_UPF_DL4": MAX_UPF_DL4,
    "DPP_UPF_DL4_WAYS": DL4_WAYS,
    "DPP_UPF_DL4_HASH_MUL": DL4_HASH_MUL,
    "DPP_UPF_DL4_PUBLISHED": DL4_PUBLISHED,
    "DPP_UPF_DL4_RETIRED": DL4_RETIRED,
    "DPP_UPF_DL4_STRAY": DL4_STRAY,
    "DPP_UPF_DL4_TAKEN": DL4_TAKEN,
    "DPP_UPF_DL4_HASHED": DL4_HASHED,
    "DPP_UPF_DL4_STAYS": DL4_STAYS,
    "DPP_MAX_UPF_SDF_PDRS": MAX_UPF_SDF_PDRS,
    "DPP_UPF_QFI_ANY": QFI_ANY,
    "DPP_UPF_ROUTE_SLOTS": ROUTE_SLOTS,
    "DPP_REASON_BASE_UPF": REASON_BASE_UPF,
    "DPP_UPF_PUNT_RING_SIZE": PUNT_RING_SIZE,
    "DPP_UPF_PUNT_FRAME_MAX": PUNT_FRAME_MAX,
    "DPP_UPF_PDU_NO_CONTAINER": PDU_NO_CONTAINER,
}


class Role(enum.IntEnum):
    NONE = 0
    N3 = 1
    N6 = 2
    N9 = 3


class FarAction(enum.IntEnum):
    FORWARD = 0
    DROP = 1
    BUFFER = 2


class Output(enum.IntEnum):
    FIB = 0
    TX = 1
    REDIRECT = 2
    PASS = 3
    PRIVATE = 4  # the network instance's private routing table; PdrAction.ifindex holds the instance


class RouteTable(enum.IntEnum):
    FIB = 0
    PRIVATE = 1


class PdrFlag(enum.IntFlag):
    DECAP = 1
    ENCAP = 2
    BY_QFI = 4
    NO_MATCH = 8
    SDF = 16
    DUPL = 32
    ENTRY = 64
    UDP = 128


class PuntKind(enum.IntEnum):
    BUFFER = 1
    DUPLICATE = 2


U32x4 = c_uint32 * 4


class Iface(Structure):
    C_NAME = "dpp_upf_iface"
    _fields_ = [
        ("ifindex", c_uint32),
        ("role", c_uint8),
        ("has_ip4", c_uint8),
        ("has_ip6", c_uint8),
        ("dl4_bits", c_uint8),
        ("net_instance", c_uint32),
        ("addr4", c_uint32),
        ("addr6", U32x4),
        ("ue4_base", c_uint32),
        ("ue4_count", c_uint32),
        ("ue4_first", c_uint32),
    ]


class UplinkKey(Structure):
    C_NAME = "dpp_upf_ul_key"
    _fields_ = [("teid", c_uint32), ("qfi", c_uint32)]


class DownlinkKey(Structure):
    C_NAME = "dpp_upf_dl_key"
    _fields_ = [("net_instance", c_uint32), ("family", c_uint32), ("addr", U32x4)]


class PdrAction(Structure):
    C_NAME = "dpp_upf_pdr"
    _fields_ = [
        ("flags", c_uint8),
        ("far", c_uint8),
        ("output", c_uint8),
        ("family", c_uint8),
        ("qfi", c_uint8),
        ("pdu_type", c_uint8),
        ("pdr_id", c_uint16),
        ("ifindex", c_uint32),
        ("urr", c_uint32),
        ("teid", c_uint32),
        ("peer", U32x4),
        ("local", U32x4),
        ("ue_addr", c_uint32),
        ("seid", c_uint32),  # our SEIDs are below 2**32 (netapp.upf.sessions.SEID_SPACE)
        ("policer", c_uint32),  # the QER's policer of the entry's direction (dpp_policers); 0: none
    ]


class Punt(Structure):
    C_NAME = "dpp_upf_punt"
    _fields_ = [
        ("seid", c_uint64),
        ("pdr_id", c_uint16),
        ("kind", c_uint8),
        ("family", c_uint8),
        ("ue_off", c_uint16),
        ("reserved", c_uint16),
        ("ifindex", c_uint32),
        ("len", c_uint32),
        ("frame", c_uint8 * PUNT_FRAME_MAX),
    ]


class Route(Structure):
    C_NAME = "dpp_upf_route"
    _fields_ = [
        ("gen", c_uint64),
        ("dst", U32x4),
        ("within", c_uint32),  # FIB: the ingress; private: the network instance
        ("egress", c_uint32),
        ("max_len", c_uint16),
        ("family", c_uint8),
        ("table", c_uint8),  # RouteTable
        ("dmac", c_uint8 * 6),
        ("smac", c_uint8 * 6),
    ]


class RouteGen(Structure):
    C_NAME = "dpp_upf_route_gen"
    _fields_ = [("gen", c_uint64)]


class UplinkState(Structure):
    C_NAME = "dpp_upf_uplink_state"
    _fields_ = [("teids", c_uint32)]


class DownlinkState(Structure):
    C_NAME = "dpp_upf_downlink_state"
    _fields_ = [("ue4", c_uint32)]


class Usage(Structure):
    C_NAME = "dpp_upf_usage"
    _fields_ = [
        ("ul_packets", c_uint64),
        ("ul_bytes", c_uint64),
        ("dl_packets", c_uint64),
        ("dl_bytes", c_uint64),
    ]


# dpp_upf_punt_cb: a record of the ring, the reader's context; non-zero stops the poll.
PUNT_CB = CFUNCTYPE(c_int, POINTER(Punt), c_void_p)


ENUMS = (
    c_enum("dpp_upf_role", "DPP_UPF_ROLE_")(Role),
    c_enum("dpp_upf_far", "DPP_UPF_FAR_")(FarAction),
    c_enum("dpp_upf_output", "DPP_UPF_OUTPUT_")(Output),
    c_enum("dpp_upf_pdr_flags", "DPP_UPF_PDR_")(PdrFlag),
    c_enum("dpp_upf_punt_kind", "DPP_UPF_PUNT_")(PuntKind),
    c_enum("dpp_upf_route_table", "DPP_UPF_ROUTE_")(RouteTable),
)
STRUCTS = (Iface, UplinkKey, DownlinkKey, PdrAction, UplinkState, DownlinkState, Usage, Route, RouteGen, Punt)

# name -> (map type name, key, value, size): netapp.dataplane.abi makes them MapSpecs.
MAPS = {
    "dpp_upf_ifaces": ("ARRAY", c_uint32, Iface, "DPP_MAX_UPF_IFACES"),
    "dpp_upf_teids": ("ARRAY", c_uint32, PdrAction, "DPP_MAX_UPF_TEIDS"),
    "dpp_upf_ue4": ("ARRAY", c_uint32, PdrAction, "DPP_MAX_UPF_UE4"),
    "dpp_upf_dl4": ("ARRAY", c_uint32, PdrAction, "DPP_MAX_UPF_DL4"),
    "dpp_upf_uplink": ("HASH", UplinkKey, PdrAction, "DPP_MAX_UPF_PDRS"),
    "dpp_upf_uplink_state": ("ARRAY", c_uint32, UplinkState, 1),
    "dpp_upf_downlink": ("HASH", DownlinkKey, PdrAction, "DPP_MAX_UPF_PDRS"),
    "dpp_upf_downlink_state": ("ARRAY", c_uint32, DownlinkState, 1),
    "dpp_upf_sdf_pdrs": ("ARRAY", c_uint32, PdrAction, "DPP_MAX_UPF_SDF_PDRS"),
    "dpp_upf_usage": ("ARRAY", c_uint32, Usage, "DPP_MAX_UPF_URRS"),
    "dpp_upf_routes": ("PERCPU_ARRAY", c_uint32, Route, "DPP_UPF_ROUTE_SLOTS"),
    "dpp_upf_route_gen": ("ARRAY", c_uint32, RouteGen, 1),
    # A CPU's room for a forwarded packet's next hop lookup (struct bpf_fib_lookup, nf/upf/output.h):
    # the data path's alone, never written here.
    "dpp_upf_next_hop_room": ("PERCPU_ARRAY", c_uint32, None, 1),
    # A CPU's room for a downlink hash lookup's key (struct dpp_upf_dl_key, nf/upf/upf.h): the data
    # path's alone, never written here.
    "dpp_upf_dl_key_room": ("PERCPU_ARRAY", c_uint32, None, 1),
}
# The maps read through libdpp's own calls, not as tables: name -> (type name, size).
OWN_MAPS = {"dpp_upf_punt": ("RINGBUF", "DPP_UPF_PUNT_RING_SIZE")}  # dpp_upf_punts_* (upf.c)
# The maps whose size is only a capacity, chosen at load (libdpp's list in maps.c): the PDR tables
# the TEIDs' array, the pools' UE addresses' array, the ways of the SMF-given UE IPv4 addresses (whose
# buckets the interface entries tell the program), the URR slots and the slots of PDRs with SDF
# filters. The program computes slots of the others from their built-in size.
SIZABLE = frozenset({
    "dpp_upf_teids", "dpp_upf_ue4", "dpp_upf_dl4", "dpp_upf_uplink", "dpp_upf_downlink", "dpp_upf_usage",
    "dpp_upf_sdf_pdrs",
})
