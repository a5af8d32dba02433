"""FRER in `netapp dataplane replay`: a node's streams from a file written into the replay's instance
(its pipeline's FRER stage then acts on every frame), and what each frame did to them, read from the
real recovery functions and sequence generators: a frame's stream is the one whose slot it changed,
its decision follows from which of the 802.1CB counters moved (the data path keeps no other record
of it), its number from its R-tag."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Callable, Optional

from pydantic import ValidationError

from netapp.dataplane.facade import Dataplane
from netapp.frer.abi import COUNTERS, RTAG_ETHERTYPE, Decision, Recovery, Role
from netapp.frer.compiler import compile_streams
from netapp.frer.dataplane import FrerDataplane
from netapp.frer.models import FrerStream, FrerStreamSpec
from netapp.intents.errors import IntentError
from netapp.intents.loader import IntentFileError, read_data

VLAN_TPIDS = (0x8100, 0x88A8)


def load_streams(path: Path) -> list[FrerStreamSpec]:
    """A streams file (JSON or YAML): a list of streams as /api/v1/frer/streams takes them, or
    {"streams": [...]}; IntentError naming the field at fault (a name given twice too)."""
    data = read_data(path)
    items = data.get("streams") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise IntentFileError.at("", 'a list of streams, or an object with "streams", a list')
    streams: list[FrerStreamSpec] = []
    for i, item in enumerate(items):
        try:
            streams.append(FrerStreamSpec.model_validate(item))
        except ValidationError as exc:
            raise IntentError.from_validation(exc, f"streams[{i}]") from None
        if streams[-1].name in [stream.name for stream in streams[:-1]]:
            raise IntentError.at(f"streams[{i}].name", f"{streams[-1].name!r} is given twice")
    return streams


def rtag_seq(frame: bytes) -> Optional[int]:
    """The sequence number of the frame's R-tag (behind up to two VLAN tags), None untagged."""
    at = 12
    for _ in range(3):
        if len(frame) < at + 2:
            return None
        (ethertype,) = struct.unpack_from("!H", frame, at)
        if ethertype == RTAG_ETHERTYPE:
            return struct.unpack_from("!H", frame, at + 4)[0] if len(frame) >= at + 6 else None
        if ethertype not in VLAN_TPIDS:
            return None
        at += 4
    return None


def decision_of(before: Recovery, after: Recovery) -> Optional[Decision]:
    """What the recovery function decided for the one frame between two reads of its slot, from the
    counters that moved; None when the frame was not its."""
    moved = {name: getattr(after, name) - getattr(before, name) for name in COUNTERS}
    if moved["passed"]:
        if moved["tagless"]:
            return Decision.TAGLESS_PASSED
        if before.take_any or moved["resets"]:
            return Decision.TAKE_ANY
        return Decision.OUT_OF_ORDER if moved["out_of_order"] else Decision.IN_ORDER
    if moved["discarded"]:
        return Decision.ROGUE if moved["rogue"] else Decision.DUPLICATE
    if moved["tagless"]:
        return Decision.TAGLESS_DISCARDED
    return None


class FrerReplay:
    """The streams of a file on the replay's instance, and each frame's effect on them."""

    def __init__(self, dataplane: Dataplane, specs: list[FrerStreamSpec], ifindex: Callable[[str], Optional[int]]):
        self._frer = FrerDataplane(dataplane)
        self._generators = dataplane.table("dpp_frer_streams")
        # The replay's node gives the handles, in the file's order, as a node does.
        streams = [FrerStream(handle=h, **spec.model_dump(exclude={"name"})) for h, spec in enumerate(specs, 1)]
        self._names = {stream.handle: spec.name for stream, spec in zip(streams, specs)}
        self._frer.install(compile_streams(streams, ifindex))
        self._recovered = [s.handle for s in streams if s.recovery is not None]
        self._generated = [s.handle for s in streams if s.generation is not None]
        self._slots = self._read_recovery()
        self._next = self._read_next()

    def _read_recovery(self) -> dict[int, Recovery]:
        return dict(zip(self._recovered, self._frer.recovery_read(self._recovered)))

    def _read_next(self) -> dict[int, int]:
        values = self._generators.lookup(self._generated)
        return {handle: value.next_seq for handle, value in zip(self._generated, values)}

    def observe(self, frame: bytes) -> Optional[dict[str, Any]]:
        """After `frame` ran: its stream, its sequence number and what was decided (None: no stream's)."""
        slots, nexts = self._read_recovery(), self._read_next()
        try:
            for handle, after in slots.items():
                decision = decision_of(self._slots[handle], after)
                if decision is not None:
                    return {"stream": self._names[handle], "seq": rtag_seq(frame), "decision": decision.name.lower()}
            for handle, after_next in nexts.items():
                if after_next != self._next[handle]:
                    return {"stream": self._names[handle], "seq": self._next[handle] % 65536, "decision": "generated"}
            return None
        finally:
            self._slots, self._next = slots, nexts

    def counters(self) -> list[dict[str, Any]]:
        """Each stream's counters now: a recovered one's 802.1CB counters, a generated one's next number."""
        rows: list[dict[str, Any]] = [
            {"stream": self._names[handle], "role": Role.RECOVER.name.lower(), **slot.counters()}
            for handle, slot in self._read_recovery().items()
        ]
        rows += [{"stream": self._names[handle], "role": Role.GENERATE.name.lower(), "next_sequence_number": next_seq}
                 for handle, next_seq in self._read_next().items()]
        return rows
