"""The few libbpf calls the benchmarks need, through ctypes: load an object, find its programs and
maps, read and write a map slot, and BPF_PROG_TEST_RUN a program with repeat.

libbpf 1.x returns negative errno values (and NULL plus errno for pointers); every failure here
becomes an OSError naming the call, so a benchmark never measures a program that did not load.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from ctypes import POINTER, Structure, c_char_p, c_int, c_size_t, c_uint32, c_uint64, c_void_p
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from netapp.dataplane.libbpf import TestRunOpts

LIBBPF_SONAME = "libbpf.so.1"
BPF_ANY = 0


# name -> (restype, argtypes) of every libbpf function used here.
_PROTOTYPES = {
    "bpf_object__open_file": (c_void_p, [c_char_p, c_void_p]),
    "bpf_object__load": (c_int, [c_void_p]),
    "bpf_object__close": (None, [c_void_p]),
    "bpf_object__find_program_by_name": (c_void_p, [c_void_p, c_char_p]),
    "bpf_program__fd": (c_int, [c_void_p]),
    "bpf_object__find_map_fd_by_name": (c_int, [c_void_p, c_char_p]),
    "bpf_object__find_map_by_name": (c_void_p, [c_void_p, c_char_p]),
    "bpf_map__type": (c_int, [c_void_p]),
    "bpf_map__key_size": (c_uint32, [c_void_p]),
    "bpf_map__value_size": (c_uint32, [c_void_p]),
    "bpf_map__set_max_entries": (c_int, [c_void_p, c_uint32]),
    "bpf_map_lookup_elem": (c_int, [c_int, c_void_p, c_void_p]),
    "bpf_map_lookup_elem_flags": (c_int, [c_int, c_void_p, c_void_p, c_uint64]),
    "bpf_map_update_elem": (c_int, [c_int, c_void_p, c_void_p, c_uint64]),
    "bpf_map_update_batch": (c_int, [c_int, c_void_p, c_void_p, POINTER(c_uint32), c_void_p]),
    "bpf_map_delete_elem": (c_int, [c_int, c_void_p]),
    "bpf_map_get_next_key": (c_int, [c_int, c_void_p, c_void_p]),
    "bpf_prog_test_run_opts": (c_int, [c_int, POINTER(TestRunOpts)]),
    "bpf_map_create": (c_int, [c_int, c_char_p, c_uint32, c_uint32, c_uint32, c_void_p]),
    "bpf_map_get_fd_by_id": (c_int, [c_uint32]),
    "bpf_obj_get_info_by_fd": (c_int, [c_int, c_void_p, POINTER(c_uint32)]),
    "bpf_object__next_program": (c_void_p, [c_void_p, c_void_p]),
    "bpf_program__name": (c_char_p, [c_void_p]),
    "bpf_program__autoload": (ctypes.c_bool, [c_void_p]),
    "bpf_program__set_log_level": (c_int, [c_void_p, c_uint32]),
    "bpf_program__set_log_buf": (c_int, [c_void_p, c_char_p, c_size_t]),
    "bpf_map__initial_value": (c_void_p, [c_void_p, POINTER(c_size_t)]),
}


@lru_cache(maxsize=None)
def load_libbpf() -> ctypes.CDLL:
    """libbpf.so.1 with its prototypes declared (the same instance libdpp.so links against)."""
    name = ctypes.util.find_library("bpf") or LIBBPF_SONAME
    lib = ctypes.CDLL(name, use_errno=True)
    for function, (restype, argtypes) in _PROTOTYPES.items():
        symbol = getattr(lib, function)
        symbol.restype = restype
        symbol.argtypes = argtypes
    return lib


def _check(rc: int, call: str) -> int:
    if rc < 0:
        raise OSError(-rc, f"{call}: {os.strerror(-rc)}")
    return rc


class BpfObject:
    """One BPF object file, opened and loaded; closing it unloads its programs and maps."""

    def __init__(self, path: Path, max_entries: Optional[dict[str, int]] = None):
        """max_entries: maps sized before the load, by name (as libdpp sizes its own)."""
        self.path = path
        self._lib = load_libbpf()
        obj = self._lib.bpf_object__open_file(str(path).encode(), None)
        if not obj:
            err = ctypes.get_errno()
            raise OSError(err, f"bpf_object__open_file({path}): {os.strerror(err)}")
        self._obj: Optional[int] = obj
        try:
            for name, entries in (max_entries or {}).items():
                found = self._lib.bpf_object__find_map_by_name(obj, name.encode())
                if not found:
                    raise OSError(2, f"{path.name} has no map {name!r}")
                _check(self._lib.bpf_map__set_max_entries(found, entries), f"bpf_map__set_max_entries({name})")
            _check(self._lib.bpf_object__load(obj), f"bpf_object__load({path.name})")
        except OSError:
            self.close()
            raise

    def program_fd(self, name: str) -> int:
        prog = self._lib.bpf_object__find_program_by_name(self._obj, name.encode())
        if not prog:
            raise OSError(2, f"{self.path.name} has no program {name!r}")
        return _check(self._lib.bpf_program__fd(prog), f"bpf_program__fd({name})")

    def map_fd(self, name: str) -> int:
        return _check(self._lib.bpf_object__find_map_fd_by_name(self._obj, name.encode()), f"map {name}")

    def map_shape(self, name: str) -> tuple[int, int, int]:
        """The type (enum bpf_map_type), key size and value size of map `name`."""
        found = self._lib.bpf_object__find_map_by_name(self._obj, name.encode())
        if not found:
            raise OSError(2, f"{self.path.name} has no map {name!r}")
        lib = self._lib
        return lib.bpf_map__type(found), lib.bpf_map__key_size(found), lib.bpf_map__value_size(found)

    def close(self) -> None:
        if self._obj:
            self._lib.bpf_object__close(self._obj)
            self._obj = None

    def __enter__(self) -> "BpfObject":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def map_update(map_fd: int, key: Any, value: Any) -> None:
    """Write one slot; key and value are ctypes objects of the map's key and value size."""
    rc = load_libbpf().bpf_map_update_elem(map_fd, ctypes.byref(key), ctypes.byref(value), BPF_ANY)
    _check(rc, "bpf_map_update_elem")


def map_update_batch(map_fd: int, keys: Any, values: Any, count: int) -> None:
    """Write `count` slots in one call: keys and values are C arrays of the map's key and value
    size (a per-CPU map's values a row of every possible CPU's each)."""
    done = c_uint32(count)
    lib = load_libbpf()
    rc = lib.bpf_map_update_batch(map_fd, ctypes.byref(keys), ctypes.byref(values), ctypes.byref(done), None)
    _check(rc, "bpf_map_update_batch")
    if done.value != count:
        raise OSError(errno.EIO, f"bpf_map_update_batch: {done.value} of {count} slots written")


def map_lookup(map_fd: int, key: Any, value: Any, flags: int = 0) -> bool:
    """Read one slot into `value` (a ctypes object of the map's value size); False if absent.
    flags BPF_F_LOCK: under the value's bpf_spin_lock, one consistent snapshot."""
    rc = load_libbpf().bpf_map_lookup_elem_flags(map_fd, ctypes.byref(key), ctypes.byref(value), flags)
    if rc == -errno.ENOENT:
        return False
    _check(rc, "bpf_map_lookup_elem")
    return True


def map_delete(map_fd: int, key: Any) -> None:
    _check(load_libbpf().bpf_map_delete_elem(map_fd, ctypes.byref(key)), "bpf_map_delete_elem")


class MapCreateOpts(Structure):
    """struct bpf_map_create_opts of libbpf 1.x (bpf/bpf.h), up to map_flags; `sz` says so."""

    _fields_ = [("sz", ctypes.c_size_t), ("btf_fd", c_uint32), ("btf_key_type_id", c_uint32),
                ("btf_value_type_id", c_uint32), ("btf_vmlinux_value_type_id", c_uint32),
                ("inner_map_fd", c_uint32), ("map_flags", c_uint32)]


BPF_F_MMAPABLE = 1 << 10


def map_create(map_type: int, key_size: int, value_size: int, max_entries: int, name: str = "bench",
               flags: int = 0) -> int:
    """A new map's fd (the caller closes it); `flags`: its map_flags (e.g. BPF_F_MMAPABLE)."""
    opts = MapCreateOpts(sz=ctypes.sizeof(MapCreateOpts), map_flags=flags) if flags else None
    rc = load_libbpf().bpf_map_create(map_type, name.encode(), key_size, value_size, max_entries,
                                      ctypes.byref(opts) if opts is not None else None)
    return _check(rc, "bpf_map_create")


def inner_map_set(outer_fd: int, index: int, map_type: int, max_entries: int, entries: list[tuple[Any, Any]],
                  key_size: int, value_size: int) -> None:
    """Entry `index` of a map of maps made a new inner map of `map_type` holding `entries` (ctypes
    keys and values), put in with one write."""
    inner = map_create(map_type, key_size, value_size, max_entries)
    try:
        for key, value in entries:
            map_update(inner, key, value)
        map_update(outer_fd, c_uint32(index), c_uint32(inner))
    finally:
        os.close(inner)


def map_fd_by_id(map_id: int) -> int:
    """An fd of the map of that id (the caller closes it)."""
    return _check(load_libbpf().bpf_map_get_fd_by_id(map_id), "bpf_map_get_fd_by_id")


def map_keys(map_fd: int, key_type: Any) -> list[Any]:
    """Every key of a hash map (`key_type`: its ctypes type), in the kernel's order."""
    keys: list[Any] = []
    while True:
        key = key_type()
        previous = ctypes.byref(keys[-1]) if keys else None
        rc = load_libbpf().bpf_map_get_next_key(map_fd, previous, ctypes.byref(key))
        if rc == -errno.ENOENT:
            return keys
        _check(rc, "bpf_map_get_next_key")
        keys.append(key)


@dataclass(frozen=True)
class TestRun:
    """One BPF_PROG_TEST_RUN: the XDP verdict, the kernel's per-repetition time, the output packet."""

    __test__ = False  # not a pytest test class
    retval: int
    duration_ns: int  # the kernel's average per repetition, whole ns; time spent rescheduled excluded
    data: bytes


def test_run(prog_fd: int, packet: bytes, repeat: int, ifindex: int = 0, out_size: int = 0) -> TestRun:
    """Run `packet` through the program `repeat` times (same buffer every time). `ifindex`: the
    ingress device (of the calling thread's namespace; 0: its loopback); `out_size`: room for an
    output longer than the packet (a program that encapsulates)."""
    data_in = ctypes.create_string_buffer(packet, len(packet))
    data_out = ctypes.create_string_buffer(max(len(packet), out_size))
    ctx = XdpMd(data=0, data_end=len(packet), ingress_ifindex=ifindex)
    opts = TestRunOpts(
        sz=ctypes.sizeof(TestRunOpts),
        data_in=ctypes.cast(data_in, c_void_p),
        data_out=ctypes.cast(data_out, c_void_p),
        data_size_in=len(packet),
        data_size_out=len(data_out),
        repeat=repeat,
    )
    if ifindex:
        opts.ctx_in = ctypes.cast(ctypes.pointer(ctx), c_void_p)
        opts.ctx_size_in = ctypes.sizeof(ctx)
    # Wall-clock time around this call is no use: with repeat > 1 each call has a fixed cost of tens
    # of milliseconds (the kernel swaps the program into the XDP dispatcher and back), more than the
    # repetitions themselves. The kernel's own timer covers only the repetitions.
    _check(load_libbpf().bpf_prog_test_run_opts(prog_fd, ctypes.byref(opts)), "bpf_prog_test_run_opts")
    return TestRun(opts.retval, opts.duration, data_out.raw[: opts.data_size_out])


class ProgInfo(Structure):
    """The head of struct bpf_prog_info (linux/bpf.h): the kernel fills as many bytes as it is given."""

    _fields_ = [
        ("type", c_uint32),
        ("id", c_uint32),
        ("tag", ctypes.c_uint8 * 8),
        ("jited_prog_len", c_uint32),
        ("xlated_prog_len", c_uint32),
    ]


BPF_INSN_SIZE = 8


@dataclass(frozen=True)
class ProgramSize:
    """What a loaded program is made of: its instructions after the verifier's rewrites (helpers the
    kernel inlines, such as array lookups, included) and its JITed machine code."""

    xlated_insns: int
    jited_bytes: int


def program_size(prog_fd: int) -> ProgramSize:
    """The loaded program's size: a count that does not move with the machine's load, to set beside
    its timings (a change that removes instructions shows here whatever the noise of a run)."""
    info = ProgInfo()
    size = c_uint32(ctypes.sizeof(info))
    _check(load_libbpf().bpf_obj_get_info_by_fd(prog_fd, ctypes.byref(info), ctypes.byref(size)), "bpf_obj_get_info_by_fd")
    return ProgramSize(info.xlated_prog_len // BPF_INSN_SIZE, info.jited_prog_len)


def prog_id(prog_fd: int) -> int:
    """The loaded program's id (what bpftool names it by)."""
    info = ProgInfo()
    size = c_uint32(ctypes.sizeof(info))
    _check(load_libbpf().bpf_obj_get_info_by_fd(prog_fd, ctypes.byref(info), ctypes.byref(size)), "bpf_obj_get_info_by_fd")
    return info.id


BPF_F_TEST_XDP_LIVE_FRAMES = 1 << 1
BPF_F_LOCK = 1 << 2  # map lookups and updates: under the value's bpf_spin_lock


class XdpMd(Structure):
    """struct xdp_md, the context a live-frame run starts every frame with."""

    _fields_ = [
        ("data", c_uint32),
        ("data_end", c_uint32),
        ("data_meta", c_uint32),
        ("ingress_ifindex", c_uint32),
        ("rx_queue_index", c_uint32),
        ("egress_ifindex", c_uint32),
    ]


def test_run_live(prog_fd: int, packet: bytes, repeat: int, ifindex: int, batch: int = 64) -> TestRun:
    """`repeat` frames of `packet` through the program as if received on `ifindex` (of the calling
    thread's namespace), with XDP_TX and XDP_REDIRECT carried out for real
    (BPF_F_TEST_XDP_LIVE_FRAMES). duration_ns is the kernel's per frame, transmit included."""
    data_in = ctypes.create_string_buffer(packet, len(packet))
    ctx = XdpMd(data=0, data_end=len(packet), ingress_ifindex=ifindex)
    opts = TestRunOpts(
        sz=ctypes.sizeof(TestRunOpts),
        data_in=ctypes.cast(data_in, c_void_p),
        data_size_in=len(packet),
        ctx_in=ctypes.cast(ctypes.pointer(ctx), c_void_p),
        ctx_size_in=ctypes.sizeof(ctx),
        repeat=repeat,
        flags=BPF_F_TEST_XDP_LIVE_FRAMES,
        batch_size=batch,
    )
    _check(load_libbpf().bpf_prog_test_run_opts(prog_fd, ctypes.byref(opts)), "bpf_prog_test_run_opts (live)")
    return TestRun(opts.retval, opts.duration, b"")
