"""FRER's part of the data plane ABI (dataplane/include/dpp/nf/frer.h) as ctypes mirrors: its
constants, enums and the recovery function's slot, checked against the BTF of the built object by
tests/frer/test_abi.py.

Only ctypes and enum here, as the other functions' ABI modules."""

from __future__ import annotations

import enum
from ctypes import Structure, c_int64, c_uint8, c_uint16, c_uint32, c_uint64

MAX_STREAMS = 4096
RTAG_ETHERTYPE = 0xF1C1
RTAG_LEN = 6
SEQ_SPACE = 65536
HISTORY_MIN = 2
HISTORY_MAX = 32
HISTORY_DEFAULT = 2

CONSTANTS = {
    "DPP_MAX_FRER_STREAMS": MAX_STREAMS,
    "DPP_FRER_RTAG_ETHERTYPE": RTAG_ETHERTYPE,
    "DPP_FRER_RTAG_LEN": RTAG_LEN,
    "DPP_FRER_SEQ_SPACE": SEQ_SPACE,
    "DPP_FRER_HISTORY_MIN": HISTORY_MIN,
    "DPP_FRER_HISTORY_MAX": HISTORY_MAX,
    "DPP_FRER_HISTORY_DEFAULT": HISTORY_DEFAULT,
}


class Algo(enum.IntEnum):
    VECTOR = 0
    MATCH = 1


class Flags(enum.IntFlag):
    INDIVIDUAL = 1
    TAKE_NO_SEQUENCE = 2
    POP = 4
    LATENT = 8


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
        ("latent_difference", c_uint32),
        ("reset_ns", c_uint64),
        ("latent_period_ns", c_uint64),
        ("latent_reset_period_ns", c_uint64),
        ("take_any", c_uint8),
        ("span", c_uint8),
        ("seq", c_uint16),
        ("history", c_uint32),
        ("restart_ns", c_uint64),
        ("latent_test_ns", c_uint64),
        ("latent_reset_ns", c_uint64),
        ("base_difference", c_int64),
        *((name, c_uint64) for name in COUNTERS),
    ]

    def counters(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNTERS}


def _tag(cls, c_name: str, c_prefix: str):  # noqa: ANN001, ANN202
    """The C enum a mirror stands for (as the other ABI modules tag theirs)."""
    cls.C_NAME, cls.C_PREFIX, cls.C_MAX = c_name, c_prefix, None
    return cls


ENUMS = (
    _tag(Algo, "dpp_frer_algo", "DPP_FRER_ALGO_"),
    _tag(Flags, "dpp_frer_flags", "DPP_FRER_"),
    _tag(Decision, "dpp_frer_decision", "DPP_FRER_"),
)
STRUCTS = (Recovery,)
MAPS = {"dpp_frer_recovery": ("ARRAY", c_uint32, Recovery, "DPP_MAX_FRER_STREAMS")}
