"""The C ABI as ctypes mirrors: dataplane/include/dpp/*.h constants, enums and structs, and every map of
the BPF object by name (`MAPS`); libdpp.h's structs are netapp.dataplane.libdpp_abi's.

Mirrors keep the C names (`C_NAME`, `C_PREFIX`) so tests/dataplane/test_abi.py can check every struct,
enum and map against the BTF of the built BPF object.

Byte order: key numbers are host order; addresses stay in network order, i.e. each __u32 word of
src/dst/addr holds 4 address bytes as they appear on the wire.
"""

from __future__ import annotations

import ctypes
import enum
from ctypes import Structure, c_uint8, c_uint16, c_uint32, c_uint64
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

from netapp.atsss import abi as atsss_abi
from netapp.dataplane.cenum import c_enum
from netapp.duplicate import abi as duplicate_abi
from netapp.frer import abi as frer_abi
from netapp.mec import tunnel_abi
from netapp.qos import rss_abi
from netapp.qos import abi as qos_abi
from netapp.routing import abi as routing_abi
from netapp.upf import abi as upf_abi

# --- dpp_consts.h --------------------------------------------------------------------------------

MAX_RULES = 65536
MAX_FLOWS = 65536
MAX_SHAPES = 16
MAX_TUNNEL_ENDS = 255  # tunnel endpoint addresses rules name at once: ids 1..255 fit a key's byte
MAX_CPUS = 128
MAX_ALT_GROUPS = 64
MAX_ALT_MEMBERS = 8
MAX_PORTS = 64
MAX_VLAN_TAGS = 2
MAX_IPV6_EXT_HDRS = 6
MAX_GTP_EXT_HDRS = 8
PORT_VXLAN = 4789
PORT_GENEVE = 6081
PORT_GTPU = 2152
NONE = 0xFFFFFFFF  # DPP_NONE: no rule, no alternative group, no CPU
FLOW_USE_WINDOW = 4096
FLOW_USE_MIN_HIT_PCT = 50
FLOW_USE_SAMPLE = 64
FILTER_WORDS = 1024
FILTER_MAX_RULES = 8192
MAX_FILTERS = 2 * MAX_SHAPES
METER_SHARE_DIVISOR = 64
METER_SHARE_MAX = 64
METER_TAKEN_BITS = 40
METER_WINDOW_BITS = 24
# Reason ranges (dpp/core/consts.h): each function's reasons lie in REASON_RANGE values from its base.
REASON_RANGE = 16
REASON_BASE_CORE = 0
REASON_BASE_STEER = 32
REASON_BASE_FORWARD = 48
REASON_BASE_REDIRECT = 64

# libdpp.h
PIN_ROOT = "/sys/fs/bpf/dpp"

# Header constant name -> value, for the ABI test (it reads the header's #defines).
CONSTANTS = {
    "DPP_MAX_RULES": MAX_RULES,
    "DPP_MAX_FLOWS": MAX_FLOWS,
    "DPP_MAX_SHAPES": MAX_SHAPES,
    "DPP_MAX_TUNNEL_ENDS": MAX_TUNNEL_ENDS,
    "DPP_MAX_CPUS": MAX_CPUS,
    "DPP_MAX_ALT_GROUPS": MAX_ALT_GROUPS,
    "DPP_MAX_ALT_MEMBERS": MAX_ALT_MEMBERS,
    "DPP_MAX_PORTS": MAX_PORTS,
    "DPP_MAX_VLAN_TAGS": MAX_VLAN_TAGS,
    "DPP_MAX_IPV6_EXT_HDRS": MAX_IPV6_EXT_HDRS,
    "DPP_MAX_GTP_EXT_HDRS": MAX_GTP_EXT_HDRS,
    "DPP_PORT_VXLAN": PORT_VXLAN,
    "DPP_PORT_GENEVE": PORT_GENEVE,
    "DPP_PORT_GTPU": PORT_GTPU,
    "DPP_NONE": NONE,
    "DPP_FLOW_USE_WINDOW": FLOW_USE_WINDOW,
    "DPP_FLOW_USE_MIN_HIT_PCT": FLOW_USE_MIN_HIT_PCT,
    "DPP_FLOW_USE_SAMPLE": FLOW_USE_SAMPLE,
    "DPP_FILTER_WORDS": FILTER_WORDS,
    "DPP_FILTER_MAX_RULES": FILTER_MAX_RULES,
    "DPP_MAX_FILTERS": MAX_FILTERS,
    "DPP_METER_SHARE_DIVISOR": METER_SHARE_DIVISOR,
    "DPP_METER_SHARE_MAX": METER_SHARE_MAX,
    "DPP_METER_TAKEN_BITS": METER_TAKEN_BITS,
    "DPP_METER_WINDOW_BITS": METER_WINDOW_BITS,
    "DPP_REASON_RANGE": REASON_RANGE,
    "DPP_REASON_BASE_CORE": REASON_BASE_CORE,
    "DPP_REASON_BASE_STEER": REASON_BASE_STEER,
    "DPP_REASON_BASE_FORWARD": REASON_BASE_FORWARD,
    "DPP_REASON_BASE_REDIRECT": REASON_BASE_REDIRECT,
    **upf_abi.CONSTANTS,
    **rss_abi.CONSTANTS,
    **qos_abi.CONSTANTS,
    **routing_abi.CONSTANTS,
    **tunnel_abi.CONSTANTS,
    **frer_abi.CONSTANTS,
    **duplicate_abi.CONSTANTS,
}


@c_enum("dpp_action", "DPP_ACTION_", has_max=True)
class Action(enum.IntEnum):
    PASS = 0
    DROP = 1
    STEER = 2
    FORWARD = 3
    REDIRECT = 4
    DEFAULT = 5  # never installed: the packet got the configured default verdict
    UPF = 6  # the UPF's (netapp.upf): what its PDR said, ahead of the classifier or by a rule (SDF filters)
    TUNNEL = 7  # a rule's decapsulation or re-tunnelling, then a port or the router (netapp.mec.tunnels)
    DUPLICATE = 8  # a copy out of each interface of the rule's group (netapp.duplicate)
    ATSSS = 9  # the mode of a flow within a UE's ATSSS downlink, read by ATSSS's stage (netapp.atsss.flows)


@c_enum("dpp_verdict", "DPP_VERDICT_", has_max=True)
class Verdict(enum.IntEnum):
    ABORTED = 0
    DROP = 1
    PASS = 2
    TX = 3
    REDIRECT = 4


@c_enum("dpp_reason", "DPP_REASON_", has_max=True, c_max=256)
class Reason(enum.IntEnum):
    """dpp/reasons.h: the core's (the parser's) from REASON_BASE_CORE, each function's from its base.
    Sparse: REASON_MAX counters, most of them between ranges and never counted."""

    NONE = REASON_BASE_CORE
    TRUNC_ETH = REASON_BASE_CORE + 1
    TRUNC_VLAN = REASON_BASE_CORE + 2
    VLAN_DEPTH = REASON_BASE_CORE + 3
    TRUNC_IPV4 = REASON_BASE_CORE + 4
    BAD_IPV4 = REASON_BASE_CORE + 5
    TRUNC_IPV6 = REASON_BASE_CORE + 6
    BAD_IPV6 = REASON_BASE_CORE + 7
    IPV6_EXT_DEPTH = REASON_BASE_CORE + 8
    TRUNC_L4 = REASON_BASE_CORE + 9
    TRUNC_VXLAN = REASON_BASE_CORE + 10
    TRUNC_GENEVE = REASON_BASE_CORE + 11
    BAD_GENEVE = REASON_BASE_CORE + 12
    TRUNC_GRE = REASON_BASE_CORE + 13
    BAD_GRE = REASON_BASE_CORE + 14
    TRUNC_GTP = REASON_BASE_CORE + 15
    BAD_GTP = REASON_BASE_CORE + 16
    GTP_EXT_DEPTH = REASON_BASE_CORE + 17
    GTP_SIGNALLING = REASON_BASE_CORE + 18
    NOT_IP = REASON_BASE_CORE + 19
    CPU_UNAVAILABLE = REASON_BASE_STEER
    CPU_OVERLOADED = REASON_BASE_STEER + 1
    NO_ALTERNATIVE = REASON_BASE_FORWARD
    PORT_UNAVAILABLE = REASON_BASE_REDIRECT
    UPF_TEID_MISS = upf_abi.REASON_BASE_UPF
    UPF_NO_ROUTE = upf_abi.REASON_BASE_UPF + 1
    UPF_NO_NEIGH = upf_abi.REASON_BASE_UPF + 2
    UPF_BUFFERED = upf_abi.REASON_BASE_UPF + 3
    UPF_FAR_DROP = upf_abi.REASON_BASE_UPF + 4
    UPF_ECHO = upf_abi.REASON_BASE_UPF + 5
    UPF_ERROR_INDICATION = upf_abi.REASON_BASE_UPF + 6
    UPF_END_MARKER = upf_abi.REASON_BASE_UPF + 7
    UPF_ENCAP_FAILED = upf_abi.REASON_BASE_UPF + 8
    UPF_NO_PDR = upf_abi.REASON_BASE_UPF + 9
    UPF_PUNT_FULL = upf_abi.REASON_BASE_UPF + 10
    UPF_PUNT_TOO_LONG = upf_abi.REASON_BASE_UPF + 11
    QOS_POLICED = qos_abi.REASON_BASE_QOS
    ROUTING_NO_ROUTE = routing_abi.REASON_BASE_ROUTING
    ROUTING_NO_NEIGH = routing_abi.REASON_BASE_ROUTING + 1
    FRER_ELIMINATED = frer_abi.REASON_BASE_FRER
    FRER_BAD_RTAG = frer_abi.REASON_BASE_FRER + 1
    FRER_NO_STREAM = frer_abi.REASON_BASE_FRER + 2
    FRER_NO_GROUP = frer_abi.REASON_BASE_FRER + 3
    TUNNEL_MISSING = tunnel_abi.REASON_BASE_TUNNEL
    TUNNEL_NOT_GTPU = tunnel_abi.REASON_BASE_TUNNEL + 1
    TUNNEL_NO_SOURCE = tunnel_abi.REASON_BASE_TUNNEL + 2
    TUNNEL_FAILED = tunnel_abi.REASON_BASE_TUNNEL + 3
    TUNNEL_NOT_IP = tunnel_abi.REASON_BASE_TUNNEL + 4
    TUNNEL_COPY_FAILED = tunnel_abi.REASON_BASE_TUNNEL + 5


@c_enum("dpp_overlay", "DPP_OVERLAY_")
class Overlay(enum.IntEnum):
    NONE = 0
    VXLAN = 1
    GENEVE = 2
    GRE = 3


@c_enum("dpp_rule_flags", "DPP_RULE_")
class RuleFlag(enum.IntFlag):
    BEST_EFFORT = 1
    POLICED = 2


@c_enum("dpp_key_flags", "DPP_KEY_")
class KeyFlag(enum.IntFlag):
    GTP = 1
    GTP_QFI = 2
    GTP_UL = 4
    FRAGMENT = 8
    VNI = 16
    UPF = 32
    ATSSS = 64


@c_enum("dpp_xdp_mode", "DPP_XDP_MODE_")
class XdpMode(enum.IntEnum):
    NATIVE = 0
    GENERIC = 1
    OFFLOAD = 2


@c_enum("dpp_prog", "DPP_PROG_", has_max=True)
class Prog(enum.IntEnum):  # slots of dpp_progs: the programs the XDP entry tail-calls
    TRACE = 0
    FRER = 1
    ENTRY = 2
    ATSSS = 3


@c_enum("dpp_functions", "DPP_FUNCTION_")
class Function(enum.IntFlag):  # bits of dpp_config.functions: the functions the entry hands packets to
    FRER = 1 << 0
    RSS = 1 << 1
    ATSSS = 1 << 2


@c_enum("dpp_log_level", "DPP_LOG_")
class LogLevel(enum.IntEnum):
    """libdpp.h (not in the BPF object's BTF)."""

    WARN = 0
    INFO = 1
    DEBUG = 2


ACTION_MAX = Action.C_MAX
VERDICT_MAX = Verdict.C_MAX
REASON_MAX = Reason.C_MAX

# Enums of dpp_consts.h, which the BPF object's BTF carries.
ABI_ENUMS = (
    (Action, Verdict, Reason, Overlay, RuleFlag, KeyFlag, XdpMode, Prog, Function)
    + upf_abi.ENUMS
    + qos_abi.ENUMS
    + routing_abi.ENUMS
    + frer_abi.ENUMS
    + tunnel_abi.ENUMS
)


# --- dpp_structs.h -------------------------------------------------------------------------------

U32x4 = c_uint32 * 4


class FlowKey(Structure):
    C_NAME = "dpp_flow_key"
    _fields_ = [
        ("ifindex", c_uint32),
        ("vni", c_uint32),
        ("teid", c_uint32),
        ("vlan", c_uint16),
        ("overlay", c_uint8),
        ("qfi", c_uint8),
        ("flags", c_uint8),
        ("family", c_uint8),
        ("proto", c_uint8),
        ("dscp", c_uint8),
        ("sport", c_uint16),
        ("dport", c_uint16),
        ("src", U32x4),
        ("dst", U32x4),
        ("shape", c_uint16),
        ("tunnel_src", c_uint8),  # GTP-U: the id of its tunnel's source address (dpp_tunnel_ends), 0: none
        ("tunnel_dst", c_uint8),
    ]


class TunnelEnd(Structure):
    C_NAME = "dpp_tunnel_end"
    _fields_ = [("family", c_uint8), ("pad", c_uint8 * 3), ("addr", U32x4)]


class Rule(Structure):
    C_NAME = "dpp_rule"
    _fields_ = [
        ("slot", c_uint32),
        ("priority", c_uint16),
        ("action", c_uint8),
        ("flags", c_uint8),
        ("arg", c_uint32),  # an index into the action's table: STEER a CPU, FORWARD a group, REDIRECT a port
        ("overflow_group", c_uint32),  # where flows the action cannot serve here go; NONE: the default
    ]


class Shape(Structure):
    C_NAME = "dpp_shape"
    _fields_ = [("mask", FlowKey), ("max_priority", c_uint32)]


class ShapeSet(Structure):
    C_NAME = "dpp_shape_set"
    _fields_ = [
        ("count", c_uint32),
        ("reserved", c_uint32),
        ("shapes", Shape * MAX_SHAPES),
        ("filters", c_uint32 * MAX_SHAPES),  # written by libdpp at publish
    ]


class Config(Structure):
    C_NAME = "dpp_config"
    _fields_ = [
        ("generation", c_uint32),
        ("shape_set", c_uint32),
        ("default_verdict", c_uint32),
        ("default_alt_group", c_uint32),
        ("meter_window_ns", c_uint64),
        ("tunnel_ends", c_uint32),  # entries of dpp_tunnel_ends; 0: GTP-U packets look up no address
        ("functions", c_uint32),  # Function bits: libdpp keeps them from the functions' maps (config_set leaves them)
    ]


class Cpu(Structure):
    C_NAME = "dpp_cpu"
    _fields_ = [
        ("enabled", c_uint32),
        ("overloaded", c_uint32),
        ("capacity_pps", c_uint64),
        ("window_budget", c_uint64),
    ]


class CpuMeter(Structure):
    C_NAME = "dpp_cpu_meter"
    _fields_ = [("origin_ns", c_uint64), ("window_taken", c_uint64)]


class MeterShare(Structure):
    C_NAME = "dpp_meter_share"
    _fields_ = [("window_end_ns", c_uint64), ("tokens", c_uint32), ("exhausted", c_uint32)]


class AltMember(Structure):
    C_NAME = "dpp_alt_member"
    _fields_ = [
        ("dmac", c_uint8 * 6),
        ("smac", c_uint8 * 6),
        ("ifindex", c_uint32),
        ("has_ip4", c_uint32),
        ("addr4", c_uint32),
        ("has_ip6", c_uint32),
        ("addr6", U32x4),
    ]


class AltGroup(Structure):
    C_NAME = "dpp_alt_group"
    _fields_ = [("count", c_uint32), ("members", AltMember * MAX_ALT_MEMBERS)]


class Counter(Structure):
    C_NAME = "dpp_counter"
    _fields_ = [("packets", c_uint64), ("bytes", c_uint64)]


class FlowEntry(Structure):
    C_NAME = "dpp_flow_entry"
    _fields_ = [("generation", c_uint32), ("matched", c_uint32), ("key", FlowKey), ("rule", Rule)]


class FlowUse(Structure):
    C_NAME = "dpp_flow_use"
    _fields_ = [("packets", c_uint32), ("probes", c_uint32), ("hits", c_uint32), ("bypass", c_uint32)]


class Trace(Structure):
    C_NAME = "dpp_trace"
    _fields_ = [
        ("verdict", c_uint32),
        ("action", c_uint32),
        ("slot", c_uint32),
        ("cpu", c_uint32),
        ("reason", c_uint32),
        ("alt_group", c_uint32),
        ("alt_member", c_uint32),
        ("egress_ifindex", c_uint32),
        ("key", FlowKey),
        ("fast_path", c_uint32),
        ("route_path", c_uint32),  # RoutePath
    ]


# Structs of dpp_structs.h, which the BPF object's BTF carries.
ABI_STRUCTS = (
    FlowKey,
    TunnelEnd,
    Rule,
    Shape,
    ShapeSet,
    Config,
    Cpu,
    CpuMeter,
    MeterShare,
    AltMember,
    AltGroup,
    Counter,
    FlowEntry,
    FlowUse,
    Trace,
) + upf_abi.STRUCTS + rss_abi.STRUCTS + qos_abi.STRUCTS + routing_abi.STRUCTS + frer_abi.STRUCTS + (
    duplicate_abi.STRUCTS
)


PERCPU_BYTES_MAX = 4 << 30  # libdpp.h's DPP_PERCPU_BYTES_MAX: the most one per-CPU map may take over all CPUs


# --- kernel types the maps hold (linux/bpf.h) ----------------------------------------------------


class DevmapVal(Structure):
    """struct bpf_devmap_val, without a program: bpf_prog is the union's fd (written) or id (read)."""

    C_NAME = "bpf_devmap_val"
    _fields_ = [("ifindex", c_uint32), ("bpf_prog", c_uint32)]


# Kernel structs a map holds, checked against the BPF object's BTF like ABI_STRUCTS.
KERNEL_STRUCTS = (DevmapVal,) + rss_abi.KERNEL_STRUCTS + qos_abi.KERNEL_STRUCTS


class MapType(enum.IntEnum):
    """enum bpf_map_type (linux/bpf.h): the types of the object's maps."""

    HASH = 1
    ARRAY = 2
    PROG_ARRAY = 3
    PERCPU_HASH = 5
    PERCPU_ARRAY = 6
    LRU_HASH = 9
    LRU_PERCPU_HASH = 10
    LPM_TRIE = 11
    ARRAY_OF_MAPS = 12
    HASH_OF_MAPS = 13
    DEVMAP = 14
    CPUMAP = 16
    DEVMAP_HASH = 25
    RINGBUF = 27


@dataclass(frozen=True)
class MapSpec:
    """A map of bpf/core/maps.h or a bpf/nf/<function>/maps.h: its type, key and value mirrors (None:
    a kernel type with no mirror) and its size constant.

    table: a plain map, read and written as a generic table (netapp.dataplane.tables); False for the
    maps a libdpp module declares, whose writes go through that module's calls (libdpp refuses to
    write them as tables).

    sizable: its size is only a capacity, chosen at load by name (`Dataplane.open(map_sizes=...)`,
    setting `dataplane.map_sizes`); libdpp refuses to size any other map."""

    type: MapType
    key: Any
    value: Any
    max_entries: Union[int, str]  # a number, or the name of a dpp_consts.h constant
    table: bool = False
    sizable: bool = False
    rows: bool = False  # a plain array with a row per possible CPU, sized by libdpp (netapp.dataplane.tables.RowsTable)
    inner: Optional["MapSpec"] = None  # a map of maps': its inner maps' (the value is their fd, read: id)

    @property
    def per_cpu(self) -> bool:
        return self.type in (MapType.PERCPU_HASH, MapType.PERCPU_ARRAY, MapType.LRU_PERCPU_HASH)

    @property
    def array(self) -> bool:
        """Every index below max_entries exists (zeroed until written) and none can be deleted."""
        return self.type in (MapType.ARRAY, MapType.PERCPU_ARRAY)


def map_size_refusal(name: str, entries: int, cpus: int) -> Optional[str]:
    """Why libdpp would refuse to load map `name` with `entries` entries on `cpus` possible CPUs
    (dpp_open_opts.map_sizes), or None. The caller names the map."""
    spec = MAPS.get(name)
    sizable = f"the maps sized at load: {', '.join(sorted(SIZABLE_MAPS))}"
    if spec is None:
        return f"no map of that name; {sizable}"
    if spec.rows:
        return f"its size is the program's (a row of dpp_policers' slots per CPU, sized with it); {sizable}"
    if not spec.sizable:
        return f"its size is the program's (max_rules sizes dpp_rules); {sizable}"
    if not 1 <= entries <= 0xFFFFFFFF:
        return f"{entries} entries: 1 to 4294967295 allowed"
    stride = (ctypes.sizeof(spec.value) + 7) // 8 * 8
    if spec.per_cpu and entries * stride * cpus > PERCPU_BYTES_MAX:
        return (
            f"{entries} entries of {stride} bytes on each of {cpus} possible CPUs take "
            f"{entries * stride * cpus >> 20} MiB, more than the {PERCPU_BYTES_MAX >> 20} MiB a per-CPU map may take"
        )
    return None


ARRAY, HASH, PERCPU_ARRAY = MapType.ARRAY, MapType.HASH, MapType.PERCPU_ARRAY

# Map names are declared once, here (libdpp opens and pins them by these names).
def _nf_map(kind: str, key: Any, value: Any, size: Union[int, str], inner: Optional[tuple] = None) -> MapSpec:
    """A network function's map as its ABI module declares it (netapp.frer.abi, netapp.atsss.abi),
    naming the types it cannot import from here; ATSSS sizes its maps by its own header's constants,
    which dpp_consts.h does not include, so those are resolved here. `inner`: a map of maps' inner
    maps, declared the same way."""
    named = {"dpp_flow_key": FlowKey, "bpf_devmap_val": DevmapVal, "unsigned long long": c_uint64}
    size = atsss_abi.CONSTANTS.get(size, size) if isinstance(size, str) else size
    return MapSpec(MapType[kind], named.get(key, key), named.get(value, value), size, table=True,
                   inner=_nf_map(*inner) if inner is not None else None)


# maps of maps: name -> their inner maps, as each function's ABI module declares them
INNER_MAPS = {**frer_abi.INNER_MAPS, **atsss_abi.INNER_MAPS, **duplicate_abi.INNER_MAPS}

MAPS: Mapping[str, MapSpec] = {
    "dpp_rules": MapSpec(HASH, FlowKey, Rule, "DPP_MAX_RULES"),
    "dpp_shapes": MapSpec(ARRAY, c_uint32, ShapeSet, 2),
    "dpp_config": MapSpec(ARRAY, c_uint32, Config, 1),
    "dpp_tunnel_ends": MapSpec(HASH, TunnelEnd, c_uint32, "DPP_MAX_TUNNEL_ENDS", table=True),
    # A row of flow cache slots per possible CPU in a plain array (core/maps.h).
    "dpp_flows": MapSpec(ARRAY, c_uint32, FlowEntry, "DPP_MAX_FLOWS"),
    "dpp_flow_use": MapSpec(PERCPU_ARRAY, c_uint32, FlowUse, 1, table=True),
    # ATSSS's stage's room for a frame's flow key and the key a shape masks it to (nf/atsss/flows.h):
    # the data path's alone, never written here (a plain map: libdpp would write it as a table).
    "dpp_atsss_flow_room": MapSpec(PERCPU_ARRAY, c_uint32, None, 1, table=True),
    "dpp_cpus": MapSpec(ARRAY, c_uint32, Cpu, "DPP_MAX_CPUS"),
    "dpp_cpu_meters": MapSpec(ARRAY, c_uint32, CpuMeter, "DPP_MAX_CPUS"),
    "dpp_meter_shares": MapSpec(PERCPU_ARRAY, c_uint32, MeterShare, "DPP_MAX_CPUS", table=True),
    "dpp_cpu_map": MapSpec(MapType.CPUMAP, c_uint32, None, "DPP_MAX_CPUS"),
    "dpp_ports": MapSpec(MapType.DEVMAP_HASH, c_uint32, DevmapVal, "DPP_MAX_PORTS", table=True),
    "dpp_alt_groups": MapSpec(ARRAY, c_uint32, AltGroup, "DPP_MAX_ALT_GROUPS", table=True),
    # A row of rule slots per possible CPU in a plain array (core/maps.h), read through libdpp.
    "dpp_rule_stats": MapSpec(ARRAY, c_uint32, Counter, "DPP_MAX_RULES"),
    "dpp_verdicts": MapSpec(PERCPU_ARRAY, c_uint32, Counter, VERDICT_MAX),
    "dpp_actions": MapSpec(PERCPU_ARRAY, c_uint32, Counter, ACTION_MAX),
    "dpp_reasons": MapSpec(PERCPU_ARRAY, c_uint32, Counter, REASON_MAX),
    "dpp_cpu_stats": MapSpec(PERCPU_ARRAY, c_uint32, Counter, "DPP_MAX_CPUS"),
    "dpp_trace": MapSpec(ARRAY, c_uint32, Trace, 1),
    "dpp_filters": MapSpec(ARRAY, c_uint32, None, MAX_FILTERS * FILTER_WORDS),
    # Tail-call slots (a program's id when read), filled by each load and switched by dpp_upgrade.
    "dpp_progs": MapSpec(MapType.PROG_ARRAY, c_uint32, None, len(Prog)),
    "dpp_handover": MapSpec(PERCPU_ARRAY, c_uint32, Trace, 1, table=True),
    "dpp_prog_stats": MapSpec(PERCPU_ARRAY, c_uint32, Counter, len(Prog), table=True),
    # Each network function's own plain tables, declared in its ABI module (netapp/<function>/abi.py).
    **{
        name: MapSpec(MapType[kind], key, value, size, table=True, sizable=name in module.SIZABLE,
                      rows=name in getattr(module, "ROWS", ()))
        for module in (upf_abi, qos_abi, routing_abi, tunnel_abi)
        for name, (kind, key, value, size) in module.MAPS.items()
    },
    **{name: MapSpec(MapType[kind], None, None, size)
       for name, (kind, size) in (*upf_abi.OWN_MAPS.items(), *qos_abi.OWN_MAPS.items())},
    **{
        name: MapSpec(MapType[kind], key, value, size, table=True)
        for name, (kind, key, value, size) in rss_abi.MAPS.items()
    },
    **{name: MapSpec(PERCPU_ARRAY, c_uint32, Counter, size, table=True) for name, size in rss_abi.COUNTERS.items()},
    **{name: _nf_map(*spec, inner=INNER_MAPS.get(name))
       for name, spec in (*frer_abi.MAPS.items(), *atsss_abi.MAPS.items(), *atsss_abi.FLOW_MAPS.items(),
                          *duplicate_abi.MAPS.items())},
    # The ring of the proxy's DCCP-Acks: read by its consumer, never as a table.
    **{name: MapSpec(MapType[kind], None, None, atsss_abi.CONSTANTS[size])
       for name, (kind, size) in atsss_abi.RINGS.items()},
}
SIZABLE_MAPS = frozenset(name for name, spec in MAPS.items() if spec.sizable)
