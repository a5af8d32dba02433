"""What the REST API shows of a policer (read-only): what it polices (a UPF session's QER and
direction, or a tenant's intent or slice), its configuration as written, the state the data path
keeps (dataplane/bpf/nf/qos/police.h says how it reads) and its counters, every CPU's added up,
since the policer was last written (a change of its QER, police option or MBR writes it afresh)."""

from __future__ import annotations

from typing import Literal, Optional, Protocol

from pydantic import BaseModel, Field

from netapp.qos.abi import COUNTERS, GCRA_TAT_SHIFT, Algo, Clock, Gate, Policer, PolicerStats
from netapp.qos.applier import NANOBITS_PER_BYTE

WINDOW_BYTES = (1 << 31) - 1  # the low bits of a window word: its bytes (police.h's packing)


class PolicerReader(Protocol):
    """Where policers are read from: netapp.qos.applier.PolicerApplier over an instance's tables."""

    def state(self, policer_id: int) -> Policer: ...

    def counters(self, policer_id: int) -> PolicerStats: ...


class PolicerCounters(BaseModel):
    """What the policer let through and what it dropped, packets and bytes (the UE packets' IP bytes)."""

    passed_packets: int
    passed_bytes: int
    dropped_packets: int
    dropped_bytes: int


class PolicerState(BaseModel):
    """What the data path keeps of the policer now; the fields of its algorithm, null for the others."""

    credit_bytes: Optional[int] = Field(None, description="token bucket: the bytes in the bucket when last_ns was")
    last_ns: Optional[int] = Field(None, description="token bucket: the clock (ns, CLOCK_MONOTONIC) of its last packet")
    window_start_ns: Optional[int] = Field(
        None, description="windows: the start of the current window on the clock (its low 32 bits of window number)")
    window_bytes: Optional[int] = Field(None, description="windows: the bytes the current window let through")
    previous_window_bytes: Optional[int] = Field(
        None, description="sliding window: the bytes the window before let through")
    full_at_ns: Optional[int] = Field(
        None, description="gcra: the clock (ns, CLOCK_MONOTONIC) at which its bucket is full again, rounded down")


class PolicerRecord(BaseModel):
    """A policer: what it polices, its configuration, its state and its counters."""

    id: int = Field(description="its slot of dpp_policers")
    seid: Optional[int] = Field(None, description="the UPF session whose QER it enforces (decimal)")
    qer_id: Optional[int] = Field(None, description="that QER")
    tenant: Optional[str] = Field(None, description="the tenant whose intent or slice it polices")
    intent_id: Optional[str] = Field(None, description="the intent whose police option it enforces")
    slice_id: Optional[str] = Field(
        None, description="the slice whose MBR it enforces, for all the slice's intents together")
    direction: Optional[Literal["uplink", "downlink"]] = Field(
        None, description="a QER's direction; null for an intent's (it matches one) and a slice's (both)")
    rate_bps: int = Field(description="the rate it lets through, bit/s (a QER's MBR x 1000, a slice's likewise)")
    burst_bytes: int
    algorithm: Literal["none", "token_bucket", "fixed_window", "sliding_window", "gcra"] = Field(
        description="none: the slot is empty (what it polices passes unpoliced)")
    gate: Literal["open", "closed"] = Field(description="closed: every packet dropped")
    parent: Optional[int] = Field(
        None, description="the policer a packet this one passes goes through next (a flow's MBR, then its session's "
        "AMBR); null: none")
    window_ns: Optional[int] = Field(None, description="windows: a window's length")
    clock: Literal["precise", "coarse"] = Field(
        description="the clock it decides on, chosen when it is written: coarse (the kernel's tick-stepped clock, "
        "cheaper) where the burst holds two ticks' refill and a packet (token bucket, gcra) or a window lasts 32 "
        "ticks (windows), precise otherwise")
    state: PolicerState
    counters: PolicerCounters


def policer_record(reader: PolicerReader, policer_id: int, direction: Optional[Literal["uplink", "downlink"]] = None,
                   seid: Optional[int] = None, qer_id: Optional[int] = None, **owner: Optional[str]) -> PolicerRecord:
    """The policer as the data path holds it now; `owner`: tenant and intent_id or slice_id."""
    value, counts = reader.state(policer_id), reader.counters(policer_id)
    algo = Algo(value.algo)
    windowed = algo in (Algo.FIXED_WINDOW, Algo.SLIDING_WINDOW)
    state = PolicerState()
    if algo == Algo.TOKEN_BUCKET:
        state = PolicerState(credit_bytes=value.credit // NANOBITS_PER_BYTE, last_ns=value.last_ns)
    elif algo == Algo.GCRA:
        state = PolicerState(full_at_ns=value.window >> GCRA_TAT_SHIFT)
    elif windowed:
        state = PolicerState(window_start_ns=(value.window >> 32) << value.window_shift,
                             window_bytes=value.window & WINDOW_BYTES,
                             previous_window_bytes=value.previous & WINDOW_BYTES if algo == Algo.SLIDING_WINDOW else None)
    return PolicerRecord(
        id=policer_id, seid=seid, qer_id=qer_id, direction=direction, rate_bps=value.rate,
        # the bucket's and the CPUs' chunks (netapp.qos.applier); a window's carves are in the window
        burst_bytes=value.burst + (0 if windowed else counts.chunk),
        **owner,
        algorithm=algo.name.lower(), gate=Gate(value.gate).name.lower(), parent=value.parent or None,
        window_ns=1 << value.window_shift if windowed else None, clock=Clock(value.clock).name.lower(), state=state,
        counters=PolicerCounters(**{name: getattr(counts, name) for name in COUNTERS}),
    )
