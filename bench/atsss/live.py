"""The downlink's live cases of bench.atsss: what a REDUNDANT packet costs with its copies made,
against a single path's. In live-frame mode (BPF_F_TEST_XDP_LIVE_FRAMES: XDP_TX and the broadcast
are carried out) a namespace's port in0 runs xdp_atsss. The kernel writes the frame into each page of
its pool once and afterwards only puts the page's pointers back: an encapsulation overwrites the
Ethernet header in front of the UE packet, so a recycled page no longer holds the frame. Every run
is therefore made of calls of LIVE_BATCH frames, one pool (of that many fresh pages) each, floor
alike, and the frames the paths sent are checked to be every frame's;
round-robin sends each packet back out of in0 (XDP_TX), REDUNDANT broadcasts it to dpp_atsss_tx's two
ports, whose copy programs encapsulate one copy each; every peer drops what it receives. The floor:
the same live frames through a program that drops them."""

from __future__ import annotations

import contextlib
import ctypes
import secrets
import socket
import statistics
from ctypes import c_uint32
from pathlib import Path
from typing import Callable, Optional

from bench.libbpf import BpfObject, inner_map_set, map_delete, map_lookup, test_run_live
from bench.throughput.sink import attach_native
from netapp.atsss.abi import MAX_PATHS_PER_SESSION, Mode, Path as PathValue
from netapp.core import netns as namespaces
from netapp.dataplane.abi import DevmapVal, MapType
from netapp.testbed import netns

PORTS = ("out0", "out1")
LIVE_BATCH = 64  # the kernel's pool for a live run: this many pages, each with the frame written once
LIVE_FRAMES = 100 * LIVE_BATCH  # per run at most: a call costs milliseconds of set-up (not timed)


class LiveSite:
    """The namespace: in0 (ingress), out0 and out1 in dpp_atsss_tx; xdp_drop on every peer."""

    def __init__(self, build: Path, atsss: BpfObject):
        self.ns = f"dppatsss-{secrets.token_hex(3)}"
        self.atsss = atsss
        self.drop: Optional[BpfObject] = None
        try:
            netns.add_namespace(self.ns)
            netns.add_ports(self.ns, ("in0", *PORTS))
            self.drop = BpfObject(build / "xdp_drop.bpf.o")
            self._configure()
        except BaseException:
            self.close()
            raise

    def _configure(self) -> None:
        assert self.drop is not None
        with namespaces.entered(self.ns):
            ports = [(c_uint32(position), DevmapVal(socket.if_nametoindex(port),
                                                    self.atsss.program_fd(f"dpp_atsss_copy_{position}")))
                     for position, port in enumerate(PORTS)]  # fmt: skip
            inner_map_set(self.atsss.map_fd("dpp_atsss_tx"), 0, MapType.DEVMAP, MAX_PATHS_PER_SESSION, ports,
                          ctypes.sizeof(c_uint32), ctypes.sizeof(DevmapVal))  # group 0: the sessions'
            for name in ("in0", *PORTS):
                attach_native(socket.if_nametoindex(f"{name}p"), self.drop.program_fd("xdp_drop"))
            self.ingress = socket.if_nametoindex("in0")

    def time(self, prog_fd: int, frame: bytes, calls: int) -> int:
        """The mean per-frame time of `calls` runs of LIVE_BATCH fresh frames."""
        with namespaces.entered(self.ns):
            total = sum(test_run_live(prog_fd, frame, LIVE_BATCH, self.ingress, LIVE_BATCH).duration_ns
                        for _ in range(calls))  # fmt: skip
        return total // calls

    def close(self) -> None:
        netns.delete_namespace(self.ns)
        with contextlib.suppress(OSError):  # the group the setup did not get to
            map_delete(self.atsss.map_fd("dpp_atsss_tx"), c_uint32(0))
        if self.drop is not None:
            self.drop.close()


LIVE_MODES = {"round-robin, live (XDP_TX)": Mode.ROUND_ROBIN, "redundant, live (2 copies)": Mode.REDUNDANT}


def sent(atsss: BpfObject, slot: int) -> int:
    """Packets the path in `slot` sent (its entry's counter)."""
    value = PathValue()
    map_lookup(atsss.map_fd("dpp_atsss_paths"), c_uint32(slot), value)
    return value.packets


def live_rows(site: LiveSite, prog_fd: int, frame: bytes, configure: Callable[[Mode], None], runs: int,
              repeat: int) -> list[dict]:
    """Per mode: the median of `runs` live runs against the live floor, taken alternately. The
    first session's two paths (slots 1 and 2) must have sent what the mode says."""
    assert site.drop is not None
    rows = []
    calls = max(1, min(repeat, LIVE_FRAMES) // LIVE_BATCH)
    for name, mode in LIVE_MODES.items():
        configure(mode)
        floor, case = [], []
        before = sent(site.atsss, 1) + sent(site.atsss, 2)
        for _ in range(runs):
            floor.append(site.time(site.drop.program_fd("xdp_drop"), frame, calls))
            case.append(site.time(prog_fd, frame, calls))
        copies = 2 if mode == Mode.REDUNDANT else 1
        if sent(site.atsss, 1) + sent(site.atsss, 2) - before != copies * runs * calls * LIVE_BATCH:
            raise RuntimeError(f"{name}: the paths did not send {copies} per frame: the case is not what it says")
        row = {"scheduler": name, "sessions": 1, "live_floor_ns": statistics.median(floor),
               "downlink_ns": statistics.median(case)}  # fmt: skip
        row["above_floor_ns"] = row["downlink_ns"] - row["live_floor_ns"]
        print(f"{name:<32}      1 session   floor {row['live_floor_ns']:6.1f}  downlink {row['downlink_ns']:6.1f}  "
              f"above floor {row['above_floor_ns']:+6.1f} ns", flush=True)
        rows.append(row)
    return rows
