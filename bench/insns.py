"""How many instructions a loaded XDP program executes on one packet: its instructions as the kernel
holds them after the verifier (inlined map lookups included, read back with BPF_OBJ_GET_INFO_BY_FD)
run here, in Python, on a copy of the packet and of the map entries it reads.

A count does not move with the machine's load, as a timing does: a change that takes instructions
off a path shows, whatever the noise of a run. It is not a time (a cold line or an atomic costs more
than an addition, a helper call counts one), so it stands beside the timings, not for them. The
run is checked against the kernel's: the same verdict and the same output packet, or it fails.

What it runs: ALU, jumps, loads and stores on the packet, the stack, the context (with the
ingress interface's index) and map values, global data; atomic adds; calls to other BPF functions
(counted apart: each call and return costs more than an instruction where returns are mitigated);
the helpers a downlink takes (bpf_xdp_adjust_head, bpf_xdp_adjust_tail, bpf_xdp_adjust_meta,
bpf_csum_diff, bpf_spin_lock/unlock, a hash map's lookup) and a policer's (the clocks, read here:
a reading later than the kernel's run), a redirect (its verdict returned, as a test run's is:
nothing leaves) and the array lookups the verifier inlines, bpf_get_smp_processor_id's (CPU 0) and
bpf_jiffies64's (the kernel's jiffies, read here). Anything else stops the run with its name. Maps
are read, never written: writes go to the copy; a per-CPU map is read as the first CPU's (a route
cache as a test run on that CPU left it). Helper calls are counted by name.
"""

from __future__ import annotations

import ctypes
import struct
import time
from collections import Counter
from ctypes import Structure, c_uint32, c_uint64
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional, Union

from bench.libbpf import ProgInfo, load_libbpf
from netapp.dataplane.handle import possible_cpus

MASK64 = (1 << 64) - 1
MASK32 = (1 << 32) - 1
HEADROOM = 256  # XDP_PACKET_HEADROOM: BPF_PROG_TEST_RUN's room in front of the packet
STACK = 512
MAX_STEPS = 100_000


class ProgInfoInsns(Structure):
    """struct bpf_prog_info up to xlated_prog_insns."""

    _fields_ = [*ProgInfo._fields_, ("jited_prog_insns", c_uint64), ("xlated_prog_insns", c_uint64)]


class MapInfo(Structure):
    """The head of struct bpf_map_info."""

    _fields_ = [("type", c_uint32), ("id", c_uint32), ("key_size", c_uint32), ("value_size", c_uint32),
                ("max_entries", c_uint32), ("map_flags", c_uint32)]  # fmt: skip


BPF_MAP_TYPE_HASH, BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_PERCPU_ARRAY, BPF_MAP_TYPE_ARRAY_OF_MAPS = 1, 2, 6, 12
XDP_REDIRECT = 4
# x86-64's kernel half: the one load from a kernel address the programs make is bpf_jiffies64's,
# which the verifier inlines as a load of the jiffies
KERNEL_SPACE = 0xFFFF800000000000
XDP_BUFF_RXQ = 32  # struct xdp_buff's rxq, whose dev's ifindex is the context's ingress_ifindex


def xlated_insns(prog_fd: int) -> bytes:
    """The program's instructions after the verifier, as the kernel dumps them (map ids in place of
    map addresses, helper calls as offsets from __bpf_call_base)."""
    lib = load_libbpf()
    info = ProgInfoInsns()
    size = c_uint32(ctypes.sizeof(info))
    if lib.bpf_obj_get_info_by_fd(prog_fd, ctypes.byref(info), ctypes.byref(size)):
        raise OSError(ctypes.get_errno(), "bpf_obj_get_info_by_fd")
    buffer = ctypes.create_string_buffer(info.xlated_prog_len)
    length = info.xlated_prog_len
    info = ProgInfoInsns(xlated_prog_len=length, xlated_prog_insns=ctypes.addressof(buffer))
    size = c_uint32(ctypes.sizeof(info))
    if lib.bpf_obj_get_info_by_fd(prog_fd, ctypes.byref(info), ctypes.byref(size)):
        raise OSError(ctypes.get_errno(), "bpf_obj_get_info_by_fd")
    return buffer.raw[:length]


@lru_cache(maxsize=1)
def kernel_symbols() -> dict[int, str]:
    """Address -> name of the kernel's functions (/proc/kallsyms; root reads real addresses)."""
    symbols = {}
    with open("/proc/kallsyms") as lines:
        for line in lines:
            address, kind, name = line.split()[:3]
            if kind in "tT":
                symbols[int(address, 16)] = name
    return symbols


def kernel_jiffies() -> int:
    """The kernel's jiffies now (/proc/timer_list's)."""
    with open("/proc/timer_list") as lines:
        return next(int(line.split()[1]) for line in lines if line.startswith("jiffies:"))


@lru_cache(maxsize=None)
def helper_name(imm: int) -> str:
    """The kernel function a call instruction's offset from __bpf_call_base names."""
    symbols = kernel_symbols()
    base = next(address for address, name in symbols.items() if name == "__bpf_call_base")
    return symbols.get(base + imm, f"helper at {imm:#x}")


class Region:
    """A memory the program points into: bytes, and the pointers spilled into it by offset."""

    _next_base = 1 << 44

    def __init__(self, name: str, data: bytearray):
        self.name = name
        self.data = data
        self.pointers: dict[int, object] = {}  # spilled pointers (and the context, maps) by offset
        self.base = Region._next_base  # an address of its own, for a pointer used as a number
        Region._next_base += 1 << 32

    def load(self, off: int, size: int) -> object:
        if size == 8 and off in self.pointers:
            return self.pointers[off]
        if off < 0 or off + size > len(self.data):
            raise IndexError(f"{self.name}: {size} bytes at {off}, outside its {len(self.data)}")
        return int.from_bytes(self.data[off : off + size], "little")

    def store(self, off: int, size: int, value: object) -> None:
        for at in [at for at in self.pointers if at < off + size and off < at + 8]:
            del self.pointers[at]
        if not isinstance(value, int):
            if size != 8:
                raise ValueError(f"{self.name}: a pointer stored in {size} bytes")
            self.pointers[off] = value
            return
        if off < 0 or off + size > len(self.data):
            raise IndexError(f"{self.name}: {size} bytes at {off}, outside its {len(self.data)}")
        self.data[off : off + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


@dataclass(frozen=True)
class Ptr:
    region: Region
    off: int

    def __add__(self, n: int) -> "Ptr":
        return Ptr(self.region, self.off + n)


@dataclass
class MapCopy:
    """A map the program reads, by id: its shape and its entries, copied as the program reads them."""

    id: int
    fd: int
    info: MapInfo
    regions: dict[bytes, Region] = field(default_factory=dict)

    def value(self, key: bytes) -> Optional[Region]:
        """The entry of `key` (a per-CPU map's: the first CPU's), or None."""
        if key not in self.regions:
            cpus = possible_cpus() if self.info.type == BPF_MAP_TYPE_PERCPU_ARRAY else 1
            size = (self.info.value_size + 7) // 8 * 8 * cpus
            value = ctypes.create_string_buffer(size)
            key_buffer = ctypes.create_string_buffer(key, len(key))
            if load_libbpf().bpf_map_lookup_elem(self.fd, key_buffer, value):
                return None
            self.regions[key] = Region(f"map {self.id} value", bytearray(value.raw[: self.info.value_size]))
        return self.regions[key]


class ArrayBase:
    """What an inlined array lookup adds to a map's address: the start of its values (or, per CPU,
    of its pointers to them), an element's index times its size past it."""

    def __init__(self, map_: MapCopy, per_cpu: bool):
        self.map = map_
        self.per_cpu = per_cpu


@dataclass(frozen=True)
class PerCpuValue:
    """An element of a per-CPU array as its pointer slot holds it: a per-CPU address, made this CPU's
    value by the next instruction (BPF_MOV64_PERCPU_REG)."""

    map: MapCopy
    index: int


Value = Union[int, Ptr, MapCopy, "ArrayPtr", PerCpuValue]


@dataclass(frozen=True)
class ArrayPtr:
    base: ArrayBase
    off: int


class Run:
    """One packet through the instructions; `count` the instructions executed."""

    def __init__(self, insns: bytes, packet: bytes, out_room: int, ifindex: int = 0):
        self.insns = [struct.unpack_from("<BBhi", insns, at) for at in range(0, len(insns), 8)]
        self.maps: dict[int, MapCopy] = {}
        self.packet = Region("packet", bytearray(HEADROOM + max(len(packet), out_room)))
        self.packet.data[HEADROOM : HEADROOM + len(packet)] = packet
        self.data = HEADROOM
        self.data_end = HEADROOM + len(packet)
        self.data_meta = HEADROOM
        self.ctx = object()
        self.rxq = Ingress(ifindex)
        self.count = 0
        self.calls = 0  # to other BPF functions
        self.helpers: Counter[str] = Counter()
        self.pcs: Counter[int] = Counter()  # each instruction's index, times executed

    # -- values --------------------------------------------------------------------------------
    def map_copy(self, map_id: int) -> MapCopy:
        if map_id not in self.maps:
            lib = load_libbpf()
            fd = lib.bpf_map_get_fd_by_id(map_id)
            if fd < 0:
                raise OSError(ctypes.get_errno(), f"map id {map_id}")
            info = MapInfo()
            size = c_uint32(ctypes.sizeof(info))
            if lib.bpf_obj_get_info_by_fd(fd, ctypes.byref(info), ctypes.byref(size)):
                raise OSError(ctypes.get_errno(), f"map id {map_id}: info")
            self.maps[map_id] = MapCopy(map_id, fd, info)
        return self.maps[map_id]

    def close(self) -> None:
        import os

        for map_ in self.maps.values():
            os.close(map_.fd)

    def inner_map(self, outer: MapCopy, index: int) -> Value:
        """An array of maps' slot as the inlined lookup reads it: the inner map, or 0 (NULL)."""
        inner = outer.value(struct.pack("<I", index))
        return self.map_copy(int.from_bytes(inner.data[:4], "little")) if inner else 0

    def add(self, a: Value, b: Value) -> Value:
        if isinstance(b, (Ptr, ArrayPtr, MapCopy)) and isinstance(a, int):
            a, b = b, a
        if isinstance(a, Ptr) and isinstance(b, int):
            return a + to_signed(b)
        if isinstance(a, ArrayPtr) and isinstance(b, int):
            return ArrayPtr(a.base, a.off + to_signed(b))
        if isinstance(a, MapCopy) and isinstance(b, int):
            # the inlined lookup's first step: the map's address to its values (or value pointers)
            if a.info.type not in (BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_PERCPU_ARRAY, BPF_MAP_TYPE_ARRAY_OF_MAPS):
                raise NotImplementedError(f"an inlined lookup in a map of type {a.info.type}")
            return ArrayPtr(ArrayBase(a, a.info.type == BPF_MAP_TYPE_PERCPU_ARRAY), 0)
        if isinstance(a, int) and isinstance(b, int):
            return (a + b) & MASK64
        raise TypeError(f"{a!r} + {b!r}")

    def sub(self, a: Value, b: Value) -> Value:
        if isinstance(a, Ptr) and isinstance(b, Ptr) and a.region is b.region:
            return (a.off - b.off) & MASK64
        if isinstance(a, Ptr) and isinstance(b, int):
            return a + -to_signed(b)
        if isinstance(a, int) and isinstance(b, int):
            return (a - b) & MASK64
        raise TypeError(f"{a!r} - {b!r}")

    def resolve(self, p: Value, size: int) -> tuple[Region, int]:
        if isinstance(p, Ptr):
            return p.region, p.off
        if isinstance(p, ArrayPtr) and not p.base.per_cpu:
            info = p.base.map.info
            elem = (info.value_size + 7) // 8 * 8
            index, off = divmod(p.off, elem)
            region = p.base.map.value(struct.pack("<I", index))
            if region is None:
                raise IndexError(f"map {p.base.map.id}: no element {index}")
            return region, off
        raise TypeError(f"a load or store of {size} bytes through {p!r}")

    def load(self, p: Value, off: int, size: int) -> Value:
        if p is self.ctx and off == XDP_BUFF_RXQ:
            return self.rxq
        if isinstance(p, Ingress):  # rxq->dev (its first field), then dev->ifindex
            if not p.dev and off:
                raise NotImplementedError(f"the receive queue's field at {off}")
            return p.ifindex if p.dev else Ingress(p.ifindex, dev=True)
        if p is self.ctx:  # struct xdp_buff, as the verifier rewrote the context's reads
            fields = {0: self.data, 8: self.data_end, 16: self.data_meta, 24: 0}
            if off not in fields or size != 8:
                raise NotImplementedError(f"the context's field at {off}")
            return Ptr(self.packet, fields[off]) if off != 24 else Ptr(self.packet, 0)
        if isinstance(p, int) and p >= KERNEL_SPACE and size == 8:  # bpf_jiffies64 inlined: &jiffies
            return kernel_jiffies()
        if isinstance(p, ArrayPtr) and p.base.per_cpu:
            return PerCpuValue(p.base.map, (p.off + off) // 8)
        if isinstance(p, ArrayPtr) and p.base.map.info.type == BPF_MAP_TYPE_ARRAY_OF_MAPS:
            return self.inner_map(p.base.map, (p.off + off) // 8)
        region, at = self.resolve(p, size)
        return region.load(at + off, size)

    def store(self, p: Value, off: int, size: int, value: Value) -> None:
        region, at = self.resolve(p, size)
        region.store(at + off, size, value)

    # -- helpers -------------------------------------------------------------------------------
    def helper(self, name: str, r: list) -> Value:
        self.helpers[name] += 1
        if name in ("bpf_xdp_redirect", "bpf_xdp_redirect_map"):
            return XDP_REDIRECT
        if name == "bpf_xdp_adjust_head":
            delta = to_signed32(r[2])
            if self.data + delta < 0 or self.data + delta > self.data_end:
                return -22 & MASK64
            # the metadata moves with the head (the kernel moves its bytes; none are read here)
            self.data += delta
            self.data_meta += delta
            return 0
        if name == "bpf_xdp_adjust_meta":
            self.data_meta += to_signed32(r[2])
            return 0
        if name == "bpf_xdp_adjust_tail":
            self.data_end += to_signed32(r[2])
            return 0
        if name == "bpf_csum_diff":
            return csum_diff(self, r)
        if name in ("bpf_spin_lock", "bpf_spin_unlock"):
            return 0
        if name in ("bpf_ktime_get_ns", "bpf_ktime_get_coarse_ns"):  # a policer's clock: now, here
            return time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        raise NotImplementedError(f"helper {name}")

    def hash_lookup(self, map_: MapCopy, key_ptr: Value, value_at: int) -> Value:
        region, at = self.resolve(key_ptr, map_.info.key_size)
        key = bytes(region.data[at : at + map_.info.key_size])
        value = map_.value(key)
        return 0 if value is None else Ptr(value, -value_at)

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> int:
        regs: list[Value] = [0] * 11
        regs[1] = self.ctx
        stack = Region("stack", bytearray(STACK))
        regs[10] = Ptr(stack, STACK)
        frames: list[tuple[int, list[Value]]] = []
        pc = 0
        while True:
            self.count += 1
            if self.count > MAX_STEPS:
                raise RuntimeError("no exit after {MAX_STEPS} instructions")
            self.pcs[pc] += 1
            code, regs_byte, off, imm = self.insns[pc]
            dst, src = regs_byte & 0xF, regs_byte >> 4
            cls = code & 7
            pc += 1
            if code == 0x18:  # ld_imm64
                high = self.insns[pc][3]
                pc += 1
                regs[dst] = self.map_copy(imm) if src == 1 else ((high & MASK32) << 32 | (imm & MASK32))
                if src == 2:  # a map value's address (global data): its first value, `high` bytes in
                    regs[dst] = ArrayPtr(ArrayBase(self.map_copy(imm), False), high)
                elif src not in (0, 1):
                    raise NotImplementedError(f"ld_imm64 of kind {src}")
            elif cls in (4, 7):  # ALU, ALU64
                self.alu(code, dst, src, off, imm, regs)
            elif cls in (5, 6):  # JMP, JMP32
                op = code & 0xF0
                if code == 0x85:  # call
                    if src == 1:  # another BPF function
                        frames.append((pc, regs[6:10] + [regs[10]]))
                        callee = Region("stack", bytearray(STACK))
                        regs[10] = Ptr(callee, STACK)
                        # a JITed program's dump: the offset in off (imm is the callee's number)
                        pc += off if off else imm
                        self.calls += 1
                        continue
                    name = helper_name(imm)
                    if name == "__htab_map_lookup_elem":
                        # the verifier's inlined hash lookup: call, if r0 == 0 skip, r0 += where the value is
                        if self.insns[pc][0] != 0x15 or self.insns[pc + 1][0] != 0x07:
                            raise NotImplementedError("a hash lookup the verifier did not inline")
                        value_at = self.insns[pc + 1][3]
                        regs[0] = self.hash_lookup(regs[1], regs[2], value_at)
                    else:
                        regs[0] = self.helper(name, regs)
                    regs[1:6] = [0] * 5
                elif code == 0x95:  # exit
                    if not frames:
                        return regs[0] & MASK32
                    pc, saved = frames.pop()
                    regs[6:10], regs[10] = saved[:4], saved[4]
                elif op == 0x00:  # ja
                    pc += off if cls == 5 else imm
                elif jump(op, regs[dst], regs[src] if code & 8 else imm & MASK64 if cls == 5 else imm & MASK32, cls == 6):
                    pc += off
            elif cls == 1:  # LDX
                size = {0x00: 4, 0x08: 2, 0x10: 1, 0x18: 8}[code & 0x18]
                if code & 0xE0 != 0x60:
                    raise NotImplementedError(f"load mode {code:#x}")
                regs[dst] = self.load(regs[src], off, size)
            elif cls in (2, 3):  # ST, STX
                size = {0x00: 4, 0x08: 2, 0x10: 1, 0x18: 8}[code & 0x18]
                mode = code & 0xE0
                if mode == 0xC0:  # atomic
                    self.atomic(regs, dst, src, off, size, imm)
                    continue
                value = regs[src] if cls == 3 else imm & MASK64
                self.store(regs[dst], off, size, value)
            else:
                raise NotImplementedError(f"instruction {code:#x}")

    def atomic(self, regs: list, dst: int, src: int, off: int, size: int, imm: int) -> None:
        old = self.load(regs[dst], off, size)
        if imm & ~1 == 0x00:  # BPF_ADD, with or without BPF_FETCH
            self.store(regs[dst], off, size, (old + regs[src]) & ((1 << (8 * size)) - 1))
            if imm & 1:
                regs[src] = old
        elif imm == 0xF1:  # BPF_CMPXCHG
            if old == regs[0]:
                self.store(regs[dst], off, size, regs[src])
            regs[0] = old
        else:
            raise NotImplementedError(f"atomic {imm:#x}")

    def alu(self, code: int, dst: int, src: int, off: int, imm: int, regs: list) -> None:
        wide = code & 7 == 7
        op = code & 0xF0
        b: Value = regs[src] if code & 8 else (imm & MASK64 if wide else imm & MASK32)
        a = regs[dst]
        if op == 0xB0:  # mov
            if wide and code & 8 and off == -1:  # BPF_MOV64_PERCPU_REG: this CPU's value
                value = regs[src]
                if isinstance(value, int):  # bpf_get_smp_processor_id inlined: CPU 0's number
                    regs[dst] = Ptr(Region("cpu number", bytearray(4)), 0)
                    return
                region = value.map.value(struct.pack("<I", value.index))
                regs[dst] = Ptr(region, 0) if region else 0
                return
            regs[dst] = b if wide else as_number(b) & MASK32
            return
        if op == 0xD0:  # endianness
            size = imm // 8
            value = a & ((1 << imm) - 1) if imm < 64 else a
            if code & 8:  # to big endian: a swap on this little-endian machine
                value = int.from_bytes(value.to_bytes(size, "little"), "big")
            regs[dst] = value
            return
        if not wide:  # a pointer in a 32-bit operation is a number (privileged programs may)
            a, b = as_number(a), as_number(b)
        if op == 0x00:
            result = self.add(a, b)
        elif op == 0x10:
            result = self.sub(a, b)
        elif not isinstance(a, int) or not isinstance(b, int):
            raise TypeError(f"ALU {op:#x} of {a!r} and {b!r}")
        else:
            result = arith(op, a if wide else a & MASK32, b, wide)
        if not wide:
            if not isinstance(result, int):
                raise TypeError(f"a 32-bit operation on a pointer: {a!r}")
            result &= MASK32
        regs[dst] = result


def as_number(v: object) -> int:
    if isinstance(v, Ptr):
        return (v.region.base + v.off) & MASK64
    if isinstance(v, int):
        return v
    raise TypeError(f"{v!r} used as a number")


def to_signed(v: int) -> int:
    return v - (1 << 64) if v & (1 << 63) else v


def to_signed32(v: int) -> int:
    v &= MASK32
    return v - (1 << 32) if v & (1 << 31) else v


def arith(op: int, a: int, b: int, wide: bool) -> int:
    bits = 64 if wide else 32
    mask = MASK64 if wide else MASK32
    b &= mask
    if op == 0x20:
        return a * b & mask
    if op == 0x30:
        return a // b if b else 0
    if op == 0x40:
        return a | b
    if op == 0x50:
        return a & b
    if op == 0x60:
        return a << (b & (bits - 1)) & mask
    if op == 0x70:
        return a >> (b & (bits - 1))
    if op == 0x80:
        return -a & mask
    if op == 0x90:
        return a % b if b else a
    if op == 0xA0:
        return a ^ b
    if op == 0xC0:
        signed = a - (1 << bits) if a >> (bits - 1) else a
        return (signed >> (b & (bits - 1))) & mask
    raise NotImplementedError(f"ALU op {op:#x}")


def jump(op: int, a: Value, b: Value, narrow: bool) -> bool:
    if isinstance(a, Ptr) and isinstance(b, Ptr):
        a, b = a.off, b.off
    elif not isinstance(a, int) or not isinstance(b, int):
        if op in (0x10, 0x50) and isinstance(b, int) and b == 0:  # a pointer against NULL
            return op == 0x50
        raise TypeError(f"a jump on {a!r} and {b!r}")
    bits = 32 if narrow else 64
    mask = (1 << bits) - 1
    a, b = a & mask, b & mask
    sa = a - (1 << bits) if a >> (bits - 1) else a
    sb = b - (1 << bits) if b >> (bits - 1) else b
    tests: dict[int, Callable[[], bool]] = {
        0x10: lambda: a == b, 0x20: lambda: a > b, 0x30: lambda: a >= b, 0x40: lambda: bool(a & b),
        0x50: lambda: a != b, 0x60: lambda: sa > sb, 0x70: lambda: sa >= sb, 0xA0: lambda: a < b,
        0xB0: lambda: a <= b, 0xC0: lambda: sa < sb, 0xD0: lambda: sa <= sb,
    }  # fmt: skip
    return tests[op]()


def csum_diff(run: Run, r: list) -> int:
    """bpf_csum_diff with nothing to take off: the 32-bit one's complement sum of `to` and the seed."""

    def words(p: Value, size: int) -> int:
        if not size:
            return 0
        region, at = run.resolve(p, size)
        data = region.data[at : at + size]
        return sum(int.from_bytes(data[i : i + 4], "little") for i in range(0, size, 4))

    if r[2] & MASK32:
        raise NotImplementedError("bpf_csum_diff with bytes to take off")
    total = words(r[3], r[4] & MASK32) + (r[5] & MASK32)
    while total >> 32:
        total = (total & MASK32) + (total >> 32)
    return total


@dataclass(frozen=True)
class Ingress:
    """The context's rxq (dev False) and its dev (True), through which ingress_ifindex is read."""

    ifindex: int
    dev: bool = False


@dataclass(frozen=True)
class Counted:
    verdict: int
    packet: bytes
    instructions: int
    calls: int = 0  # to other BPF functions
    helpers: dict[str, int] = field(default_factory=dict)
    pcs: dict[int, int] = field(default_factory=dict)  # instruction index (xlated) -> times executed


def count_instructions(prog_fd: int, packet: bytes, out_room: int = 512, ifindex: int = 0) -> Counted:
    """Run `packet`, received on `ifindex`, through the loaded program here: its verdict, its output
    (from the metadata on, as BPF_PROG_TEST_RUN gives it), the instructions it executed, its calls
    of other BPF functions and of helpers."""
    run = Run(xlated_insns(prog_fd), packet, out_room, ifindex)
    try:
        verdict = run.run()
    finally:
        run.close()
    # BPF_PROG_TEST_RUN's output starts at the metadata
    return Counted(verdict, bytes(run.packet.data[run.data_meta : run.data_end]), run.count, run.calls,
                   dict(run.helpers), dict(run.pcs))
