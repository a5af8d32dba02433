"""The CPUs the NetApp steers to (steer actions and overload fallbacks): their capacity and queue."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict

from netapp.intents.fields import CpuId

# A CPU's capacity sets its meter's budget per window, capacity_pps * window / 1 s. The kernel
# counts a window's packets in DPP_METER_TAKEN_BITS (40) bits, and a receiving CPU may take a share
# of up to DPP_METER_SHARE_MAX (64) packets past what is left of the budget
# (dataplane/bpf/nf/steer/meter.h), so the count stays exact for budgets up to 2^40 - 64 packets.
# 2^32 - 1 pps, far above what one CPU can take, keeps that for windows up to 256 s (the service's
# are 1 ms); above 2^64 - 1 the binding's u64 would wrap.
MAX_CAPACITY_PPS = (1 << 32) - 1
# The kernel refuses a CPUMAP queue of more than 16384 frames (cpu_map_update_elem, since Linux
# 4.15); the service also checks the running kernel's limit, which it finds when it starts.
MAX_QUEUE_SIZE = 16384


class CpuSpec(BaseModel):
    """A CPU the NetApp may steer to."""

    model_config = ConfigDict(extra="forbid")

    cpu: CpuId
    capacity_pps: Annotated[int, Strict(), Field(ge=0, le=MAX_CAPACITY_PPS)] = Field(
        0,
        description="packets per second the meter lets through to this CPU; 0: unmetered. At most "
        "2^32 - 1: the kernel's meter counts a window's packets in 40 bits, exact up to 2^40 - 64, "
        "which this capacity keeps for meter windows up to 256 s",
    )
    queue_size: Annotated[int, Strict(), Field(ge=0, le=MAX_QUEUE_SIZE)] = Field(
        0,
        description="CPUMAP queue size in frames; 0: the library default (2048). At most 16384, "
        "the kernel's limit (a running kernel with a lower one is checked when the service starts)",
    )
    overloaded: Annotated[bool, Strict()] = False
