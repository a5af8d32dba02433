"""FAR BUFF, NOCP and DUPL in user space (29.244 5.2.1, 5.2.4): the frames the data path punts
(the ring dpp_upf_punt, read through netapp.upf.punts) kept, reported, replayed or duplicated.

- BUFF: the data path drops the packet after punting it as it arrived; here it is queued per FAR
  (of its session), in arrival order. The first packet a FAR with NOCP queues makes a Session Report
  Request with a Downlink Data Report (report type DLDR, the PDR's id) to the SMF, once until the
  FAR stops buffering. When a change makes the FAR forward, once its new entries are in the maps,
  its queue is replayed in order through the XDP program on the interface each frame came in by
  (BPF_PROG_TEST_RUN with live frames: encapsulated and sent exactly as a live packet is, and
  counted on its URR then, not when buffered); a FAR that drops, a FAR removed or a session deleted
  discards its queue (counted).
- Limits (settings upf.buffer_*): packets and bytes per session and of all sessions; a packet past
  one is dropped, the newest (the packets kept are the first of their flows), counted as overflow.
- DUPL: each copy (the UE packet, without the tunnel it came in) is sent from user space to each of
  the FAR's duplicating parameters' outer header creation peer: in GTP-U/UDP (port 2152) with its
  TEID, or in UDP to its port, with the transport level marking as the IP ToS/Traffic Class. The
  peer is `Far.duplicating[i].outer_header_creation` (its `address`). A packet is copied once, by
  the FAR it arrives under: one that buffers too (BUFF+DUPL; the data path punts it only to be
  buffered) is copied here as it arrives, and its replay is not copied again.

`Buffering` wraps the data path's applier (netapp.upf.around, as netapp.upf.endmarker does): it sees
every session change -- one at a time, a transaction's at once, the stored sessions a reconcile puts
in the maps -- so it knows which PDRs punt and what their FARs say without reading the store. Its
thread (`start`, `close`) reads the ring.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import os
import select
import socket
import struct
import threading
from typing import Any, Callable, Iterable, Mapping, Optional

from netapp.telemetry.poll import UPF_BUFFERING_COUNTERS
from netapp.upf.abi import FarAction, PdrFlag, PuntKind
from netapp.upf.around import AroundApplier, Compiled, Pair
from netapp.upf.compiler import Entries
from netapp.upf.models import Far, OuterHeaderCreation, RuleError, Session
from netapp.upf.peers import Destinations
from netapp.upf.punts import Punted

log = logging.getLogger("netapp.upf")

GTPU_PORT = 2152
RETRY_S = 0.1  # after a failed read of the ring
FarKey = tuple[int, int]  # (SEID, FAR id)
COUNTERS = UPF_BUFFERING_COUNTERS  # api/telemetry.md's dpp_upf_buffering


@dataclasses.dataclass(frozen=True)
class Limits:
    session_packets: int = 256
    session_bytes: int = 1 << 20
    packets: int = 65536
    bytes: int = 64 << 20

    @classmethod
    def of(cls, settings: Any) -> "Limits":
        """From the UPF's settings (netapp.core.config.UpfSettings)."""
        return cls(settings.buffer_session_packets, settings.buffer_session_bytes, settings.buffer_packets,
                   settings.buffer_bytes)


class Buffers:
    """The buffered frames: a queue per FAR, bounded per session and in total. Not thread-safe:
    `Buffering` holds its lock around it."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self._queues: dict[FarKey, collections.deque[Punted]] = {}
        self._sessions: dict[int, list[int]] = {}  # SEID -> [packets, bytes]
        self.packets = self.bytes = 0
        self.counters: collections.Counter[str] = collections.Counter({name: 0 for name in COUNTERS})

    def add(self, key: FarKey, frame: Punted) -> bool:
        """Queue the frame; False (counted overflow) when a limit refuses it."""
        size, limits = len(frame.frame), self.limits
        held = self._sessions.get(key[0], [0, 0])
        if (held[0] + 1 > limits.session_packets or held[1] + size > limits.session_bytes
                or self.packets + 1 > limits.packets or self.bytes + size > limits.bytes):
            self.counters["overflow"] += 1
            return False
        self._queues.setdefault(key, collections.deque()).append(frame)
        self._sessions[key[0]] = [held[0] + 1, held[1] + size]
        self.packets, self.bytes = self.packets + 1, self.bytes + size
        self.counters["buffered"] += 1
        return True

    def take(self, key: FarKey) -> list[Punted]:
        """The FAR's frames in arrival order, no longer held."""
        frames = list(self._queues.pop(key, ()))
        if frames:
            held = self._sessions[key[0]]
            held[0] -= len(frames)
            held[1] -= sum(len(frame.frame) for frame in frames)
            self.packets -= len(frames)
            self.bytes -= sum(len(frame.frame) for frame in frames)
            if not held[0]:
                del self._sessions[key[0]]
        return frames

    def discard(self, key: FarKey) -> int:
        """Drop the FAR's frames (counted); how many."""
        dropped = len(self.take(key))
        self.counters["discarded"] += dropped
        return dropped

    def fars_of(self, seid: int) -> list[FarKey]:
        return [key for key in self._queues if key[0] == seid]

    def keys(self) -> list[FarKey]:
        return list(self._queues)

    def pdrs_of(self, key: FarKey) -> set[int]:
        """The PDR ids of the FAR's queued frames."""
        return {frame.pdr_id for frame in self._queues.get(key, ())}

    def held(self, seid: int) -> tuple[int, int]:
        """The session's buffered (packets, bytes)."""
        packets, size = self._sessions.get(seid, (0, 0))
        return packets, size


def _punting(session: Session) -> dict[tuple[int, int], Far]:
    """(SEID, PDR id) -> its FAR, for the session's PDRs whose FAR buffers or duplicates."""
    return {(session.seid, pdr_id): far for pdr_id, far in session.punting().items()}


def _punts(entries: Entries) -> bool:
    """Some entry hands its frames to user space (BUFF, DUPL)."""
    actions = (*entries.uplink.values(), *entries.downlink.values(), *entries.sdf_pdrs.values())
    return any(action.far == FarAction.BUFFER or action.flags & PdrFlag.DUPL for action in actions)


def gtpu_tpdu(teid: int, payload: bytes) -> bytes:
    """A GTP-U T-PDU (version 1, no optional fields) carrying `payload`."""
    return struct.pack("!BBHI", 0x30, 0xFF, len(payload), teid) + payload


class Duplicator:
    """Sends copies to duplicating parameters' peers from user-space UDP sockets (one per family)."""

    def __init__(self) -> None:
        self._sockets: dict[int, socket.socket] = {}

    def send(self, creation: OuterHeaderCreation, marking: Optional[int], packet: bytes) -> None:
        """OSError: not sent."""
        family = socket.AF_INET6 if creation.kind.endswith("ipv6") else socket.AF_INET
        sock = self._sockets.get(family)
        if sock is None:
            sock = self._sockets[family] = socket.socket(family, socket.SOCK_DGRAM)
        tos = marking or 0
        if family == socket.AF_INET:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
        else:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tos)
        if creation.kind.startswith("gtpu"):
            sock.sendto(gtpu_tpdu(creation.teid or 0, packet), (creation.address, GTPU_PORT))
        else:
            sock.sendto(packet, (creation.address, creation.port or 0))

    def close(self) -> None:
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()


class Buffering(AroundApplier):
    """The applier `inner` with BUFF, NOCP and DUPL carried out: `dataplane` replays (its
    `upf_replay`) and gives the ring's reader (`upf_punts`); `report(seid, pdr_ids)` sends a Downlink
    Data Report (set once the PFCP endpoint exists: netapp.upf.runtime); `sessions` are the UPF's
    (set once it exists, netapp.upf.runtime), where a reconcile of entries compiled at start-up,
    which names sessions by SEID, reads the FARs of those whose entries punt.

    A change that makes a FAR stop buffering is carried out once committed (`settled`, called by
    the UPF once its transaction is over; a change undone instead leaves the queue as it was): the ring is
    read to its end first (the frames the data path punted before the maps changed join the queue
    behind those read before), then the queue is replayed or discarded, before the PFCP response
    goes out, so that every live packet of the FAR comes after them. The ring is read by one thread
    at a time (`_ring`): the reader thread waits on its fd unlocked, and reads and acts on the frames
    locked, so that nothing it replays overtakes a queue being replayed."""

    def __init__(self, inner: Any, dataplane: Any, limits: Limits = Limits(),
                 report: Optional[Callable[[int, list[int]], None]] = None,
                 allowed: Optional[Destinations] = None):
        super().__init__(inner)
        self.sessions: Mapping[int, Session] = {}
        self.allowed = allowed  # upf.peer_networks (netapp.upf.peers); None: anywhere
        self._dataplane = dataplane
        self.report = report
        self.buffers = Buffers(limits)
        self.duplicator = Duplicator()
        self._lock = threading.Lock()  # the state below
        self._ring = threading.Lock()  # reading the ring and replaying (see the class's docstring)
        # Held around each replay alone, with nothing taken inside; a reload holds it too, after the
        # service's lock, so that no replay runs the program whose fd the reload closes
        # (NetAppService.serve_function). The UPF takes no lock a reload must take before the service's.
        self.program_lock, self.lock = threading.Lock(), None
        self._punting: dict[tuple[int, int], Far] = {}
        self._reported: set[FarKey] = set()
        self._flush: dict[FarKey, Optional[Far]] = {}  # queues to act on once committed: the FAR now
        # (SEID, PDR id) of their PDRs -> the queue, and the FAR its frames were buffered under
        self._flushing: dict[tuple[int, int], tuple[FarKey, Optional[Far]]] = {}
        self._echoes: collections.Counter[tuple[int, bytes]] = collections.Counter()  # replayed: (SEID, frame)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._reader: Any = None
        self._wake = -1  # an eventfd: `close` wakes the reader thread with it

    def requeue(self) -> None:
        """After a reload: nothing to do (a replay looks the program up each time)."""

    def heal_status(self) -> str:
        """"ok", or that an undo left entries of the UPF's maps wrong until the next change (readiness)."""
        stale = self.stale
        return "ok" if not stale else (f"undoing a refused change left {len(stale)} entries of the UPF's maps wrong "
                                       f"({'; '.join(stale[:3])}): the next change reconciles them first")

    @property
    def counters(self) -> dict[str, int]:
        with self._lock:
            return dict(self.buffers.counters)

    def held(self, seid: int) -> tuple[int, int]:
        """The session's buffered (packets, bytes)."""
        with self._lock:
            return self.buffers.held(seid)

    def stats(self) -> dict[str, int]:
        """The counters, and the packets and bytes held now (`held_packets`, `held_bytes`)."""
        with self._lock:
            return {**self.buffers.counters, "held_packets": self.buffers.packets, "held_bytes": self.buffers.bytes}

    # --- the applier ------------------------------------------------------------------------------

    def _applied(self, pairs: list[Pair]) -> None:
        for old, new in pairs:
            self._changed(old, new)

    def _settled(self, pairs: list[Pair]) -> None:
        self._flush_queues()

    def _flush_queues(self) -> None:
        """The changes applied are committed: the queues of the FARs they made stop buffering
        replayed (FORW) or discarded."""
        with self._ring:
            if not self._flush:
                return
            copies, reports = self._read_ring()
            replays: list[Punted] = []
            with self._lock:
                flush, self._flush, self._flushing = self._flush, {}, {}
                for key, far in flush.items():
                    self._reported.discard(key)
                    if far is not None and "FORW" in far.apply_action:
                        replays += self.buffers.take(key)
                    else:
                        self.buffers.discard(key)
            self._replay(replays)
            more = self._read_ring()  # the copies the replays made, among them
        self._send(copies + more[0], reports + more[1])

    def reconcile(self, sessions: Iterable[Session]) -> dict[int, RuleError]:
        sessions = list(sessions)
        refused = self._inner.reconcile(sessions)
        self._reconciled({session.seid: session for session in sessions if session.seid not in refused})
        return refused

    def reconcile_compiled(self, compiled: Compiled) -> dict[int, RuleError]:
        """`reconcile` of the sessions by SEID with their entries (compiled at start-up): of the
        sessions the maps then hold, those whose entries punt, or which have queues, are read from
        `sessions` (the others have nothing of interest here, and reading every session is slow)."""
        given, punting = [], set()

        def noted(seid: int, entries_of: Callable[[], Entries]) -> Entries:
            entries = entries_of()
            if _punts(entries):
                punting.add(seid)
            return entries

        def each() -> Iterable[tuple[int, Callable[[], Entries]]]:
            for seid, entries_of in compiled:
                given.append(seid)
                yield seid, functools.partial(noted, seid, entries_of)

        refused = self._inner.reconcile_compiled(each())
        with self._lock:
            queued = {key[0] for key in (*self.buffers.keys(), *self._flush)}
        wanted = (punting | queued).intersection(given).difference(refused)
        self._reconciled({seid: self.sessions[seid] for seid in wanted})
        return refused

    def _reconciled(self, kept: Mapping[int, Session]) -> None:
        """The maps hold the sessions `kept` (those that punt or have queues, at least) and no other:
        the PDRs that punt are theirs; the queues of the others discarded, those of FARs that no
        longer buffer replayed."""
        with self._lock:
            self._punting = {key: far for session in kept.values() for key, far in _punting(session).items()}
            for seid in {key[0] for key in (*self.buffers.keys(), *self._flush)}:
                self._to_flush(seid, None, kept.get(seid))
        self._flush_queues()  # what the maps now hold is what is

    def _changed(self, old: Optional[Session], new: Optional[Session]) -> None:
        """The change is in the maps: the PDRs that punt now; the FARs that no longer buffer."""
        seid = (new or old).seid  # type: ignore[union-attr]
        with self._lock:
            for key in _punting(old).keys() if old is not None else ():
                self._punting.pop(key, None)
            if new is not None:
                self._punting.update(_punting(new))
            self._to_flush(seid, old, new)
            if new is None:
                self._reported = {key for key in self._reported if key[0] != seid}

    def _to_flush(self, seid: int, old: Optional[Session], new: Optional[Session]) -> None:
        """The session's queues (and FARs that buffered: the ring may hold their frames) whose FAR
        in `new` (None: gone) does not buffer, for once committed (`settled`), with the PDRs whose frames join them
        meanwhile; those that buffer again (an undo) no longer. Holding the lock."""
        keys = {*self.buffers.fars_of(seid), *(key for key in self._flush if key[0] == seid)}
        keys |= {(seid, far.id) for far in (old.fars.values() if old is not None else ()) if "BUFF" in far.apply_action}
        for key in keys:
            far = new.fars.get(key[1]) if new is not None else None
            self._flushing = {pdr: queue for pdr, queue in self._flushing.items() if queue[0] != key}
            if far is not None and "BUFF" in far.apply_action:
                self._flush.pop(key, None)
                continue
            self._flush[key] = far
            pdrs = {pdr.id for session in (old, new) if session is not None for pdr in session.pdrs.values()
                    if pdr.far_id == key[1]}
            pdrs |= self.buffers.pdrs_of(key)
            buffered_under = old.fars.get(key[1]) if old is not None else None
            self._flushing.update({(seid, pdr_id): (key, buffered_under) for pdr_id in pdrs})

    def _replay(self, frames: list[Punted]) -> None:
        """Each frame through the program. A FAR that duplicates copies it there once more: that
        copy, in the ring once the replay returns, is told from a live one and not sent (`_echoes`,
        until the ring is next read to its end): a packet is copied once, by the FAR it arrived under."""
        for frame in frames:
            with self._lock:
                self._echoes[(frame.seid, frame.frame)] += 1
            try:
                with self.program_lock:
                    self._dataplane.upf_replay(frame.frame, frame.ifindex)
                outcome = "replayed"
            except Exception as exc:  # noqa: BLE001 - the others are replayed all the same
                log.warning("UPF: replaying a buffered frame of session %#x failed: %s", frame.seid, exc)
                outcome = "replay_failed"
            with self._lock:
                self.buffers.counters[outcome] += 1

    # --- the ring -------------------------------------------------------------------------------

    def take(self, frames: Iterable[Punted]) -> None:
        """Frames read from the ring: buffered, reported, duplicated (or replayed at once, when their
        FAR forwards by now); then the ring to its end (what the replays punted)."""
        with self._ring:
            copies, reports = self._take(frames)
            more = self._read_ring()
        self._send(copies + more[0], reports + more[1])

    def _take(self, frames: Iterable[Punted]) -> tuple[list[tuple[Far, Punted]], list[tuple[int, int]]]:
        """Frames queued or replayed (holding `_ring`); the copies and reports to send."""
        reports: list[tuple[int, int]] = []
        replays: list[Punted] = []
        copies: list[tuple[Far, Punted]] = []
        with self._lock:
            for frame in frames:
                far = self._punting.get((frame.seid, frame.pdr_id))
                flushing = self._flushing.get((frame.seid, frame.pdr_id))
                if frame.kind == PuntKind.DUPLICATE:
                    self._copy_unless_echo(far, frame, copies)
                    continue
                buffered_under = flushing[1] if flushing is not None else far
                if buffered_under is not None and {"BUFF", "DUPL"} <= buffered_under.apply_action:
                    copies.append((buffered_under, frame))  # copied as it arrives, whatever comes of it
                if flushing is not None:  # punted before a change not yet committed: queued behind
                    self.buffers.add(flushing[0], frame)
                elif far is None:
                    self.buffers.counters["unknown"] += 1
                elif "BUFF" not in far.apply_action:  # punted before the FAR changed
                    if "FORW" in far.apply_action:
                        replays.append(frame)
                    else:
                        self.buffers.counters["discarded"] += 1
                elif self.buffers.add((frame.seid, far.id), frame) and "NOCP" in far.apply_action:
                    if (frame.seid, far.id) not in self._reported:
                        self._reported.add((frame.seid, far.id))
                        reports.append((frame.seid, frame.pdr_id))
        self._replay(replays)
        return copies, reports

    def _copy_unless_echo(self, far: Optional[Far], frame: Punted, copies: list[tuple[Far, Punted]]) -> None:
        """A DUPLICATE frame: a copy to send, unless a replay's (holding the lock)."""
        echo = (frame.seid, frame.frame)
        if self._echoes[echo]:
            self._echoes[echo] -= 1
        elif far is not None:
            copies.append((far, frame))
        else:
            self.buffers.counters["unknown"] += 1

    def _send(self, copies: list[tuple[Far, Punted]], reports: list[tuple[int, int]]) -> None:
        for far, frame in copies:
            self._duplicate(far, frame)
        for seid, pdr_id in reports:
            self._report(seid, pdr_id)

    def _duplicate(self, far: Far, frame: Punted) -> None:
        for parameters in far.duplicating:
            creation = parameters.outer_header_creation
            if creation is None:
                continue
            if self.allowed is not None and not self.allowed.allows(creation.address or ""):
                # upf.peer_networks narrowed since the FAR was accepted (netapp.upf.peers)
                log.info("UPF: a copy of FAR %d of session %#x to %s not sent: outside upf.peer_networks",
                         far.id, frame.seid, creation.address)
                outcome = "duplicate_refused"
            else:
                outcome = self._send_copy(far, frame, creation, parameters.transport_level_marking)
            with self._lock:
                self.buffers.counters[outcome] += 1

    def _send_copy(self, far: Far, frame: Punted, creation: OuterHeaderCreation, marking: Optional[int]) -> str:
        """The copy sent: its counter's name."""
        try:
            self.duplicator.send(creation, marking, frame.ue_packet)
            return "duplicated"
        except OSError as exc:
            log.info("UPF: a copy of FAR %d of session %#x to %s not sent: %s", far.id, frame.seid,
                     creation.address, exc)
            return "duplicate_failed"

    def _report(self, seid: int, pdr_id: int) -> None:
        if self.report is None:
            return
        try:
            self.report(seid, [pdr_id])
        except Exception:  # noqa: BLE001 - the reader goes on
            log.exception("UPF: the downlink data report of session %#x", seid)
            return
        with self._lock:
            self.buffers.counters["reported"] += 1

    def _read_ring(self) -> tuple[list[tuple[Far, Punted]], list[tuple[int, int]]]:
        """Every frame the ring holds, acted on (holding `_ring`); the copies and reports to send."""
        copies: list[tuple[Far, Punted]] = []
        reports: list[tuple[int, int]] = []
        while self._reader is not None and (frames := self._reader.poll(0)):
            more = self._take(frames)
            copies, reports = copies + more[0], reports + more[1]
        with self._lock:
            self._echoes.clear()  # a replay's copy is in the ring once it returns: all read by now
        return copies, reports

    def start(self) -> "Buffering":
        """Read the ring in a thread of its own, until `close`. Without a kernel data path (no
        reader), nothing is punted and no thread is started."""
        self._reader = self._dataplane.upf_punts()
        if self._reader is None:
            return self
        self._wake = os.eventfd(0, os.EFD_NONBLOCK)
        self._thread = threading.Thread(target=self._run, name="upf-punts", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._reader.fileno(), select.POLLIN)
        poller.register(self._wake, select.POLLIN)
        while not self._stop.is_set():
            try:
                poller.poll()  # unlocked: `_flush_queues` may read meanwhile
                with self._ring:
                    copies, reports = self._read_ring()
                self._send(copies, reports)
            except Exception:  # noqa: BLE001 - a failed read is logged, the next one tried
                log.exception("UPF: reading the punted frames")
                self._stop.wait(RETRY_S)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            os.eventfd_write(self._wake, 1)
            self._thread.join()
            self._thread = None
            os.close(self._wake)
        with self._ring:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
        self.duplicator.close()
