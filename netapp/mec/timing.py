"""MEC 011 timing (/mec_app_support/v1/timing): the platform's current time and what it says of
its time source.

The time is the host's realtime clock. It is TRACEABLE when the kernel says the clock is
synchronised to a reference (adjtimex(2): not TIME_ERROR, and STA_UNSYNC clear -- what NTP or PTP
daemons set), NONTRACEABLE otherwise: an application must not take a free-running clock for a
disciplined one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from typing import Callable, Optional

from netapp.mec.service_models import CurrentTime, TimeSourceStatus, MecTimeStamp, TimingCaps

_TIME_ERROR = 5  # adjtimex's answer when the clock is not synchronised
_STA_UNSYNC = 0x0040


class _Timex(ctypes.Structure):
    """struct timex of <sys/timex.h> (Linux, 64-bit longs): the members read here, then padding
    to the kernel's size."""

    _fields_ = [
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("_rest", ctypes.c_byte * 256),
    ]


def kernel_clock_synchronised() -> Optional[bool]:
    """Whether the kernel calls its clock synchronised (adjtimex with no modes: a read); None when
    it cannot be asked."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        adjtimex = ctypes.CDLL(name, use_errno=True).adjtimex
    except (OSError, AttributeError):
        return None
    timex = _Timex()
    answer = adjtimex(ctypes.byref(timex))
    if answer < 0:
        return None
    return answer != _TIME_ERROR and not timex.status & _STA_UNSYNC


def current_time(
    clock_ns: Callable[[], int] = time.time_ns,
    synchronised: Callable[[], Optional[bool]] = kernel_clock_synchronised,
) -> CurrentTime:
    seconds, nanos = divmod(clock_ns(), 1_000_000_000)
    status = TimeSourceStatus.TRACEABLE if synchronised() else TimeSourceStatus.NONTRACEABLE
    return CurrentTime(seconds=seconds, nanoSeconds=nanos, timeSourceStatus=status)


def timing_caps(clock_ns: Callable[[], int] = time.time_ns) -> TimingCaps:
    seconds, nanos = divmod(clock_ns(), 1_000_000_000)
    return TimingCaps(timeStamp=MecTimeStamp(seconds=seconds, nanoSeconds=nanos))
