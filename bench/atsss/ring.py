"""The ring of the proxy's DCCP-Acks (dpp_atsss_acks, nf/atsss/uplink.h) read with libbpf's
ring_buffer API, as a sender in user space reads it: (ifindex, frame) records. The benchmark drains
it between runs; the tests read the Acks from it."""

from __future__ import annotations

import ctypes
from ctypes import CFUNCTYPE, c_int, c_size_t, c_void_p

from bench.libbpf import load_libbpf
from netapp.atsss.abi import Ack

SampleFn = CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t)


class AckRing:
    """The ring dpp_atsss_acks, read as a sender in user space reads it: (ifindex, frame) records."""

    def __init__(self, map_fd: int):
        self._lib = load_libbpf()
        self._lib.ring_buffer__new.restype = c_void_p
        self._lib.ring_buffer__new.argtypes = [c_int, SampleFn, c_void_p, c_void_p]
        self._lib.ring_buffer__consume.argtypes = [c_void_p]
        self._lib.ring_buffer__free.argtypes = [c_void_p]
        self._records: list[tuple[int, bytes]] = []
        self._callback = SampleFn(self._sample)
        self._rb = self._lib.ring_buffer__new(map_fd, self._callback, None, None)
        if not self._rb:
            raise OSError(ctypes.get_errno(), "ring_buffer__new(dpp_atsss_acks)")

    def _sample(self, _ctx: int, data: int, size: int) -> int:
        record = Ack.from_buffer_copy(ctypes.string_at(data, size))
        assert size == ctypes.sizeof(Ack) and record.len <= len(record.frame)
        self._records.append((record.ifindex, bytes(record.frame[: record.len])))
        return 0

    def drain(self) -> list[tuple[int, bytes]]:
        """Every record the ring holds, in order; the ring left empty."""
        if self._lib.ring_buffer__consume(self._rb) < 0:
            raise OSError(ctypes.get_errno(), "ring_buffer__consume(dpp_atsss_acks)")
        records, self._records = self._records, []
        return records

    def close(self) -> None:
        if self._rb:
            self._lib.ring_buffer__free(self._rb)
            self._rb = None
