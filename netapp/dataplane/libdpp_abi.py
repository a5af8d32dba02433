"""libdpp.h's structs and callbacks as ctypes mirrors (netapp.dataplane.abi holds the BPF object's;
netapp.dataplane.binding exports both); tests/dataplane/test_abi.py checks them."""

from __future__ import annotations

from ctypes import CFUNCTYPE, POINTER, Structure, c_bool, c_char_p, c_int, c_size_t, c_uint8, c_uint32, c_uint64, c_void_p

from netapp.dataplane.abi import FlowKey, Rule, Trace


class MapSize(Structure):
    C_NAME = "dpp_map_size"
    _fields_ = [("name", c_char_p), ("max_entries", c_uint32)]


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
        ("map_sizes", POINTER(MapSize)),
        ("nr_map_sizes", c_uint32),
    ]


class UpgradeOpts(Structure):
    C_NAME = "dpp_upgrade_opts"
    _fields_ = [("sz", c_size_t), ("flow_cache", c_bool), ("trace", c_bool)]


class TestResult(Structure):
    C_NAME = "dpp_test_result"
    __test__ = False  # not a pytest test class
    _fields_ = [("verdict", c_uint32), ("duration_ns", c_uint32), ("trace", Trace)]


TABLE_TOKEN_MAX = 512  # DPP_TABLE_TOKEN_MAX


class TableCursor(Structure):
    """Where a dpp_table_dump stands: zeroed before the first call, then libdpp's own."""

    C_NAME = "dpp_table_cursor"
    _fields_ = [("state", c_uint32), ("reserved", c_uint32), ("token", c_uint8 * TABLE_TOKEN_MAX)]


class ProgDesc(Structure):
    C_NAME = "dpp_prog_desc"
    _fields_ = [("name", c_uint8 * 64), ("id", c_uint32), ("kind", c_uint32), ("slot", c_int), ("fd", c_int)]


class Word(Structure):
    """A word of a mapped array's values to store in place (dpp_words_store)."""

    C_NAME = "dpp_word"
    _fields_ = [("offset", c_uint64), ("value", c_uint64), ("width", c_uint32), ("reserved", c_uint32)]


LIBDPP_STRUCTS = (MapSize, OpenOpts, UpgradeOpts, TestResult, TableCursor, ProgDesc, Word)

# libdpp.h's callbacks: dpp_log_fn, dpp_rule_cb.
LOG_FN = CFUNCTYPE(None, c_int, c_char_p, c_void_p)
RULE_CB = CFUNCTYPE(c_int, POINTER(FlowKey), POINTER(Rule), c_void_p)
