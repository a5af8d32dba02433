"""Sessions written into an object's maps where its data path finds them: a way of the index
(dpp_atsss_index4) leading to a slot of dpp_atsss_slots when the object has the index
(netapp.atsss.index, written at once: no packet runs while a bench sets up), dpp_atsss_sessions when
it has not (a build before the index) or the bucket is full."""

from __future__ import annotations

from ctypes import c_uint32

from bench.libbpf import BpfObject, map_update
from netapp.atsss.abi import Index4, Session, SessionKey
from netapp.atsss.index import bucket_of, put_at_once


class SessionWriter:
    """IPv4 sessions into `obj`'s maps; `put` each, then `flush` the buckets. `hashed`: every one in
    dpp_atsss_sessions, as a session whose bucket was full (bench/atsss/placement.py)."""

    def __init__(self, obj: BpfObject, hashed: bool = False):
        self.sessions_fd = obj.map_fd("dpp_atsss_sessions")
        try:
            self.slots_fd, self.index_fd = obj.map_fd("dpp_atsss_slots"), obj.map_fd("dpp_atsss_index4")
        except OSError:
            self.slots_fd = self.index_fd = -1
        if hashed:
            self.index_fd = -1
        self._buckets: dict[int, Index4] = {}

    def put(self, slot: int, key: SessionKey, value: Session) -> None:
        """The session of `key` (IPv4) in `slot` (1 and up) and a way of its bucket, or in the hash."""
        bucket = self._buckets.setdefault(bucket_of(key), Index4())
        if self.index_fd >= 0 and put_at_once(bucket, key, slot):
            map_update(self.slots_fd, c_uint32(slot), value)
        else:
            map_update(self.sessions_fd, key, value)

    def flush(self) -> None:
        """The buckets written whole (those of the sessions put since the last flush, only those)."""
        for index, bucket in self._buckets.items():
            if self.index_fd >= 0:
                map_update(self.index_fd, c_uint32(index), bucket)
        self._buckets = {}
