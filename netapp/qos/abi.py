"""The QoS function's part of the data plane ABI (dataplane/include/dpp/nf/qos.h) as ctypes mirrors:
its constants, enums, structs and maps. netapp.dataplane.abi joins them to the core's, so that
tests/dataplane/test_abi.py checks them against the BTF of the built object like every other.

Only ctypes, enum and netapp.dataplane.cenum here: netapp.dataplane.abi imports this module while it is
being built.
"""

from __future__ import annotations

import enum
from ctypes import Structure, c_uint8, c_uint32, c_uint64

from netapp.dataplane.cenum import c_enum

MAX_POLICERS = 65536
MAX_RULE_POLICE = 65536  # rule slots dpp_rule_policers holds
RATE_MIN = 8_000  # bit/s
RATE_MAX = 400_000_000_000
BURST_MAX = 1 << 30  # bytes
WINDOW_SHIFT_MIN = 10  # a window of 2**shift ns
WINDOW_SHIFT_MAX = 32
WINDOW_BYTES_MAX = 1 << 30  # the most a window lets through
DEPTH = 2  # a policer and its parent: a parent's parent is refused
CHUNK_MAX = 1 << 20  # the most a CPU carves at a time for its credit, bytes
POLICER_STATS_SIZE = 64  # a CPU's share of a policer (PolicerStats): a cache line of dpp_policer_stats
GCRA_TAT_SHIFT = 6  # GCRA's arrival time in 2**-6 ns
GCRA_INTERVAL_SHIFT = 20  # a byte's time in 2**-(6 + 20) ns
REASON_BASE_QOS = 96
CLOCK_PERIOD_NS = 250_000  # the coarse clock's timer re-arms itself this often (nf/qos/clock.h)
CLOCK_START_KEEP = 1  # dpp_clock_start's frame's first byte: a running timer is left as it is
CLOCK_START_RESTARTED = 3  # dpp_clock_start's verdict when asked to keep and no timer ran: started (XDP_TX)

CONSTANTS = {
    "DPP_MAX_POLICERS": MAX_POLICERS,
    "DPP_MAX_RULE_POLICE": MAX_RULE_POLICE,
    "DPP_POLICE_RATE_MIN": RATE_MIN,
    "DPP_POLICE_RATE_MAX": RATE_MAX,
    "DPP_POLICE_BURST_MAX": BURST_MAX,
    "DPP_POLICE_WINDOW_SHIFT_MIN": WINDOW_SHIFT_MIN,
    "DPP_POLICE_WINDOW_SHIFT_MAX": WINDOW_SHIFT_MAX,
    "DPP_POLICE_WINDOW_BYTES_MAX": WINDOW_BYTES_MAX,
    "DPP_POLICE_DEPTH": DEPTH,
    "DPP_POLICE_CHUNK_MAX": CHUNK_MAX,
    "DPP_POLICER_STATS_SIZE": POLICER_STATS_SIZE,
    "DPP_POLICE_GCRA_TAT_SHIFT": GCRA_TAT_SHIFT,
    "DPP_POLICE_GCRA_INTERVAL_SHIFT": GCRA_INTERVAL_SHIFT,
    "DPP_REASON_BASE_QOS": REASON_BASE_QOS,
    "DPP_CLOCK_PERIOD_NS": CLOCK_PERIOD_NS,
    "DPP_CLOCK_START_KEEP": CLOCK_START_KEEP,
    "DPP_CLOCK_START_RESTARTED": CLOCK_START_RESTARTED,
}


class Algo(enum.IntEnum):
    NONE = 0
    TOKEN_BUCKET = 1
    FIXED_WINDOW = 2
    SLIDING_WINDOW = 3
    GCRA = 4


class Clock(enum.IntEnum):
    PRECISE = 0
    COARSE = 1


class Gate(enum.IntEnum):
    OPEN = 0
    CLOSED = 1


class SpinLock(Structure):
    C_NAME = "bpf_spin_lock"
    _fields_ = [("val", c_uint32)]


class Policer(Structure):
    C_NAME = "dpp_policer"
    _fields_ = [
        ("rate", c_uint64),
        ("burst", c_uint32),
        ("algo", c_uint8),
        ("gate", c_uint8),
        ("window_shift", c_uint8),
        ("clock", c_uint8),  # Clock: the clock it decides on
        ("lock", SpinLock),
        ("parent", c_uint32),  # the policer a packet this one passes goes through next; 0: none
        ("credit", c_uint64),  # token bucket: nanobits (1 byte = 8e9)
        ("last_ns", c_uint64),
        ("window", c_uint64),  # windows: number << 32 | adjacent << 31 | bytes; GCRA: arrival time, 1/64 ns
        ("previous", c_uint64),  # sliding window: the window before's; buckets on the coarse clock: the tick, ns
        ("interval", c_uint64),  # GCRA: a byte's time, 2**-26 ns; windows on the coarse clock: the tick, ns
    ]


class PolicerStats(Structure):
    """One CPU's share of a policer: a cache line of dpp_policer_stats' row of that CPU."""
    C_NAME = "dpp_policer_stats"
    _fields_ = [
        ("credit", c_uint32),  # bytes this CPU may still pass on its own
        ("chunk", c_uint32),  # bytes it carves at a time from the bucket or window; 0: none
        ("passed_packets", c_uint64),
        ("passed_bytes", c_uint64),
        ("dropped_packets", c_uint64),
        ("dropped_bytes", c_uint64),
        ("short_credit", c_uint64),  # ~ the room below the packet this CPU's bucket last dropped, or that its
        # window had when it dropped (0: none)
        ("stamp", c_uint64),  # buckets: the ns (| 2^62) or, ticked, the jiffies up to which that holds (0: none);
        # windows: the jiffies their credit holds to
        ("credit_window", c_uint64),  # windows: the window (clock >> window_shift) the credit was carved in
    ]


class Timer(Structure):
    """struct bpf_timer: the kernel's, opaque (its members have no names)."""
    _fields_ = [("opaque", c_uint64 * 2)]


class ClockTimer(Structure):
    """dpp_clock's one value: the timer that keeps the coarse policers' clock word. Never written
    from here: a write of the value cancels the timer."""
    C_NAME = "dpp_clock"
    _fields_ = [("timer", Timer)]


class ClockWord(Structure):
    """The coarse policers' clock (its own section, .data.clock): the time the timer last read and
    the jiffies it read just before (0: never)."""
    C_NAME = "dpp_clock_word"
    _fields_ = [
        ("ns", c_uint64),
        ("jiffies", c_uint64),
    ]


# PolicerStats' counters (the rest is the CPU's credit and its chunk)
COUNTERS = ("passed_packets", "passed_bytes", "dropped_packets", "dropped_bytes")


class RulePolice(Structure):
    C_NAME = "dpp_rule_police"
    _fields_ = [
        ("policer", c_uint32),  # the rule's own; 0: none
        ("shared", c_uint32),  # the one it shares (its slice's); 0: none
    ]


ENUMS = (c_enum("dpp_police_algo", "DPP_POLICE_ALGO_")(Algo), c_enum("dpp_police_gate", "DPP_POLICE_GATE_")(Gate),
         c_enum("dpp_police_clock", "DPP_POLICE_CLOCK_")(Clock))
STRUCTS = (Policer, PolicerStats, RulePolice, ClockTimer, ClockWord)
KERNEL_STRUCTS = (SpinLock,)

# name -> (map type name, key, value, size): netapp.dataplane.abi makes them MapSpecs.
MAPS = {
    "dpp_policers": ("ARRAY", c_uint32, Policer, "DPP_MAX_POLICERS"),
    "dpp_policer_stats": ("ARRAY", c_uint32, PolicerStats, "DPP_MAX_POLICERS"),
    "dpp_rule_policers": ("ARRAY", c_uint32, RulePolice, "DPP_MAX_RULE_POLICE"),
}
# The maps that are no tables (a write of dpp_clock's value would cancel its timer): name -> (type
# name, size).
OWN_MAPS = {"dpp_clock": ("ARRAY", 1)}
# A row of dpp_policers' slots per possible CPU: libdpp sizes it after dpp_policers.
ROWS = frozenset({"dpp_policer_stats"})
# The others are capacities, chosen at load (libdpp's list in maps.c).
SIZABLE = frozenset(MAPS) - ROWS
