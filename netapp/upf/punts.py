"""The frames the UPF's data path hands to user space (the ring dpp_upf_punt: FAR BUFF and DUPL),
read through libdpp (`dpp_upf_punts_*`, dataplane/src/upf.c), and a frame sent back through the
program as if it had arrived (`dpp_upf_replay`). netapp.upf.buffering is what uses them."""

from __future__ import annotations

import ctypes
import dataclasses
from ctypes import byref, c_uint64, c_void_p
from typing import Any

from netapp.dataplane.errors import check
from netapp.upf.abi import PUNT_CB, Punt, PuntKind


@dataclasses.dataclass(frozen=True)
class Punted:
    """A frame as the data path punted it (struct dpp_upf_punt)."""

    seid: int
    pdr_id: int
    kind: PuntKind
    family: int  # the UE packet's
    ue_off: int  # where the UE packet starts in `frame`
    ifindex: int  # the ingress
    frame: bytes

    @property
    def ue_packet(self) -> bytes:
        """The UE's IP packet, without what follows it in the frame (a short frame's Ethernet padding)."""
        packet = self.frame[self.ue_off :]
        return packet[: _ip_length(packet, self.family)]


def _ip_length(packet: bytes, family: int) -> int:
    """The IP packet's length as its header says (IPv4 total length, IPv6 header and payload), at
    most what there is."""
    if family == 4 and len(packet) >= 20:
        said = int.from_bytes(packet[2:4], "big")
    elif family == 6 and len(packet) >= 40:
        said = 40 + int.from_bytes(packet[4:6], "big")
    else:
        said = len(packet)
    return min(said, len(packet))


def punted(record: Punt) -> Punted:
    return Punted(record.seid, record.pdr_id, PuntKind(record.kind), record.family, record.ue_off, record.ifindex,
                  bytes(memoryview(record.frame)[: record.len]))


class PuntReader:
    """The instance's ring, read: `poll` waits for records and returns them. One per instance."""

    def __init__(self, lib: Any, handle: c_void_p):
        self._lib, self._batch = lib, []
        self._callback = PUNT_CB(self._take)  # kept: libdpp calls it until closed
        self._reader = c_void_p()
        check(lib.dpp_upf_punts_open(handle, self._callback, None, byref(self._reader)), "dpp_upf_punts_open")

    def _take(self, record: Any, _ctx: Any) -> int:
        try:
            self._batch.append(punted(record.contents))
        except ValueError:  # a kind this build does not know: not ours to act on
            pass
        return 0

    def poll(self, timeout_ms: int) -> list[Punted]:
        """The records that came within `timeout_ms` (none: [])."""
        check(self._lib.dpp_upf_punts_poll(self._reader, timeout_ms), "dpp_upf_punts_poll")
        batch, self._batch = self._batch, []
        return batch

    def fileno(self) -> int:
        """Readable when records wait (select/poll on it, then `poll(0)`)."""
        return check(self._lib.dpp_upf_punts_fd(self._reader), "dpp_upf_punts_fd")

    @property
    def malformed(self) -> int:
        """Records too short for the length they carry (never handed over)."""
        count = c_uint64()
        check(self._lib.dpp_upf_punts_malformed(self._reader, byref(count)), "dpp_upf_punts_malformed")
        return count.value

    def close(self) -> None:
        if self._reader:
            self._lib.dpp_upf_punts_close(self._reader)
            self._reader = c_void_p()


def replay(lib: Any, handle: c_void_p, frame: bytes, ifindex: int) -> None:
    """`frame` through the program as if it had arrived on `ifindex` (live: its verdict carried out)."""
    buffer = ctypes.create_string_buffer(frame, len(frame))
    check(lib.dpp_upf_replay(handle, buffer, len(frame), ifindex), "dpp_upf_replay")
