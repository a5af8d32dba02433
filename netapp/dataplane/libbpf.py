"""libbpf itself (the one libdpp links against), for the few calls the control plane makes on a
program or map fd that libdpp hands out: a ring read (netapp.atsss.acks), a program run once with
some data (`run_once`: the writers of values that packets move meanwhile, netapp.atsss.table)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import Structure, c_int, c_size_t, c_uint32, c_void_p
from functools import lru_cache


class TestRunOpts(Structure):
    """struct bpf_test_run_opts of libbpf 1.x (bpf/bpf.h); `sz` tells libbpf which fields we know."""

    __test__ = False  # not a pytest test class
    _fields_ = [
        ("sz", c_size_t),
        ("data_in", c_void_p),
        ("data_out", c_void_p),
        ("data_size_in", c_uint32),
        ("data_size_out", c_uint32),
        ("ctx_in", c_void_p),
        ("ctx_out", c_void_p),
        ("ctx_size_in", c_uint32),
        ("ctx_size_out", c_uint32),
        ("retval", c_uint32),
        ("repeat", c_int),
        ("duration", c_uint32),
        ("flags", c_uint32),
        ("cpu", c_uint32),
        ("batch_size", c_uint32),
    ]


@lru_cache(maxsize=None)
def libbpf() -> ctypes.CDLL:
    lib = ctypes.CDLL(ctypes.util.find_library("bpf") or "libbpf.so.1", use_errno=True)
    lib.bpf_prog_test_run_opts.argtypes = [c_int, ctypes.POINTER(TestRunOpts)]
    return lib


def run_once(prog_fd: int, data: bytes) -> int:
    """The program's verdict on `data`, run once (BPF_PROG_TEST_RUN, repeat 1: the kernel runs it on
    the calling thread at once, no dispatcher swap); OSError when the kernel refuses the run."""
    data_in = ctypes.create_string_buffer(data, len(data))
    opts = TestRunOpts(sz=ctypes.sizeof(TestRunOpts), data_in=ctypes.cast(data_in, c_void_p),
                       data_size_in=len(data), repeat=1)
    err = libbpf().bpf_prog_test_run_opts(prog_fd, ctypes.byref(opts))
    if err < 0:
        raise OSError(-err, f"bpf_prog_test_run_opts: {os.strerror(-err)}")
    return opts.retval
