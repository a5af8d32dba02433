"""The only Python that knows the C ABI: ctypes mirrors of dataplane/include/dpp/*.h and libdpp calls.

Mirrors keep the C names (`C_NAME`, `C_PREFIX`) so tests/dataplane/test_abi.py can check every struct
and enum against the BTF of the built BPF object. Nothing here runs at import time: the library is
loaded on first use (`load_libdpp`).

Byte order: key numbers are host order; addresses stay in network order, i.e. each __u32 word of
src/dst/addr holds 4 address bytes as they appear on the wire.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import errno as errno_codes
import ipaddress
import logging
import os
import sys
import zlib
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    byref,
    c_bool,
    c_char_p,
    c_int,
    c_size_t,
    c_uint8,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy

from netapp.intents.compiler import CompiledAltMember, CompiledRule, RuleShape

LOG = logging.getLogger("netapp.dataplane")

# --- dpp_consts.h --------------------------------------------------------------------------------

MAX_RULES = 65536
MAX_FLOWS = 65536
MAX_SHAPES = 16
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

# libdpp.h
PIN_ROOT = "/sys/fs/bpf/dpp"

# Header constant name -> value, for the ABI test (it reads the header's #defines).
CONSTANTS = {
    "DPP_MAX_RULES": MAX_RULES,
    "DPP_MAX_FLOWS": MAX_FLOWS,
    "DPP_MAX_SHAPES": MAX_SHAPES,
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
}


def _c_enum(c_name: str, c_prefix: str, has_max: bool = False) -> Callable[[Any], Any]:
    """Tag an enum with the C enum it mirrors. has_max: the C enum ends with a PREFIX_MAX count."""

    def tag(cls: Any) -> Any:
        cls.C_NAME = c_name
        cls.C_PREFIX = c_prefix
        cls.C_HAS_MAX = has_max
        return cls

    return tag


@_c_enum("dpp_action", "DPP_ACTION_", has_max=True)
class Action(enum.IntEnum):
    PASS = 0
    DROP = 1
    STEER = 2
    FORWARD = 3
    REDIRECT = 4
    DEFAULT = 5  # never installed: the packet got the configured default verdict


@_c_enum("dpp_verdict", "DPP_VERDICT_", has_max=True)
class Verdict(enum.IntEnum):
    ABORTED = 0
    DROP = 1
    PASS = 2
    TX = 3
    REDIRECT = 4


@_c_enum("dpp_reason", "DPP_REASON_", has_max=True)
class Reason(enum.IntEnum):
    NONE = 0
    TRUNC_ETH = 1
    TRUNC_VLAN = 2
    VLAN_DEPTH = 3
    TRUNC_IPV4 = 4
    BAD_IPV4 = 5
    TRUNC_IPV6 = 6
    BAD_IPV6 = 7
    IPV6_EXT_DEPTH = 8
    TRUNC_L4 = 9
    TRUNC_VXLAN = 10
    TRUNC_GENEVE = 11
    BAD_GENEVE = 12
    TRUNC_GRE = 13
    BAD_GRE = 14
    TRUNC_GTP = 15
    BAD_GTP = 16
    GTP_EXT_DEPTH = 17
    GTP_SIGNALLING = 18
    NOT_IP = 19
    CPU_UNAVAILABLE = 20
    CPU_OVERLOADED = 21
    NO_ALTERNATIVE = 22
    PORT_UNAVAILABLE = 23


@_c_enum("dpp_overlay", "DPP_OVERLAY_")
class Overlay(enum.IntEnum):
    NONE = 0
    VXLAN = 1
    GENEVE = 2
    GRE = 3


@_c_enum("dpp_rule_flags", "DPP_RULE_")
class RuleFlag(enum.IntFlag):
    BEST_EFFORT = 1


@_c_enum("dpp_key_flags", "DPP_KEY_")
class KeyFlag(enum.IntFlag):
    GTP = 1
    GTP_QFI = 2
    GTP_UL = 4
    FRAGMENT = 8
    VNI = 16


@_c_enum("dpp_xdp_mode", "DPP_XDP_MODE_")
class XdpMode(enum.IntEnum):
    NATIVE = 0
    GENERIC = 1
    OFFLOAD = 2


@_c_enum("dpp_prog", "DPP_PROG_", has_max=True)
class Prog(enum.IntEnum):  # slots of dpp_progs: the programs the XDP entry tail-calls
    TRACE = 0


@_c_enum("dpp_log_level", "DPP_LOG_")
class LogLevel(enum.IntEnum):
    """libdpp.h (not in the BPF object's BTF)."""

    WARN = 0
    INFO = 1
    DEBUG = 2


ACTION_MAX = len(Action)
VERDICT_MAX = len(Verdict)
REASON_MAX = len(Reason)

# Enums of dpp_consts.h, which the BPF object's BTF carries.
ABI_ENUMS = (Action, Verdict, Reason, Overlay, RuleFlag, KeyFlag, XdpMode, Prog)


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
        ("shape", c_uint32),
    ]


class Rule(Structure):
    C_NAME = "dpp_rule"
    _fields_ = [
        ("slot", c_uint32),
        ("priority", c_uint16),
        ("action", c_uint8),
        ("flags", c_uint8),
        ("target", c_uint32),  # STEER: the CPU; REDIRECT: the egress ifindex
        ("alt_group", c_uint32),
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
    ]


# Structs of dpp_structs.h, which the BPF object's BTF carries.
ABI_STRUCTS = (
    FlowKey,
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
)


# --- libdpp.h ------------------------------------------------------------------------------------


class OpenOpts(Structure):
    C_NAME = "dpp_open_opts"
    _fields_ = [
        ("sz", c_size_t),
        ("instance", c_char_p),
        ("max_rules", c_uint32),
        ("max_flows", c_uint32),
        ("flow_cache", c_bool),
        ("trace", c_bool),
        ("default_verdict", c_uint32),
        ("meter_window_ns", c_uint64),
    ]


class UpgradeOpts(Structure):
    C_NAME = "dpp_upgrade_opts"
    _fields_ = [("sz", c_size_t), ("flow_cache", c_bool), ("trace", c_bool)]


class TestResult(Structure):
    C_NAME = "dpp_test_result"
    __test__ = False  # not a pytest test class
    _fields_ = [("verdict", c_uint32), ("duration_ns", c_uint32), ("trace", Trace)]


class ProgDesc(Structure):
    C_NAME = "dpp_prog_desc"
    _fields_ = [("name", c_uint8 * 64), ("id", c_uint32), ("kind", c_uint32), ("slot", c_int), ("fd", c_int)]


LIBDPP_STRUCTS = (OpenOpts, UpgradeOpts, TestResult, ProgDesc)


@dataclass(frozen=True)
class MapSpec:
    """A map of bpf/core/maps.h or a bpf/nf/<function>/maps.h: its key and value mirrors (None: a
    kernel type) and its size constant."""

    key: Any
    value: Any
    max_entries: Union[int, str]  # a number, or the name of a dpp_consts.h constant
    per_cpu: bool = False


# Map names are declared once, here (libdpp opens and pins them by these names).
MAPS: Mapping[str, MapSpec] = {
    "dpp_rules": MapSpec(FlowKey, Rule, "DPP_MAX_RULES"),
    "dpp_shapes": MapSpec(c_uint32, ShapeSet, 2),
    "dpp_config": MapSpec(c_uint32, Config, 1),
    # A row of flow cache slots per possible CPU in a plain array (core/maps.h).
    "dpp_flows": MapSpec(c_uint32, FlowEntry, "DPP_MAX_FLOWS"),
    "dpp_flow_use": MapSpec(c_uint32, FlowUse, 1, per_cpu=True),
    "dpp_cpus": MapSpec(c_uint32, Cpu, "DPP_MAX_CPUS"),
    "dpp_cpu_meters": MapSpec(c_uint32, CpuMeter, "DPP_MAX_CPUS"),
    "dpp_meter_shares": MapSpec(c_uint32, MeterShare, "DPP_MAX_CPUS", per_cpu=True),
    "dpp_cpu_map": MapSpec(c_uint32, None, "DPP_MAX_CPUS"),
    "dpp_ports": MapSpec(c_uint32, None, "DPP_MAX_PORTS"),
    "dpp_alt_groups": MapSpec(c_uint32, AltGroup, "DPP_MAX_ALT_GROUPS"),
    # A row of rule slots per possible CPU in a plain array (core/maps.h), read through libdpp.
    "dpp_rule_stats": MapSpec(c_uint32, Counter, "DPP_MAX_RULES"),
    "dpp_verdicts": MapSpec(c_uint32, Counter, VERDICT_MAX, per_cpu=True),
    "dpp_actions": MapSpec(c_uint32, Counter, ACTION_MAX, per_cpu=True),
    "dpp_reasons": MapSpec(c_uint32, Counter, REASON_MAX, per_cpu=True),
    "dpp_cpu_stats": MapSpec(c_uint32, Counter, "DPP_MAX_CPUS", per_cpu=True),
    "dpp_trace": MapSpec(c_uint32, Trace, 1),
    "dpp_filters": MapSpec(c_uint32, None, MAX_FILTERS * FILTER_WORDS),
    "dpp_progs": MapSpec(c_uint32, None, len(Prog)),  # tail-call slots: a program's id when read
    "dpp_handover": MapSpec(c_uint32, Trace, 1, per_cpu=True),
    "dpp_prog_stats": MapSpec(c_uint32, Counter, len(Prog), per_cpu=True),
}

LOG_FN = CFUNCTYPE(None, c_int, c_char_p, c_void_p)
RULE_CB = CFUNCTYPE(c_int, POINTER(FlowKey), POINTER(Rule), c_void_p)

# Every libdpp function: name -> (restype, argtypes). Handles are opaque pointers.
PROTOTYPES: Mapping[str, tuple[Any, list[Any]]] = {
    "dpp_set_log": (None, [LOG_FN, c_void_p]),
    "dpp_open": (c_int, [POINTER(OpenOpts), POINTER(c_void_p)]),
    "dpp_close": (None, [c_void_p]),
    "dpp_unpin": (c_int, [c_void_p]),
    "dpp_reused": (c_int, [c_void_p]),
    "dpp_prog_fd": (c_int, [c_void_p]),
    "dpp_map_fd": (c_int, [c_void_p, c_char_p]),
    "dpp_upgrade": (c_int, [c_void_p, POINTER(UpgradeOpts)]),
    "dpp_programs": (c_int, [c_void_p, POINTER(ProgDesc), c_int]),
    "dpp_attach": (c_int, [c_void_p, c_int, c_int]),
    "dpp_detach": (c_int, [c_void_p, c_int]),
    "dpp_attached": (c_int, [c_void_p, POINTER(c_int), c_int]),
    "dpp_rules_upsert": (c_int, [c_void_p, POINTER(FlowKey), POINTER(Rule), c_uint32, POINTER(c_uint32)]),
    "dpp_rules_delete": (c_int, [c_void_p, POINTER(FlowKey), c_uint32, POINTER(c_uint32)]),
    "dpp_rules_foreach": (c_int, [c_void_p, RULE_CB, c_void_p]),
    "dpp_shapes_publish": (c_int, [c_void_p, POINTER(Shape), c_uint32]),
    "dpp_shapes_get": (c_int, [c_void_p, POINTER(ShapeSet)]),
    "dpp_config_get": (c_int, [c_void_p, POINTER(Config)]),
    "dpp_config_set": (c_int, [c_void_p, POINTER(Config)]),
    "dpp_cpu_enable": (c_int, [c_void_p, c_uint32, c_uint32, c_uint64]),
    "dpp_cpu_disable": (c_int, [c_void_p, c_uint32]),
    "dpp_cpu_set_overloaded": (c_int, [c_void_p, c_uint32, c_bool]),
    "dpp_cpu_get": (c_int, [c_void_p, c_uint32, POINTER(Cpu)]),
    "dpp_cpumap_qsize_max": (c_int, [POINTER(c_uint32)]),
    "dpp_port_add": (c_int, [c_void_p, c_int]),
    "dpp_port_remove": (c_int, [c_void_p, c_int]),
    "dpp_alt_group_set": (c_int, [c_void_p, c_uint32, POINTER(AltGroup)]),
    "dpp_alt_group_clear": (c_int, [c_void_p, c_uint32]),
    "dpp_stats_rules": (c_int, [c_void_p, c_uint32, c_uint32, POINTER(Counter)]),
    "dpp_stats_verdicts": (c_int, [c_void_p, POINTER(Counter)]),
    "dpp_stats_actions": (c_int, [c_void_p, POINTER(Counter)]),
    "dpp_stats_reasons": (c_int, [c_void_p, POINTER(Counter)]),
    "dpp_stats_cpus": (c_int, [c_void_p, POINTER(Counter), c_uint32]),
    "dpp_stats_rules_clear": (c_int, [c_void_p, c_uint32, c_uint32]),
    "dpp_test_run": (
        c_int,
        [c_void_p, c_void_p, c_uint32, c_uint32, c_void_p, POINTER(c_uint32), POINTER(TestResult)],
    ),
}


# --- Errors --------------------------------------------------------------------------------------


class DataplaneError(Exception):
    """A libdpp call failed: `errno` (positive), the operation, and what it means."""

    def __init__(self, errno: int, op: str, message: Optional[str] = None, hint: str = ""):
        self.errno = errno
        self.op = op
        self.message = message or os.strerror(errno)
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        name = errno_codes.errorcode.get(self.errno, str(self.errno))
        text = f"{self.op}: {self.message} ({name})"
        return f"{text}; {self.hint}" if self.hint else text


class LibraryNotFoundError(DataplaneError):
    """libdpp.so could not be found or loaded."""


def check(rc: int, op: str, hint: str = "") -> int:
    """Turn libdpp's negative-errno convention into DataplaneError; return rc otherwise."""
    if rc < 0:
        raise DataplaneError(-rc, op, hint=hint)
    return rc


# --- Loading libdpp ------------------------------------------------------------------------------

LIBDPP_ENV = "DPP_LIBDPP"
_PY_LOG_LEVELS = {LogLevel.WARN: logging.WARNING, LogLevel.INFO: logging.INFO, LogLevel.DEBUG: logging.DEBUG}


# Where a wheel carries libdpp and the BPF objects it ships (setup.py copies them from dataplane/build).
PACKAGED_LIB_DIR = Path(__file__).resolve().parent / "lib"
# What libdpp.so links that the system provides: soname -> the Debian/Ubuntu package holding it.
SYSTEM_LIBRARIES = {"libbpf.so.1": "libbpf1", "libelf.so.1": "libelf1"}


def repo_libdpp_path() -> Path:
    """Where `make -C dataplane` puts the library, relative to this package in a source checkout."""
    return Path(__file__).resolve().parents[2] / "dataplane" / "build" / "libdpp.so"


def packaged_libdpp_path() -> Path:
    """Where an installed wheel holds the library (absent in a checkout and an editable install)."""
    return PACKAGED_LIB_DIR / "libdpp.so"


def find_libdpp() -> str:
    """$DPP_LIBDPP when set (an explicit choice wins), else the library the installed wheel carries,
    else the checkout's dataplane/build/libdpp.so, else the system's libdpp."""
    explicit = os.environ.get(LIBDPP_ENV)
    if explicit:
        if not Path(explicit).is_file():
            raise LibraryNotFoundError(
                errno_codes.ENOENT,
                "find libdpp",
                f"{LIBDPP_ENV}={explicit} does not exist",
                hint=f"unset {LIBDPP_ENV} after `make -C dataplane`, or point it at a built libdpp.so",
            )
        return explicit
    built = repo_libdpp_path()
    for candidate in (packaged_libdpp_path(), built):
        if candidate.is_file():
            return str(candidate)
    system = ctypes.util.find_library("dpp")
    if system:
        return system
    raise LibraryNotFoundError(
        errno_codes.ENOENT,
        "find libdpp",
        f"libdpp.so not found (not in {PACKAGED_LIB_DIR}, not at {built}, not on the library path)",
        hint=f"run `make -C dataplane` or set {LIBDPP_ENV}",
    )


class SystemLibraryMissing(LibraryNotFoundError):
    """A shared library libdpp links cannot be loaded: one line naming it and the package to install."""

    def __init__(self, soname: str, package: str):
        self.soname = soname
        self.package = package
        super().__init__(
            errno_codes.ELIBACC, "load libdpp", f"libdpp needs {soname}", hint=f"apt-get install {package}"
        )

    def __str__(self) -> str:
        return (
            f"libdpp needs {self.soname} (Debian/Ubuntu package {self.package}): not found; "
            f"apt-get install {self.package}"
        )


def check_system_libraries(libraries: Optional[Mapping[str, str]] = None) -> None:
    """Raise SystemLibraryMissing for the first library of SYSTEM_LIBRARIES the loader cannot load."""
    for soname, package in (SYSTEM_LIBRARIES if libraries is None else libraries).items():
        try:
            ctypes.CDLL(soname)
        except OSError:
            raise SystemLibraryMissing(soname, package) from None


def _forward_log(level: int, message: Optional[bytes], _ctx: Optional[int]) -> None:
    """libdpp's log callback: into logging. Must never raise (ctypes would only print it)."""
    try:
        text = message.decode(errors="replace").rstrip() if message else ""
        LOG.log(_PY_LOG_LEVELS.get(level, logging.DEBUG), "%s", text)
    except Exception:  # noqa: BLE001 - a callback from C has nobody to raise to
        pass


class Libdpp:
    """The loaded library with its prototypes declared and its log routed to `netapp.dataplane`."""

    def __init__(self, path: str):
        self.path = path
        check_system_libraries()
        try:
            self.cdll = ctypes.CDLL(path)
        except OSError as exc:
            raise LibraryNotFoundError(
                errno_codes.ELIBBAD, "load libdpp", f"{path}: {exc}", hint="rebuild with `make -C dataplane`"
            ) from None
        self._declare_prototypes()
        # The CFUNCTYPE object must outlive every call libdpp makes through it.
        self._log_callback = LOG_FN(_forward_log)
        self.cdll.dpp_set_log(self._log_callback, None)

    def _declare_prototypes(self) -> None:
        for name, (restype, argtypes) in PROTOTYPES.items():
            try:
                function = getattr(self.cdll, name)
            except AttributeError:
                raise LibraryNotFoundError(
                    errno_codes.ELIBBAD,
                    "load libdpp",
                    f"{self.path} has no {name}",
                    hint="rebuild with `make -C dataplane`",
                ) from None
            function.restype = restype
            function.argtypes = argtypes

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cdll, name)


_LOADED: dict[str, Libdpp] = {}


def load_libdpp(path: Optional[str] = None) -> Libdpp:
    """Load (once per path) and return libdpp."""
    path = path or find_libdpp()
    if path not in _LOADED:
        _LOADED[path] = Libdpp(path)
    return _LOADED[path]


# --- An opened instance --------------------------------------------------------------------------


class DppHandle:
    """One opened libdpp instance: every libdpp call with Python types, errors as DataplaneError.

    This is the low-level adapter `netapp.dataplane.facade.Dataplane` drives; `FakeDpp` in
    netapp.dataplane.fake implements the same methods without a kernel.
    """

    def __init__(self, lib: Libdpp, handle: c_void_p):
        self.lib = lib
        self._handle = handle

    @classmethod
    def open(
        cls,
        lib: Libdpp,
        instance: Optional[str] = None,
        *,
        max_rules: int = 0,
        max_flows: int = 0,
        flow_cache: bool = True,
        trace: bool = False,
        default_verdict: int = Verdict.PASS,
        meter_window_ns: int = 0,
    ) -> "DppHandle":
        opts = OpenOpts(
            sz=ctypes.sizeof(OpenOpts),
            instance=instance.encode() if instance else None,
            max_rules=max_rules,
            max_flows=max_flows,
            flow_cache=flow_cache,
            trace=trace,
            default_verdict=int(default_verdict),
            meter_window_ns=meter_window_ns,
        )
        handle = c_void_p()
        check(lib.dpp_open(byref(opts), byref(handle)), "dpp_open", hint=_open_hint())
        return cls(lib, handle)

    def close(self) -> None:
        if self._handle:
            self.lib.dpp_close(self._handle)
            self._handle = c_void_p()

    @property
    def is_open(self) -> bool:
        return bool(self._handle)

    def unpin(self) -> None:
        check(self.lib.dpp_unpin(self._handle), "dpp_unpin")

    def reused(self) -> bool:
        return check(self.lib.dpp_reused(self._handle), "dpp_reused") == 1

    def prog_fd(self) -> int:
        return check(self.lib.dpp_prog_fd(self._handle), "dpp_prog_fd")

    def map_fd(self, name: str) -> int:
        if name not in MAPS:
            raise KeyError(f"unknown map {name!r}; known: {', '.join(MAPS)}")
        return check(self.lib.dpp_map_fd(self._handle, name.encode()), f"dpp_map_fd({name})")

    def prog_id(self) -> int:
        """The kernel's id of the loaded program (what `bpftool prog show id` takes)."""
        return int(fdinfo(self.prog_fd())["prog_id"])

    def programs(self) -> list[dict[str, Any]]:
        """The XDP entry, then the programs it tail-calls: name, id, kind and dpp_progs slot."""
        found = (ProgDesc * check(self.lib.dpp_programs(self._handle, None, 0), "dpp_programs"))()
        check(self.lib.dpp_programs(self._handle, found, len(found)), "dpp_programs")
        slots = {slot.value: slot.name.lower() for slot in Prog}  # a newer object's: its number
        kinds = ("xdp", "tail")  # enum dpp_prog_kind
        return [
            {
                "name": bytes(p.name).rstrip(b"\0").decode(),
                "id": p.id,
                "kind": kinds[p.kind],
                "slot": None if p.slot < 0 else slots.get(p.slot, str(p.slot)),
            }
            for p in found
        ]

    def map_info(self, name: str) -> dict[str, int]:
        """A map's kernel id and max_entries."""
        info = fdinfo(self.map_fd(name))
        return {"id": int(info["map_id"]), "max_entries": int(info["max_entries"])}

    def upgrade(self, *, flow_cache: bool = True, trace: bool = False) -> None:
        """Replace the program with the one this libdpp carries; maps and links stay."""
        opts = UpgradeOpts(sz=ctypes.sizeof(UpgradeOpts), flow_cache=flow_cache, trace=trace)
        check(self.lib.dpp_upgrade(self._handle, byref(opts)), "dpp_upgrade")

    def attach(self, ifindex: int, mode: XdpMode) -> None:
        check(self.lib.dpp_attach(self._handle, ifindex, int(mode)), f"dpp_attach(ifindex {ifindex})")

    def detach(self, ifindex: int) -> None:
        check(self.lib.dpp_detach(self._handle, ifindex), f"dpp_detach(ifindex {ifindex})")

    def attached(self, max_count: int = 256) -> list[int]:
        found = (c_int * max_count)()
        count = check(self.lib.dpp_attached(self._handle, found, max_count), "dpp_attached")
        return list(found[: min(count, max_count)])

    def rules_upsert(self, keys: Sequence[FlowKey], rules: Sequence[Rule]) -> None:
        if not keys:
            return
        done = c_uint32(0)
        rc = self.lib.dpp_rules_upsert(
            self._handle, _array(FlowKey, keys), _array(Rule, rules), len(keys), byref(done)
        )
        _check_batch(rc, "dpp_rules_upsert", done.value, len(keys))

    def rules_delete(self, keys: Sequence[FlowKey]) -> None:
        if not keys:
            return
        done = c_uint32(0)
        rc = self.lib.dpp_rules_delete(self._handle, _array(FlowKey, keys), len(keys), byref(done))
        _check_batch(rc, "dpp_rules_delete", done.value, len(keys))

    def rules_dump(self) -> list[tuple[FlowKey, Rule]]:
        """Copies of every installed (key, rule)."""
        found: list[tuple[FlowKey, Rule]] = []

        def collect(key: Any, rule: Any, _ctx: Any) -> int:
            found.append((FlowKey.from_buffer_copy(key.contents), Rule.from_buffer_copy(rule.contents)))
            return 0

        callback = RULE_CB(collect)
        check(self.lib.dpp_rules_foreach(self._handle, callback, None), "dpp_rules_foreach")
        return found

    def shapes_publish(self, shapes: Sequence[Shape]) -> None:
        check(
            self.lib.dpp_shapes_publish(self._handle, _array(Shape, shapes), len(shapes)),
            "dpp_shapes_publish",
        )

    def shapes_get(self) -> ShapeSet:
        out = ShapeSet()
        check(self.lib.dpp_shapes_get(self._handle, byref(out)), "dpp_shapes_get")
        return out

    def config_get(self) -> Config:
        out = Config()
        check(self.lib.dpp_config_get(self._handle, byref(out)), "dpp_config_get")
        return out

    def config_set(self, config: Config) -> None:
        check(self.lib.dpp_config_set(self._handle, byref(config)), "dpp_config_set")

    def cpu_enable(self, cpu: int, queue_size: int = 0, capacity_pps: int = 0) -> None:
        check(
            self.lib.dpp_cpu_enable(self._handle, cpu, queue_size, capacity_pps), f"dpp_cpu_enable(cpu {cpu})"
        )

    def cpu_disable(self, cpu: int) -> None:
        check(self.lib.dpp_cpu_disable(self._handle, cpu), f"dpp_cpu_disable(cpu {cpu})")

    def cpu_set_overloaded(self, cpu: int, overloaded: bool) -> None:
        check(
            self.lib.dpp_cpu_set_overloaded(self._handle, cpu, overloaded),
            f"dpp_cpu_set_overloaded(cpu {cpu})",
        )

    def cpu_get(self, cpu: int) -> Cpu:
        out = Cpu()
        check(self.lib.dpp_cpu_get(self._handle, cpu, byref(out)), f"dpp_cpu_get(cpu {cpu})")
        return out

    def cpumap_qsize_max(self) -> int:
        """The largest CPUMAP queue the running kernel takes (probed on a throwaway map)."""
        out = c_uint32()
        check(self.lib.dpp_cpumap_qsize_max(byref(out)), "dpp_cpumap_qsize_max")
        return out.value

    def port_add(self, ifindex: int) -> None:
        check(self.lib.dpp_port_add(self._handle, ifindex), f"dpp_port_add(ifindex {ifindex})")

    def port_remove(self, ifindex: int) -> None:
        check(self.lib.dpp_port_remove(self._handle, ifindex), f"dpp_port_remove(ifindex {ifindex})")

    def alt_group_set(self, group: int, value: AltGroup) -> None:
        check(
            self.lib.dpp_alt_group_set(self._handle, group, byref(value)), f"dpp_alt_group_set(group {group})"
        )

    def alt_group_clear(self, group: int) -> None:
        check(self.lib.dpp_alt_group_clear(self._handle, group), f"dpp_alt_group_clear(group {group})")

    def stats_rules(self, first: int, count: int) -> list[tuple[int, int]]:
        if count <= 0:
            return []
        out = (Counter * count)()
        check(self.lib.dpp_stats_rules(self._handle, first, count, out), "dpp_stats_rules")
        return [(counter.packets, counter.bytes) for counter in out]

    def stats_rules_array(self, first: int, count: int) -> numpy.ndarray:
        """The same counters as stats_rules, as a (count, 2) uint64 array [packets, bytes]: read
        straight into the array, so a million rules cost no Python object each."""
        out = numpy.zeros((max(count, 0), 2), dtype=numpy.uint64)
        if count > 0:
            buffer = out.ctypes.data_as(POINTER(Counter))
            check(self.lib.dpp_stats_rules(self._handle, first, count, buffer), "dpp_stats_rules")
        return out

    def stats_rules_clear(self, first: int, count: int) -> None:
        check(self.lib.dpp_stats_rules_clear(self._handle, first, count), "dpp_stats_rules_clear")

    def stats_verdicts(self) -> list[tuple[int, int]]:
        return self._stats_table(self.lib.dpp_stats_verdicts, VERDICT_MAX, "dpp_stats_verdicts")

    def stats_actions(self) -> list[tuple[int, int]]:
        return self._stats_table(self.lib.dpp_stats_actions, ACTION_MAX, "dpp_stats_actions")

    def stats_reasons(self) -> list[tuple[int, int]]:
        return self._stats_table(self.lib.dpp_stats_reasons, REASON_MAX, "dpp_stats_reasons")

    def stats_cpus(self, count: int = MAX_CPUS) -> list[tuple[int, int]]:
        """(packets, bytes) STEER handed to each of CPUs [0, count)."""
        out = (Counter * count)()
        check(self.lib.dpp_stats_cpus(self._handle, out, count), "dpp_stats_cpus")
        return [(counter.packets, counter.bytes) for counter in out]

    def _stats_table(self, function: Any, size: int, op: str) -> list[tuple[int, int]]:
        out = (Counter * size)()
        check(function(self._handle, out), op)
        return [(counter.packets, counter.bytes) for counter in out]

    def test_run(
        self, packet: bytes, ingress_ifindex: int = 0, headroom: int = 512
    ) -> tuple[TestResult, bytes]:
        """Run one packet through the program; the output buffer leaves room for encapsulation."""
        capacity = len(packet) + headroom
        out = ctypes.create_string_buffer(capacity)
        out_len = c_uint32(capacity)
        result = TestResult()
        rc = self.lib.dpp_test_run(
            self._handle, packet, len(packet), ingress_ifindex, out, byref(out_len), byref(result)
        )
        check(rc, "dpp_test_run", hint="BPF_PROG_TEST_RUN needs root" if rc == -errno_codes.EPERM else "")
        return result, out.raw[: out_len.value]


def possible_cpus(path: str = "/sys/devices/system/cpu/possible") -> int:
    """How many CPUs the kernel may ever bring up (what libbpf counts per-CPU values by): one more
    than the highest in a list like "0-3,6"."""
    with open(path) as listing:
        ranges = listing.read().strip().split(",")
    return 1 + max(int(part.split("-")[-1]) for part in ranges)


def fdinfo(fd: int) -> dict[str, str]:
    """The kernel's description of an fd (/proc/self/fdinfo): for BPF objects, their ids and sizes."""
    with open(f"/proc/self/fdinfo/{fd}") as lines:
        fields = (line.split(":", 1) for line in lines if ":" in line)
        return {name.strip(): value.strip() for name, value in fields}


def _open_hint() -> str:
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "loading BPF programs needs root (or CAP_BPF and CAP_NET_ADMIN)"
    return ""


def _array(ctype: Any, items: Sequence[Any]) -> Any:
    """items as a C array of ctype; an existing one is passed as is (no per-element copy)."""
    if isinstance(items, ctypes.Array) and items._type_ is ctype:
        return items
    return (ctype * len(items))(*items)


def _check_batch(rc: int, op: str, done: int, total: int) -> None:
    if rc < 0:
        error = DataplaneError(-rc, op, f"{os.strerror(-rc)} after {done} of {total}")
        error.done = done  # type: ignore[attr-defined]
        raise error


# --- Conversions between the compiler's vocabulary and the ABI -----------------------------------


@dataclass(frozen=True)
class KeyField:
    """Where a compiler key field lives in struct dpp_flow_key and how wide its mask is.

    `bit` set: the field is that single bit of the member (a flag), compared for 0 or 1.
    `prefix`: the field is an address whose mask comes from the shape's prefix length.
    """

    member: str
    width: int
    bit: int = 0
    prefix: bool = False

    @property
    def full_mask(self) -> int:
        return self.bit if self.bit else (1 << self.width) - 1


# The one per-field table: compiler field -> key member and mask width.
KEY_FIELDS: Mapping[str, KeyField] = {
    "interface": KeyField("ifindex", 32),
    "vlan": KeyField("vlan", 12),
    "overlay": KeyField("overlay", 8),
    "vni": KeyField("vni", 32),
    "has_vni": KeyField("flags", 1, bit=KeyFlag.VNI),
    "gtp": KeyField("flags", 1, bit=KeyFlag.GTP),
    "gtp_qfi": KeyField("flags", 1, bit=KeyFlag.GTP_QFI),
    "teid": KeyField("teid", 32),
    "qfi": KeyField("qfi", 6),
    "family": KeyField("family", 8),
    "protocol": KeyField("proto", 8),
    "fragment": KeyField("flags", 1, bit=KeyFlag.FRAGMENT),
    "src_port": KeyField("sport", 16),
    "dst_port": KeyField("dport", 16),
    "dscp": KeyField("dscp", 6),
    "src": KeyField("src", 128, prefix=True),
    "dst": KeyField("dst", 128, prefix=True),
}


def address_words(address: Union[ipaddress.IPv4Address, ipaddress.IPv6Address, bytes]) -> list[int]:
    """Four __u32 words holding an address in network order (IPv4 in word 0)."""
    packed = address if isinstance(address, bytes) else address.packed
    packed = packed.ljust(16, b"\0")
    return [int.from_bytes(packed[i : i + 4], sys.byteorder) for i in range(0, 16, 4)]


def words_address(words: Sequence[int], family: int) -> Union[ipaddress.IPv4Address, ipaddress.IPv6Address]:
    packed = b"".join(int(word).to_bytes(4, sys.byteorder) for word in words)
    return ipaddress.IPv4Address(packed[:4]) if family == 4 else ipaddress.IPv6Address(packed)


def prefix_mask_words(length: int, family: int) -> list[int]:
    """Mask words of a prefix length: the first `length` bits of the family's address."""
    total = 32 if family == 4 else 128
    mask = ((1 << length) - 1) << (total - length)
    return address_words(mask.to_bytes(total // 8, "big"))


def _numeric_value(field: str, value: Any) -> int:
    if field == "overlay":
        return Overlay[str(value).upper()]
    return int(value)


def shape_id(shape: RuleShape) -> int:
    """The stable id of a shape: what its rules' keys and its mask carry in .shape.

    Derived from the mask alone, so a shape keeps its id wherever it sits in the shape set and
    across restarts: a rule key written for a new set can never meet a packet masked by an
    unrelated shape of the old one. Never 0, which is what a packet's own key holds.
    """
    return zlib.crc32(bytes(_compared_bits(shape))) or 1


def _compared_bits(shape: RuleShape) -> FlowKey:
    mask = FlowKey()
    for field in shape.fields:
        spec = KEY_FIELDS[field]
        if spec.prefix:
            length = shape.src_len if field == "src" else shape.dst_len
            setattr(mask, spec.member, U32x4(*prefix_mask_words(length, shape.family)))
        else:
            setattr(mask, spec.member, getattr(mask, spec.member) | spec.full_mask)
    return mask


def shape_mask(shape: RuleShape) -> FlowKey:
    """The key mask of a shape: all ones over every compared field (prefix bits for src/dst), and
    the shape's id in .shape, which the classifier copies into the masked key."""
    mask = _compared_bits(shape)
    mask.shape = shape_id(shape)
    return mask


def shape_to_c(shape: RuleShape, max_priority: int) -> Shape:
    return Shape(mask=shape_mask(shape), max_priority=max_priority)


def rule_key(rule: CompiledRule) -> FlowKey:
    """The masked key a matching packet has, with .shape set."""
    key = FlowKey()
    for field, value in rule.values.items():
        spec = KEY_FIELDS[field]
        if spec.prefix:
            setattr(key, spec.member, U32x4(*address_words(value.network_address)))
        elif spec.bit:
            if value:
                setattr(key, spec.member, getattr(key, spec.member) | spec.bit)
        else:
            setattr(key, spec.member, _numeric_value(field, value) & spec.full_mask)
    key.shape = shape_id(rule.shape)
    return key


def _rule_target(rule: CompiledRule) -> int:
    """struct dpp_rule.target: the steering CPU or the redirect's egress interface, else NONE."""
    if rule.cpu is not None:
        return rule.cpu
    if rule.redirect_ifindex:
        return rule.redirect_ifindex
    return NONE


def rule_value(rule: CompiledRule, slot: int = 0) -> Rule:
    return Rule(
        slot=slot,
        priority=rule.priority,
        action=Action[rule.action.upper()],
        flags=RuleFlag.BEST_EFFORT if rule.best_effort else 0,
        target=_rule_target(rule),
        alt_group=rule.alt_group if rule.alt_group is not None else NONE,
    )


def rule_to_c(rule: CompiledRule, slot: int = 0) -> tuple[FlowKey, Rule]:
    """A compiled rule as the (key, value) of dpp_rules."""
    return rule_key(rule), rule_value(rule, slot)


def _mac_bytes(mac: Optional[str]) -> Any:
    raw = bytes.fromhex(mac.replace(":", "")) if mac else bytes(6)
    return (c_uint8 * 6)(*raw)


def alt_member_to_c(member: CompiledAltMember) -> AltMember:
    return AltMember(
        dmac=_mac_bytes(member.mac),
        smac=_mac_bytes(member.source_mac),
        ifindex=member.ifindex,
        has_ip4=1 if member.ip4 is not None else 0,
        addr4=address_words(member.ip4)[0] if member.ip4 is not None else 0,
        has_ip6=1 if member.ip6 is not None else 0,
        addr6=U32x4(*address_words(member.ip6)) if member.ip6 is not None else U32x4(),
    )


def alt_group_to_c(members: Sequence[CompiledAltMember]) -> AltGroup:
    if not 0 < len(members) <= MAX_ALT_MEMBERS:
        raise ValueError(f"an alternative group has 1..{MAX_ALT_MEMBERS} members, got {len(members)}")
    group = AltGroup(count=len(members))
    for index, member in enumerate(members):
        group.members[index] = alt_member_to_c(member)
    return group


def key_flags(flags: int) -> list[str]:
    return [flag.name.lower() for flag in KeyFlag if flags & flag]


def key_from_c(key: FlowKey) -> dict[str, Any]:
    """A packet's (or a rule's) key, readable: addresses as ipaddress objects, names for enums."""
    family = key.family
    has_ip = family in (4, 6)
    return {
        "ifindex": key.ifindex,
        "vlan": key.vlan,
        "overlay": _enum_name(Overlay, key.overlay) if key.overlay else None,
        "vni": key.vni,
        "teid": key.teid,
        "qfi": key.qfi,
        "flags": key_flags(key.flags),
        "family": family,
        "protocol": key.proto,
        "dscp": key.dscp,
        "src_port": key.sport,
        "dst_port": key.dport,
        "src": words_address(key.src, family) if has_ip else None,
        "dst": words_address(key.dst, family) if has_ip else None,
        "shape": key.shape,
    }


def _enum_name(enum_type: Any, value: int) -> str:
    try:
        return enum_type(value).name.lower()
    except ValueError:
        return f"unknown({value})"


def struct_bytes(value: Structure) -> bytes:
    """The exact bytes of a struct (what the kernel hashes a key by)."""
    return bytes(value)
