"""The receiving ends' counters: dataplane/bpf/xdp_count.bpf.o attached natively to a veth, counting
frames and bytes per flow (GTP-U TEID - base) on every CPU, then dropping them.

Counters are only read, never reset: a trial takes a snapshot before and after (no race with
frames still arriving, and no write to a map the program is updating).
"""

from __future__ import annotations

import ctypes
import ipaddress
import socket
from ctypes import c_int, c_uint32, c_void_p
from dataclasses import dataclass
from pathlib import Path

from bench.libbpf import BpfObject, load_libbpf, map_lookup, map_update
from netapp.testbed import netns

MAX_FLOWS = 256  # COUNT_MAX_FLOWS of xdp_count.bpf.c; slot MAX_FLOWS counts frames of no known flow
OTHER = MAX_FLOWS
TEID_BASE, TEID_MASK, UE_BASE = range(3)  # enum count_config_slot of xdp_count.bpf.c
XDP_FLAGS_DRV_MODE = 1 << 2


def possible_cpus() -> int:
    """Slots of a per-CPU map value: one per possible CPU (the kernel's cpu_possible_mask)."""
    text = Path("/sys/devices/system/cpu/possible").read_text().strip()
    return max(int(part.split("-")[-1]) for part in text.split(",")) + 1


def attach_native(ifindex: int, prog_fd: int) -> None:
    """Attach `prog_fd` in native (driver) mode to `ifindex` of the calling thread's namespace."""
    lib = load_libbpf()
    lib.bpf_xdp_attach.restype = c_int
    lib.bpf_xdp_attach.argtypes = [c_int, c_int, c_uint32, c_void_p]
    rc = lib.bpf_xdp_attach(ifindex, prog_fd, XDP_FLAGS_DRV_MODE, None)
    if rc < 0:
        raise OSError(-rc, f"bpf_xdp_attach(ifindex {ifindex}, native)")


@dataclass(frozen=True)
class FlowCounts:
    """Frames and bytes per flow slot (index = TEID - base), and frames of no known flow."""

    packets: tuple[int, ...]
    bytes: tuple[int, ...]
    other: int

    def __sub__(self, before: FlowCounts) -> FlowCounts:
        return FlowCounts(
            tuple(a - b for a, b in zip(self.packets, before.packets)),
            tuple(a - b for a, b in zip(self.bytes, before.bytes)),
            self.other - before.other,
        )


class Sink:
    """A counting sink on `ifname` in namespace `ns` for `flows` flows from TEID `teid_base` on.
    `teid_mask` keeps the TEID bits that tell flows apart (0: all); with `ue_base` (an IPv4
    address), decapsulated UE packets count too, as flow (source address - ue_base)."""

    def __init__(
        self, obj_path: Path, ns: str, ifname: str, teid_base: int, flows: int, teid_mask: int = 0,
        ue_base: str | None = None,
    ):  # fmt: skip
        self.flows = flows
        self.cpus = possible_cpus()
        self.obj = BpfObject(obj_path)
        try:
            config = self.obj.map_fd("count_config")
            ue = int(ipaddress.IPv4Address(ue_base)) if ue_base else 0
            for slot, value in ((TEID_BASE, teid_base), (TEID_MASK, teid_mask), (UE_BASE, ue)):
                map_update(config, c_uint32(slot), c_uint32(value))
            self._counts_fd = self.obj.map_fd("count_flows")
            with netns.entered(ns):
                attach_native(socket.if_nametoindex(ifname), self.obj.program_fd("xdp_count"))
        except OSError:
            self.obj.close()
            raise

    def _slot(self, slot: int) -> tuple[int, int]:
        values = (ctypes.c_uint64 * (2 * self.cpus))()
        map_lookup(self._counts_fd, c_uint32(slot), values)
        return sum(values[0::2]), sum(values[1::2])

    def read(self) -> FlowCounts:
        slots = [self._slot(slot) for slot in range(self.flows)]
        return FlowCounts(tuple(p for p, _ in slots), tuple(b for _, b in slots), self._slot(OTHER)[0])

    def close(self) -> None:
        """Unloads the maps' handle; the program stays attached until its interface goes."""
        self.obj.close()


class CpumapCounter:
    """dataplane/bpf/cpumap_drops.bpf.o on the xdp_cpumap_enqueue tracepoint: per target CPU, the
    frames CPUMAP queues took and those they dropped (every CPUMAP of the machine)."""

    def __init__(self, obj_path: Path, cpus: int):
        self.cpus = possible_cpus()
        self.targets = cpus
        self.obj = BpfObject(obj_path)
        lib = load_libbpf()
        for name, restype, argtypes in (
            ("bpf_object__find_program_by_name", c_void_p, [c_void_p, ctypes.c_char_p]),
            ("bpf_program__attach", c_void_p, [c_void_p]),
            ("bpf_link__destroy", c_int, [c_void_p]),
        ):
            getattr(lib, name).restype, getattr(lib, name).argtypes = restype, argtypes
        prog = lib.bpf_object__find_program_by_name(self.obj._obj, b"count_cpumap_enqueue")
        self._link = lib.bpf_program__attach(prog) if prog else None
        if not self._link:
            self.obj.close()
            raise OSError(ctypes.get_errno(), "attaching count_cpumap_enqueue to xdp_cpumap_enqueue")
        self._fd = self.obj.map_fd("cpumap_counts")

    def read(self) -> dict[str, list[int]]:
        """{"processed": per target CPU, "dropped": per target CPU}."""
        processed, dropped = [], []
        for cpu in range(self.targets):
            values = (ctypes.c_uint64 * (2 * self.cpus))()
            map_lookup(self._fd, c_uint32(cpu), values)
            processed.append(sum(values[0::2]))
            dropped.append(sum(values[1::2]))
        return {"processed": processed, "dropped": dropped}

    def close(self) -> None:
        if self._link:
            load_libbpf().bpf_link__destroy(self._link)
            self._link = None
        self.obj.close()
