"""The only Python that knows the C ABI: libdpp loaded through ctypes, its prototypes declared.

The ABI lives in modules of its own, re-exported here so that `netapp.dataplane.binding` stays the one
import for it: the mirrors of dataplane/include/dpp/*.h and the map specs (`abi`), the conversions
between compiled rules and C structs (`convert`), errors (`errors`) and an opened instance, `DppHandle`
(`handle`). Nothing here runs at import time: the library is loaded on first use (`load_libdpp`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as errno_codes
import logging
import os
from ctypes import POINTER, c_bool, c_char_p, c_int, c_size_t, c_uint8, c_uint32, c_uint64, c_void_p
from pathlib import Path
from typing import Any, Mapping, Optional

from netapp.dataplane.abi import (  # noqa: F401 - re-exported
    ABI_ENUMS,
    ABI_STRUCTS,
    ACTION_MAX,
    Action,
    AltGroup,
    AltMember,
    CONSTANTS,
    Config,
    Counter,
    Cpu,
    CpuMeter,
    DevmapVal,
    FILTER_MAX_RULES,
    FILTER_WORDS,
    FLOW_USE_MIN_HIT_PCT,
    FLOW_USE_SAMPLE,
    FLOW_USE_WINDOW,
    FlowEntry,
    FlowKey,
    FlowUse,
    KERNEL_STRUCTS,
    KeyFlag,
    LogLevel,
    MAPS,
    MAX_ALT_GROUPS,
    MAX_ALT_MEMBERS,
    MAX_CPUS,
    MAX_FILTERS,
    MAX_FLOWS,
    MAX_GTP_EXT_HDRS,
    MAX_IPV6_EXT_HDRS,
    MAX_PORTS,
    MAX_RULES,
    MAX_SHAPES,
    MAX_VLAN_TAGS,
    METER_SHARE_DIVISOR,
    METER_SHARE_MAX,
    METER_TAKEN_BITS,
    METER_WINDOW_BITS,
    MapSpec,
    MapType,
    MeterShare,
    NONE,
    Overlay,
    PERCPU_BYTES_MAX,
    PIN_ROOT,
    PORT_GENEVE,
    PORT_GTPU,
    Prog,
    PORT_VXLAN,
    REASON_MAX,
    Reason,
    Rule,
    RuleFlag,
    SIZABLE_MAPS,
    Shape,
    ShapeSet,
    Trace,
    U32x4,
    VERDICT_MAX,
    Verdict,
    XdpMode,
    map_size_refusal,
)
from netapp.qos.abi import ClockWord
from netapp.dataplane.libdpp_abi import (  # noqa: F401 - re-exported
    LIBDPP_STRUCTS,
    LOG_FN,
    MapSize,
    OpenOpts,
    ProgDesc,
    RULE_CB,
    TABLE_TOKEN_MAX,
    TableCursor,
    TestResult,
    UpgradeOpts,
    Word,
)
from netapp.dataplane.convert import (  # noqa: F401 - re-exported
    KEY_FIELDS,
    KeyField,
    address_words,
    alt_group_to_c,
    alt_member_to_c,
    key_flags,
    key_from_c,
    prefix_mask_words,
    rule_key,
    rule_to_c,
    rule_value,
    shape_id,
    shape_mask,
    shape_to_c,
    struct_bytes,
    words_address,
)
from netapp.dataplane.errors import (  # noqa: F401 - re-exported
    DataplaneError,
    LibraryNotFoundError,
    check,
    check_batch,
)
from netapp.upf.abi import PUNT_CB
from netapp.dataplane.handle import (  # noqa: F401 - re-exported
    DppHandle,
    fdinfo,
    possible_cpus,
)

LOG = logging.getLogger("netapp.dataplane")


# Every libdpp function: name -> (restype, argtypes). Handles are opaque pointers.
PROTOTYPES: Mapping[str, tuple[Any, list[Any]]] = {
    "dpp_set_log": (None, [LOG_FN, c_void_p]),
    "dpp_kernel_check": (c_int, [c_char_p]),
    "dpp_kernel_check_settings": (c_int, [c_char_p, c_bool, c_bool]),
    "dpp_open": (c_int, [POINTER(OpenOpts), POINTER(c_void_p)]),
    "dpp_close": (None, [c_void_p]),
    "dpp_unpin": (c_int, [c_void_p]),
    "dpp_reused": (c_int, [c_void_p]),
    "dpp_clock_word_get": (c_int, [c_void_p, POINTER(ClockWord)]),
    "dpp_clock_restarted": (c_bool, [c_void_p]),
    "dpp_prog_fd": (c_int, [c_void_p]),
    "dpp_map_fd": (c_int, [c_void_p, c_char_p]),
    "dpp_upgrade": (c_int, [c_void_p, POINTER(UpgradeOpts)]),
    "dpp_programs": (c_int, [c_void_p, POINTER(ProgDesc), c_int]),
    "dpp_program_add": (c_int, [c_void_p, c_char_p]),
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
    "dpp_table_update": (
        c_int,
        [c_void_p, c_char_p, c_void_p, c_size_t, c_void_p, c_size_t, c_uint32, c_uint64, POINTER(c_uint32)],
    ),
    "dpp_table_fill": (
        c_int,
        [c_void_p, c_char_p, c_void_p, c_uint32, c_uint32, c_uint32, c_void_p, c_size_t, POINTER(c_uint32)],
    ),
    "dpp_table_lookup": (
        c_int,
        [c_void_p, c_char_p, c_void_p, c_size_t, c_void_p, c_size_t, c_uint32, POINTER(c_uint8)],
    ),
    "dpp_table_held": (c_int, [c_void_p, c_char_p, c_void_p, c_size_t, c_size_t, c_uint32, c_uint32, c_uint8]),
    "dpp_table_delete": (c_int, [c_void_p, c_char_p, c_void_p, c_size_t, c_uint32, POINTER(c_uint32)]),
    "dpp_table_dump": (
        c_int,
        [c_void_p, c_char_p, POINTER(TableCursor), c_void_p, c_size_t, c_void_p, c_size_t, c_uint32],
    ),
    "dpp_table_wait_readers": (c_int, [c_void_p]),
    "dpp_table_inner_set": (
        c_int,
        [c_void_p, c_char_p, c_uint32, c_uint32, c_uint32, c_void_p, c_size_t, c_void_p, c_size_t, c_uint32],
    ),
    "dpp_table_inner_lookup": (
        c_int,
        [c_void_p, c_char_p, c_uint32, c_void_p, c_size_t, c_void_p, c_size_t, c_uint32, POINTER(c_uint8)],
    ),
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
    # The UPF's (upf.c): netapp.upf.punts
    "dpp_upf_punts_open": (c_int, [c_void_p, PUNT_CB, c_void_p, POINTER(c_void_p)]),
    "dpp_upf_punts_poll": (c_int, [c_void_p, c_int]),
    "dpp_upf_punts_fd": (c_int, [c_void_p]),
    "dpp_upf_punts_malformed": (c_int, [c_void_p, POINTER(c_uint64)]),
    "dpp_upf_punts_close": (None, [c_void_p]),
    "dpp_upf_replay": (c_int, [c_void_p, c_void_p, c_uint32, c_uint32]),
    # dpp_upf_dl4's placement (netapp.upf.ways): no instance, arrays of the caller's
    "dpp_upf_dl4_buckets": (c_int, [c_void_p, c_void_p, c_void_p, c_uint32, c_uint32, c_void_p]),
    "dpp_upf_dl4_place": (c_int, [c_void_p, c_uint32, c_void_p, c_uint32, c_uint32, c_int, c_void_p]),
    # words of a mapped array stored in place (netapp.dataplane.tables.InPlace): no instance
    "dpp_words_store": (c_int, [c_void_p, c_size_t, c_void_p, c_uint32]),
}


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
