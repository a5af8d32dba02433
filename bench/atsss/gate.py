"""The pipeline's cases of bench.atsss: what a frame that is not ATSSS's (plain IPv4 to an address
no session has) costs the NetApp's pipeline (dataplane/bpf/dpp.bpf.c, its entry's hand-over,
nf/atsss/stage.h) with the ATSSS gate closed (no session on the node: one test of the config's
word) and open (sessions on the node: the gate's and the UE filter's reads, and a session lookup
when the destination's bit is set), against the empty program. With 10,000 sessions every
repetition goes to another address (the walk writes the destination): the filter's words, and where
a bit is set the session's hash bucket, are cold. The pipeline is loaded from its object with no rules (the frame gets the default verdict)."""

from __future__ import annotations

import ipaddress
from ctypes import c_uint32, c_uint64
from pathlib import Path
from typing import Optional

from bench.atsss.sessions import SessionWriter
from bench.harness import Walk
from bench.libbpf import BpfObject, map_lookup, map_update
from netapp.atsss.abi import UE_FILTER_WORDS, Mode, Session, SessionKey, ue_filter_bit
from netapp.dataplane.abi import Config, Function

FIRST_OTHER = ipaddress.IPv4Address("10.128.0.0")  # the walk's destinations: no session has one


class Pipeline:
    """dpp.bpf.o of `build`, loaded on its own: sessions for the UEs from `first_ue` on, the gate
    open or closed; the UE filter written when the object has one (an object built before it did
    not: it looks every frame's destination up)."""

    def __init__(self, build: Path):
        self.obj = BpfObject(build / "dpp.bpf.o")
        self.prog_fd = self.obj.program_fd("dpp_xdp")
        self.gate_fd = self.obj.map_fd("dpp_atsss_gate")
        self.config_fd = self.obj.map_fd("dpp_config")
        self.ues_fd = self._optional_map("dpp_atsss_ues")

    def _optional_map(self, name: str) -> Optional[int]:
        try:
            return self.obj.map_fd(name)
        except OSError:
            return None

    def install(self, first_ue: ipaddress.IPv4Address, sessions: int) -> None:
        """`sessions` sessions (their paths are not needed: no frame here is to one of them)."""
        words: dict[int, int] = {}
        writer = SessionWriter(self.obj)
        for i in range(sessions):
            key = SessionKey(family=4)
            key.addr[0] = int.from_bytes((first_ue + i).packed, "little")
            writer.put(i + 1, key, Session(mode=Mode.ROUND_ROBIN, n_paths=1))
            bit = ue_filter_bit(tuple(key.addr))
            words[bit // 64] = words.get(bit // 64, 0) | 1 << (bit % 64)
        if self.ues_fd is not None:
            for word in range(UE_FILTER_WORDS):
                map_update(self.ues_fd, c_uint32(word), c_uint64(words.get(word, 0)))
        writer.flush()

    def set_gate(self, open_: bool) -> None:
        """The gate, and the config's bit of ATSSS that libdpp would keep from it (a build before the
        functions' word has the slot, unread)."""
        map_update(self.gate_fd, c_uint32(0), c_uint32(1 if open_ else 0))
        config = Config()
        map_lookup(self.config_fd, c_uint32(0), config)
        config.functions = config.functions | Function.ATSSS if open_ else config.functions & ~Function.ATSSS
        map_update(self.config_fd, c_uint32(0), config)

    def close(self) -> None:
        self.obj.close()


def other_walk(flows: int, dst_at: int, other_at: int) -> Walk:
    """Destinations FIRST_OTHER + f (at dst_at), f over `flows`; the walk's second field at other_at."""
    return Walk(flows, teid_base=0, src_base=int(FIRST_OTHER), teid_off=other_at, src_off=dst_at)
