"""The flows case of bench.atsss: what a downlink frame to a UE with an ATSSS session costs the
NetApp's pipeline (dataplane/bpf/dpp.bpf.c, its entry's hand-over, then the stage nf/atsss/stage.h)
when its session has no flow rules (every session without MEC 015 flow filters; round-robin and
weighted 3:1), and when it has (DPP_ATSSS_FLOW_RULES: the stage parses the frame again, ports
included, and searches the classifier's shapes, nf/atsss/flows.h), the frame matched by an MTS
session's rule (active-standby; round-robin and weighted 3:1 with the MTS session's own scheduler
state, slot 1 of dpp_atsss_flow_state) or missing it (the session's round-robin), against the empty
program. One session and one repeated frame: the best case (every line the frame touches is hot).
The classifier holds the rule's one shape, its rule compiled by netapp.atsss.flows and written as
libdpp writes a published set. A build from before flow states reads the rule's mode alone (its arg's
low byte) and runs the matched flows on the session's state."""

from __future__ import annotations

import ipaddress
from ctypes import c_uint32, c_uint64
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from bench.atsss import gate
from bench.atsss.sessions import SessionWriter
from bench.libbpf import map_delete, map_lookup, map_update, test_run
from netapp.atsss.abi import FlowState, Mode, Path as PathValue, Session, SessionFlags, SessionKey, ue_filter_bit
from netapp.atsss.flows import session_rules
from netapp.atsss.models import SteeringMode
from netapp.dataplane.abi import Config, Prog, ShapeSet
from netapp.dataplane.convert import rule_key, rule_value, shape_to_c

# The MTS session's filter: the frame of bench.atsss's ue_frame (UDP from port 443) matches it, a
# source port one off does not (the same shape: the search is the same, its lookup misses).
MATCHED = {"protocol": 17, "sourcePort": [443]}
MISSED = {"protocol": 17, "sourcePort": [444]}
@dataclass(frozen=True)
class FlowCase:
    """The session's mode and flags, the MTS session's filter (None: no rule) and mode, and how many
    of the two paths four frames take (check)."""

    mode: Mode
    flags: int
    members: Optional[dict]
    rule_mode: SteeringMode
    paths: int


ROUND_ROBIN, WEIGHTED, ACTIVE_STANDBY = SteeringMode.ROUND_ROBIN, SteeringMode.WEIGHTED, SteeringMode.ACTIVE_STANDBY
CASES = {
    "no flow rules": FlowCase(Mode.ROUND_ROBIN, 0, None, ACTIVE_STANDBY, 2),
    "no flow rules, weighted 3:1": FlowCase(Mode.WEIGHTED, 0, None, ACTIVE_STANDBY, 2),
    "flow rules, frame matched": FlowCase(Mode.ROUND_ROBIN, SessionFlags.FLOW_RULES, MATCHED, ACTIVE_STANDBY, 1),
    "flow rules, frame missed": FlowCase(Mode.ROUND_ROBIN, SessionFlags.FLOW_RULES, MISSED, ACTIVE_STANDBY, 2),
    "flow rules, frame matched, round-robin flow": FlowCase(Mode.ACTIVE_STANDBY, SessionFlags.FLOW_RULES, MATCHED,
                                                            ROUND_ROBIN, 2),
    "flow rules, frame matched, weighted 3:1 flow": FlowCase(Mode.ACTIVE_STANDBY, SessionFlags.FLOW_RULES, MATCHED,
                                                             WEIGHTED, 2),
}
FLOW_STATE = 1  # the slot of dpp_atsss_flow_state the matched rule names


class FlowPipeline(gate.Pipeline):
    """dpp.bpf.o of `build` with ATSSS's stage in its slot of dpp_progs, the gate open, one UE's
    session over two paths (`path(1)`, `path(2)`)."""

    def __init__(self, build: Path, ue: ipaddress.IPv4Address, path: Callable[[int], PathValue]):
        super().__init__(build)
        self.ue = ue
        self._keys: list = []  # the rules written (their keys in dpp_rules)
        # a build from before flow rules has no room for their lookup: its cases are this build's alone
        self.classifies_flows = self._optional_map("dpp_atsss_flow_room") is not None
        map_update(self.obj.map_fd("dpp_progs"), c_uint32(Prog.ATSSS), c_uint32(self.obj.program_fd("dpp_atsss_stage")))
        paths_fd = self.obj.map_fd("dpp_atsss_paths")
        for slot in (1, 2):
            map_update(paths_fd, c_uint32(slot), path(slot))
        self.set_gate(True)

    def configure(self, case: FlowCase) -> None:
        """The session in the case's mode with its flags; the classifier holding the rule of its
        members (a filter of the UE's), or none."""
        key = SessionKey(family=4)
        key.addr[0] = int.from_bytes(self.ue.packed, "little")
        value = Session(mode=case.mode, n_paths=2, flags=case.flags, up=0b11)
        value.path[:2] = [1, 2]
        value.weight[:2] = [3, 1]  # weighted's (the other modes read no weight)
        writer = SessionWriter(self.obj)
        writer.put(1, key, value)
        writer.flush()
        bit = ue_filter_bit(tuple(key.addr))
        if self.ues_fd is not None:
            map_update(self.ues_fd, c_uint32(bit // 64), c_uint64(1 << (bit % 64)))
        self._rules(case.members, case.rule_mode)

    def check(self, frame: bytes, case: FlowCase) -> None:
        """Four frames through the pipeline, on as many paths as the case says (active-standby one,
        round-robin and weighted 3:1 both); RuntimeError when the case is not what it says."""
        outer_dst = slice(14 + 16, 14 + 20)
        taken = {test_run(self.prog_fd, frame, repeat=1, out_size=len(frame) + 64).data[outer_dst] for _ in range(4)}
        if len(taken) != case.paths:
            raise RuntimeError(f"{len(taken)} paths taken by four frames: the case is not what it says")

    def _rules(self, members: dict | None, mode: SteeringMode) -> None:
        """The classifier's rule of `members` in `mode` alone (the previous case's taken out), its
        flow state zeroed."""
        shapes = ShapeSet()
        for key in self._keys:
            map_delete(self.obj.map_fd("dpp_rules"), key)
        self._keys = []
        if members is not None:
            rules = session_rules("bench", str(self.ue), [{"dstIp": str(self.ue), **members}], mode, FLOW_STATE)
            states = self._optional_map("dpp_atsss_flow_state")
            if states is not None:
                map_update(states, c_uint32(FLOW_STATE), FlowState())
            for rule in rules.values():
                self._keys.append(rule_key(rule))
                map_update(self.obj.map_fd("dpp_rules"), self._keys[-1], rule_value(rule, slot=1))
                shapes.shapes[0] = shape_to_c(rule.shape, rule.priority)
                shapes.count = 1
        map_update(self.obj.map_fd("dpp_shapes"), c_uint32(0), shapes)
        config = Config()
        map_lookup(self.obj.map_fd("dpp_config"), c_uint32(0), config)
        config.shape_set, config.generation = 0, config.generation + 1
        map_update(self.obj.map_fd("dpp_config"), c_uint32(0), config)
