"""ATSSS's maps written from stored sessions, and read back: the sessions by UE address (paths,
mode, weights, the scheduler's state and the MP_SEQ counter) in the index (dpp_atsss_index4 and 6,
dpp_atsss_slots) or dpp_atsss_sessions (netapp.atsss.index), dpp_atsss_paths (slot -> the
path's outer headers, up flag, RTT and DCCP sequence number, what it sent), dpp_atsss_path_stats
(slot -> what it received, per CPU), dpp_atsss_uplink (a path's uplink addresses and ports -> its slot and UE),
dpp_atsss_path_rx (slot -> what the path heard, its loss estimate), dpp_atsss_gate (nonzero while any session is
held: the pipeline hands ATSSS's frames to its stage), dpp_atsss_ues (the UE filter: a bit per hash
of the UE addresses with a session, which the pipeline reads before it looks a session up) and
dpp_atsss_tx (group -> an inner map of position -> the interface REDUNDANT copies for that position
leave by, with the position's copy program; netapp.atsss.groups) and, in the pipeline, dpp_atsss_flow_state
(slot -> the scheduler state of an MTS session's flows, netapp.atsss.flows), through the generic tables
(`table_of(name)`, as netapp.frer.table).

`AtsssMaps.sync` makes the entries of some UEs (or of all) what the tables say, writing only what
differs. The words the data path moves (a path's DCCP sequence number and what it sent, a
session's MP_SEQ counter and weighted round-robin's state and lock) are written by the control plane
only when the path or session is new (zeroed: a new subflow's numbers start at 0). A changed path
has only the words the control plane owns stored in place, word by word through the map's mmap
(netapp.dataplane.tables.InPlace); a changed session likewise by the data plane's writer program,
run once with its words (nf/atsss/words.h: a session's values cannot be mapped), so that no number
a packet takes meanwhile is given again nor any count lost, as a read, carry over and write of the
whole value would (`_write_path_words` and `_write_session_words` say what a packet meets between
the stores). What a packet may meet while a sync runs is otherwise a session whole: new paths are
written whole before the sessions that lead to them, sessions deleted before their slots are
emptied; a path's uplink entry is written with the path and deleted once no path has its
addresses and ports; a UE's filter bit is set before its session is written and cleared once no
session left has that bit (netapp.atsss.ue_filter). A path slot a sync empties is retired: written
for another path only after a wait for the programs' runs (`retired_slots`), which the store
passes over while others are free (admission.PASSED_OVER).

A change is undone (the maps refused it, or the store its COMMIT) by a sync back to what the UEs'
sessions were, carrying into the entries it writes anew (those the change deleted or emptied) the
numbers and counts the data path had moved in them, read before the change (`AtsssMaps.moved`,
`AtsssTables.carry`): a session deleted and put back goes on with its MP_SEQ numbers, a path with its
DCCP numbers and counters.
"""

from __future__ import annotations

import ctypes
import errno
import socket
import sys
import struct
from ctypes import Structure, c_uint32, c_uint64
from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple, Optional

import numpy

from netapp.atsss.abi import (
    FlowState,
    Path,
    PathFlags,
    PathRx,
    PathStats,
    Session,
    SessionFlags,
    SessionKey,
    SessionWords,
    Uplink,
    UplinkKey,
)
from netapp.atsss.head4 import set_head4
from netapp.atsss.index import MP_SEQ_SKIP, SessionIndex
from netapp.atsss.models import Address, AtsssSession, ChecksumCoverage
from netapp.atsss.reclaim import SlotReclaim, delete_present, subflow
from netapp.atsss.ue_filter import UeFilter
from netapp.dataplane.groups import DevmapGroups
from netapp.dataplane.errors import DataplaneError
from netapp.dataplane.libbpf import run_once
from netapp.dataplane.tables import InPlace, Span, Table

TableOf = Callable[[str], Table]
ProgramFd = Callable[[str], int]  # a loaded program's fd by its name in the BPF object
COPY_PROG = "dpp_atsss_copy_"  # + position: the devmap program of dpp_atsss_tx's entry (nf/atsss/copies.h)
Macs = tuple[str, str]  # (source, next hop) of one path


STAT_FIELDS = tuple(name for name, _ in PathStats._fields_)
# read as one array of 64-bit counters (AtsssMaps.stats)
assert all(kind is c_uint64 for _, kind in PathStats._fields_), "dpp_atsss_path_stats holds __u64 counters only"


class PathCounts(NamedTuple):
    """What one path sent (its entry of dpp_atsss_paths) and received (dpp_atsss_path_stats, summed
    over the CPUs)."""

    packets: int
    bytes: int
    rx_packets: int
    rx_bytes: int
    rx_acks: int


class PathLoss(NamedTuple):
    """dpp_atsss_path_rx's loss estimate of one path: the numbers of ours the UE's Ack Vectors
    reported received and not received, each judged once (include/dpp/nf/atsss.h)."""

    delivered: int
    lost: int

    @property
    def ratio(self) -> Optional[float]:
        """The part of the judged numbers lost; None before any was judged."""
        judged = self.delivered + self.lost
        return self.lost / judged if judged else None


def address_words(address: Address) -> tuple[int, int, int, int]:
    """An address as the ABI's four 32-bit words (network order in memory), IPv4 in the first."""
    return struct.unpack("=4I", address.packed.ljust(16, b"\0"))


def session_key(ue: Address) -> SessionKey:
    key = SessionKey(family=ue.version)
    key.addr[:] = address_words(ue)
    return key


def entries_of(sessions: list[AtsssSession]) -> tuple[list[bytes], list[int]]:
    """The raw keys of the sessions' UEs and their path slots: what `AtsssMaps.sync` of them writes."""
    return [bytes(session_key(session.ue)) for session in sessions], [slot for session in sessions
                                                                      for slot in session.slots]


def _mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def path_value(session: AtsssSession, position: int, macs: Macs) -> Path:
    """The slot of `session`'s path at `position` as the control plane writes it (DCCP sequence 0),
    an IPv4 path's outer headers built (its template)."""
    path = session.paths[position]
    value = Path(access=path.access.c_access, family=path.local.version,
                 flags=(PathFlags.UP if path.up else 0) | (PathFlags.CONGESTED if path.congested else 0),
                 rtt_us=path.rtt_us,
                 sport=socket.htons(path.local_port), dport=socket.htons(path.peer_port))  # fmt: skip
    value.smac[:] = _mac(macs[0])
    value.dmac[:] = _mac(macs[1])
    value.local[:] = address_words(path.local)
    value.peer[:] = address_words(path.peer)
    set_head4(value)
    return value


def uplink_key(path: Path) -> UplinkKey:
    """How the path's uplink packets arrive: from the UE's address and port (the path's peer and
    dport) to ours (its local and sport)."""
    key = UplinkKey(family=path.family, sport=path.dport, dport=path.sport)
    key.peer[:] = path.peer[:]
    key.local[:] = path.local[:]
    return key


def uplink_value(session: AtsssSession, slot: int) -> Uplink:
    """The path in `slot` and the UE address its uplink's UE packets must come from."""
    value = Uplink(path=slot, family=session.ue.version)
    value.ue[:] = address_words(session.ue)
    return value


def session_value(session: AtsssSession, tx_group: int = 0) -> Session:
    """The session's entry as the control plane writes it: its scheduler state zero, MP_SEQ 0, the
    positions of its paths up as bits (REDUNDANT's marking reads them, no path's line); `tx_group`:
    a REDUNDANT session's group of ports."""
    n = len(session.paths)
    header_only = session.checksum_coverage is ChecksumCoverage.HEADER
    value = Session(mode=session.effective_mode.c_mode, n_paths=n, tx_group=tx_group,
                    flags=(SessionFlags.HEADER_CHECKSUM if header_only else 0)
                    | (SessionFlags.FLOW_RULES if session.mts_flows else 0),
                    up=sum(1 << position for position, path in enumerate(session.paths) if path.up))
    value.weight[:n] = [path.weight for path in session.paths]
    value.priority[:n] = [path.priority for path in session.paths]
    value.path[:n] = session.slots
    return value


@dataclass
class Moved:
    """What the data path had moved in some sessions and paths, read before a change (raw session key
    -> session, path slot -> path; a path the change emptied as its sync read it just before, and
    one whose slot it wrote anew for another subflow as its reclaim read it after the wait,
    AtsssMaps.sync and read_by_reclaim): carried by the change's undo into the entries it writes
    anew, those the change deleted, emptied or wrote anew, so that no MP_SEQ or DCCP number is given
    again. What a path received and its loss estimate need no carrying: emptying a path leaves them,
    and the undo does not write them (writing them as read would uncount what arrived meanwhile); a
    slot written anew has them zeroed, and the reclaim itself gives them back to the undo's path
    (netapp.atsss.reclaim, `_received_back`)."""

    sessions: dict[bytes, Session] = field(default_factory=dict)
    paths: dict[int, Path] = field(default_factory=dict)


@dataclass
class AtsssTables:
    """What the maps hold for some UEs: raw session key -> (key, session), path slot -> path; what a
    path written anew starts from besides (`moved`: none, zeroed)."""

    sessions: dict[bytes, tuple[SessionKey, Session]] = field(default_factory=dict)
    paths: dict[int, Path] = field(default_factory=dict)
    uplinks: dict[int, Uplink] = field(default_factory=dict)  # path slot -> its uplink entry's value
    moved: Moved = field(default_factory=Moved)

    def add(self, session: AtsssSession, macs: list[Macs], tx_group: int = 0) -> None:
        key = session_key(session.ue)
        self.sessions[bytes(key)] = (key, session_value(session, tx_group))
        for position, slot in enumerate(session.slots):
            self.paths[slot] = path_value(session, position, macs[position])
            self.uplinks[slot] = uplink_value(session, slot)

    def carry(self, moved: Moved) -> None:
        """The data path's words of `moved` in these entries: a sync writes them where it writes an
        entry anew (it leaves them to the data path in the others). A session's MP_SEQ counts on
        from MP_SEQ_SKIP numbers beyond the one read, as a session moved into the index does
        (netapp.atsss.index, point 5): packets took numbers from it between the read and the change."""
        for raw, (_, value) in self.sessions.items():
            if raw in moved.sessions:
                value.current[:] = moved.sessions[raw].current[:]
                value.mp_seq = moved.sessions[raw].mp_seq + MP_SEQ_SKIP
        for slot, path in self.paths.items():
            if slot in moved.paths:
                for name in PATH_MOVED:
                    setattr(path, name, getattr(moved.paths[slot], name))
        self.moved = moved


def _session_part(value: Session) -> tuple:
    """What the control plane says of a session (the rest is the scheduler's state)."""
    n = value.n_paths
    return (value.mode, value.flags, n, tuple(value.weight[:n]), tuple(value.path[:n]), tuple(value.priority[:n]),
            value.tx_group, value.up)


def owned_spans(kind: type, moved: tuple[str, ...]) -> list[Span]:
    """The byte ranges of a `kind` value outside its fields `moved` (the data path's), in order."""
    spans, start = [], 0
    for name in moved:
        where = getattr(kind, name)
        if where.offset > start:
            spans.append((start, where.offset))
        start = max(start, where.offset + where.size)
    if start < ctypes.sizeof(kind):
        spans.append((start, ctypes.sizeof(kind)))
    return spans


# What the data path moves in a path: its DCCP sequence number (line 1) and what it sent (line 2);
# the rest is the control plane's.
PATH_MOVED = ("dccp_seq", "packets", "bytes")
PATH_OWNED = owned_spans(Path, PATH_MOVED)
# The program that stores a session's own words in place (nf/atsss/words.h).
SESSION_WRITER = "dpp_atsss_session_set"
XDP_PASS, XDP_DROP = 2, 1


def session_words(key: SessionKey, slot: Optional[int], before: Session, value: Session) -> SessionWords:
    """The run's data of SESSION_WRITER: `value`'s own words for the session in `slot` of
    dpp_atsss_slots (None: `key`'s of dpp_atsss_sessions); the control word first when it has
    fewer paths than `before`."""
    raw = bytes(value)

    def word(field: str, size: int, index: int = 0) -> int:
        offset = getattr(Session, field).offset + index * size
        return int.from_bytes(raw[offset : offset + size], sys.byteorder)

    words = SessionWords(slot=slot or 0, control=word("mode", 4), fewer=int(value.n_paths < before.n_paths),
                         weight=word("weight", 8), priority=word("priority", 8))
    words.key = key
    words.path[:] = [word("path", 8, 0), word("path", 8, 1)]
    return words


def _owned(value: Structure, spans: list[Span]) -> bytes:
    """What the control plane says of a value: its bytes in `spans`."""
    raw = bytes(value)
    return b"".join(raw[start:end] for start, end in spans)


def _path_part(value: Path) -> bytes:
    """What the control plane says of a path (all but its DCCP sequence number and counters)."""
    return _owned(value, PATH_OWNED)


class AtsssMaps:
    """ATSSS's maps of one loaded data plane."""

    def __init__(self, table_of: TableOf):
        self._sessions = SessionIndex(table_of, waited=lambda: self._retired.clear())  # a wait frees them
        self._paths = table_of("dpp_atsss_paths")
        self._stats = table_of("dpp_atsss_path_stats")
        self._uplink = table_of("dpp_atsss_uplink")
        self._rx = table_of("dpp_atsss_path_rx")
        self._gate = table_of("dpp_atsss_gate")
        self._ue_filter = UeFilter(table_of("dpp_atsss_ues"), lambda: (key for key, _ in self._sessions.items()))
        self._tx = DevmapGroups(table_of("dpp_atsss_tx"))  # type: ignore[arg-type]
        self._retired: set[int] = set()  # path slots zeroed since the last wait (_write_paths, index.py's 4.)
        self._table_of = table_of  # the pipeline's flow states: opened when a slot is given (xdp_atsss has none)
        self._reclaim = SlotReclaim(self._paths, self._stats, self._rx, self._uplink, PATH_OWNED, self._write_sessions,
                                    self._held, uplink_key, self.wait_readers, self._sessions.delete)

    # --- writes --------------------------------------------------------------------------------

    def reset_flow_states(self, slots: Iterable[int]) -> None:
        """The flow states `slots` zeroed, in one write, before an MTS session's rules name them:
        written with the value's lock held (libdpp's BPF_F_LOCK for a map whose values hold one), so
        a pick made meanwhile by a rule that named one before sees the running weights whole, old or
        zeroed. An instance pinned by a build without flow states has no such map until its programs
        are reloaded (Dataplane.reload), which makes it zeroed: nothing to do until then."""
        zeroed = FlowState()
        try:
            self._table_of("dpp_atsss_flow_state").update([(c_uint32(slot), zeroed) for slot in slots])
        except DataplaneError as exc:
            if exc.errno != errno.ENOENT:
                raise

    def flow_state(self, slot: int) -> FlowState:
        found = self._table_of("dpp_atsss_flow_state").lookup([c_uint32(slot)])[0]
        assert found is not None, "an array holds every slot"
        return found

    def wait_readers(self) -> None:
        """Return once every program run that began before has ended (Table.wait_readers): the
        path slots retired so far are free then."""
        self._paths.wait_readers()
        self._retired.clear()

    def retired_slots(self) -> frozenset[int]:
        """The path slots a sync emptied since the last wait: written for another path, they would
        cost one (_write_paths); the store passes over them (admission.PASSED_OVER)."""
        return frozenset(self._retired)

    def sync(self, tables: AtsssTables, ues: Optional[Iterable[bytes]] = None,
             slots: Iterable[int] = ()) -> dict[int, Path]:
        """The sessions of the raw keys `ues` (None: every UE) are those of `tables` and their paths,
        and no other; `slots`: path slots these UEs' sessions had or have, emptied unless `tables`
        holds them (a path written before its session was refused is not led to by any session);
        with every UE, every slot holding a path and every uplink entry too (the maps hold the
        sessions of `tables` and nothing else: a refused undo may have left a path and its uplink
        entry, whose UE's packets would go on to the data network). Returns the paths it emptied as
        read just before (slot -> path): an undo writes them again with the DCCP numbers and counts
        packets moved up to then, not those of an earlier read. A
        slot a session leads to that is given a new subflow is written first (netapp.atsss.reclaim).
        DataplaneError when the maps refuse: the caller syncs what it had before."""
        if ues is None:  # every slot holding a path: a refused undo may have left some full
            slots = set(slots) | self._full_slots()
        held = self._held(ues)
        counts = self._ue_filter.taken()  # counted again from the map if this sync fails on the way
        used = {slot for _, value in held.values() for slot in value.path[: value.n_paths]}
        reclaimed = self._reclaim.reclaim(tables.paths, tables.moved.paths, held, used, set(tables.sessions))
        before = self._uplink_keys(sorted(used | set(slots)))
        if ues is None:  # and every uplink entry, of a path the slots hold or not
            before.update((bytes(key), key) for key, _ in self._uplink.items())
        self._write_paths(tables.paths, used, tables.moved)
        self._write_uplinks(tables)
        self._ue_filter.set([key for key, _ in tables.sessions.values()])
        self._write_sessions(tables.sessions, held)
        deleted = [key for raw, (key, _) in held.items() if raw not in tables.sessions]
        self._sessions.delete([key for key in deleted if bytes(key) not in self._reclaim.deleted])
        added = [key for raw, (key, _) in tables.sessions.items() if raw not in held]
        if ues is None:
            self._ue_filter.reset()
        else:
            self._ue_filter.count(counts, added, deleted)
        gone = sorted((used | set(slots)) - set(tables.paths))
        emptied = {slot: path for slot, path in zip(gone, self.paths(gone)) if path is not None and path.family}
        emptied.update(reclaimed)
        self._reclaim.read.update(emptied)  # a write refused after the emptying: the undo carries them
        self._paths.update([(c_uint32(slot), Path()) for slot in gone])
        self._retired.update(gone)
        wanted = {bytes(uplink_key(path)) for path in tables.paths.values()}
        delete_present(self._uplink, [key for raw, key in before.items() if raw not in wanted])
        self._gate.update([(c_uint32(0), c_uint32(1 if self._ue_filter.counts() else 0))])  # any session held
        return emptied

    def _uplink_keys(self, slots: list[int]) -> dict[bytes, UplinkKey]:
        """The uplink keys of the paths the slots hold now (raw key -> key)."""
        keys = [uplink_key(path) for path in self._paths.lookup([c_uint32(slot) for slot in slots])
                if path is not None and path.family]
        return {bytes(key): key for key in keys}

    def _full_slots(self) -> set[int]:
        """The path slots that hold a path now (a read of the whole array: some 65,536 values)."""
        return {int(slot) for slot, path in self._paths.items() if path.family}

    def _write_uplinks(self, tables: AtsssTables) -> None:
        """Each path's uplink entry, written whole (a few bytes: the same value again costs nothing
        that a comparison would save)."""
        self._uplink.update([(uplink_key(tables.paths[slot]), value) for slot, value in tables.uplinks.items()])

    def _held(self, ues: Optional[Iterable[bytes]]) -> dict[bytes, tuple[SessionKey, Session]]:
        if ues is None:
            return {bytes(key): (key, value) for key, value in self._sessions.items()}
        keys = [SessionKey.from_buffer_copy(raw) for raw in set(ues)]
        return {bytes(key): (key, value) for key, value in zip(keys, self._sessions.lookup(keys)) if value is not None}

    def _write_paths(self, wanted: dict[int, Path], used: set[int], moved: Moved) -> None:
        """New paths written whole (their counters zeroed, the slot may have been another's; but for
        `moved`'s, a change's undo writing a path the change emptied: what it received kept), before
        any session leads to them; in a path that sessions lead to, or that an undo writes back where
        it holds its subflow still (`moved`'s: the session leading to it deleted by the change's
        reclaim, netapp.atsss.reclaim, 1.; packets took its numbers up to then, and runs may read it
        yet), the control plane's words that changed stored in place, its DCCP sequence number and
        counters left to the data path. (Not any slot holding the subflow: one a refused undo left
        full would give its counters to the next session given it, maybe another tenant's.)"""
        slots = sorted(wanted)
        now = dict(zip(slots, self._paths.lookup([c_uint32(slot) for slot in slots])))
        live = used | {slot for slot, path in now.items() if slot in moved.paths and path is not None
                       and path.family and subflow(path) == subflow(wanted[slot])}
        fresh = [slot for slot in slots if slot not in live]
        if self._retired & set(fresh):  # a run that read the session that led to one may still read it
            self.wait_readers()  # (and send another UE's packet on its new path): waited for
        changed = [slot for slot in slots
                   if slot in live and (now[slot] is None or _path_part(now[slot]) != _path_part(wanted[slot]))]
        anew = [slot for slot in fresh if slot not in moved.paths]
        self._stats.fill([c_uint32(slot) for slot in anew])  # type: ignore[attr-defined]
        self._rx.update([(c_uint32(slot), PathRx()) for slot in anew])
        self._paths.update([(c_uint32(slot), wanted[slot]) for slot in fresh])
        if changed:
            with self._paths.in_place() as paths:
                for slot in changed:
                    self._write_path_words(paths, slot, wanted[slot])

    @staticmethod
    def _write_path_words(paths: InPlace, slot: int, value: Path) -> None:
        """The path's own words, each an aligned store that a packet reads old or new. A packet
        meanwhile may read some new and some old: the up flag new and the RTT old (both in one
        8-byte word with access and family, so in fact stored together), a new next hop's MAC in
        the template's first word with the source MAC's last bytes old (a frame to the right hop
        with a stray source: the receiver takes it), the IPv6 path's MACs of line 1 in two words
        (a frame to a MAC mixing the two hops: lost, as a frame sent as the neighbour changed
        would be). Each is what the path said before or after, or a frame lost; never a DCCP
        number given twice nor a count lost. A path whose addresses or ports change is a new
        subflow, never stored here: it is given a free slot, or the slot of the path it replaces
        written whole once no packet can still send on that one (netapp.atsss.reclaim)."""
        paths.store(slot, bytes(value), PATH_OWNED)

    def _write_sessions(self, wanted: dict[bytes, tuple[SessionKey, Session]],
                        held: dict[bytes, tuple[SessionKey, Session]]) -> None:
        """New sessions written whole (netapp.atsss.index); a changed one has the control plane's
        words that changed stored in place (`_write_session_words`), its MP_SEQ counter and
        scheduler state left to the data path, or, where the instance has no writer, is written
        whole too (`_carried`), in the same write of the index: a changed session written whole
        makes that write wait for the programs' runs (netapp.atsss.index, 6.), once for them all."""
        changed = [raw for raw, (_, value) in wanted.items()
                   if raw in held and _session_part(held[raw][1]) != _session_part(value)]
        writer = self._sessions.slots.program_fd(SESSION_WRITER) if changed else None  # asked when needed
        whole = self._carried([wanted[raw] for raw in changed]) if writer is None else []
        self._sessions.write([(key, value) for raw, (key, value) in wanted.items() if raw not in held] + whole)
        if writer is None:
            return
        for raw in changed:
            key, value = wanted[raw]
            self._write_session_words(writer, key, held[raw][1], value)

    def _carried(self, entries: list[tuple[SessionKey, Session]]) -> list[tuple[SessionKey, Session]]:
        """Changed sessions to be written whole where the instance has no writer (the fake, where no
        program runs; an instance pinned by an older build whose session maps this build's writer
        cannot run on, which libdpp warned of once), each with its scheduler state as the map has
        it: the index writes it into another slot and back into its own (netapp.atsss.index, 2. and
        6.), its MP_SEQ counter counted on from beyond the one it reads at each write, so that no
        number is given twice."""
        carried = []
        for (key, value), now in zip(entries, self._sessions.lookup([key for key, _ in entries])):
            value = Session.from_buffer_copy(value)
            if now is not None:
                ctypes.memmove(ctypes.addressof(value) + Session.current.offset,
                               ctypes.addressof(now) + Session.current.offset, Session.current.size)
            carried.append((key, value))
        return carried

    def _write_session_words(self, writer: int, key: SessionKey, before: Session, value: Session) -> None:
        """The session's own words stored in place by the data plane's writer (nf/atsss/words.h),
        each one store that a packet reads old or new: the control word (mode, n_paths, flags,
        tx_group, four bytes beside the lock's), the weights (one word), the path slots (two), the
        priorities with the mask of the paths up (one: a path reported down or up again is a
        session change too, its path's flag written first). With more paths than before the positions go first, then the control word
        that counts them; with fewer, the control word first: a packet never takes a position that
        the n_paths it read does not cover with a path written (a path left is emptied only after,
        as a session deleted). Meanwhile a packet may schedule by the new mode over the old
        positions' paths, or the old mode over the new, or mix old and new weights: each a pick
        among the session's paths before or after, its MP_SEQ number taken by atomic add in every
        mode (weighted round-robin's too, under its lock), so never given twice. Weighted
        round-robin's current weights go on: the picks follow the new weights from the next packet."""
        slot = self._sessions.slot(key)
        try:
            verdict = run_once(writer, bytes(session_words(key, slot, before, value)))
        except OSError as exc:
            raise DataplaneError(exc.errno or errno.EIO, SESSION_WRITER, exc.strerror) from exc
        if verdict != XDP_PASS:
            raise DataplaneError(errno.ENOENT, f"{SESSION_WRITER}: the session to change is not in the map "
                                 f"(verdict {verdict})")

    def group_set(self, group: int, ports: dict[int, int], program_fd: ProgramFd) -> None:
        """dpp_atsss_tx[group]: each position of `ports` sends its REDUNDANT copies out of that
        ifindex through the position's copy program, the other positions none; a new inner map,
        put in with one write (a packet broadcast meanwhile finds the old ports or the new)."""
        self._tx.set_each(group, {position: (ifindex, program_fd(f"{COPY_PROG}{position}"))
                                  for position, ifindex in ports.items()})

    def groups_clear(self, groups: Iterable[int]) -> None:
        """The groups lead to no ports (a session still naming one has its copies dropped)."""
        self._tx.delete(groups)

    def requeue(self, program_fd: ProgramFd) -> None:
        """The groups' ports run the instance's copy programs again, after a reload replaced them: a
        DEVMAP entry holds the program it was written with."""
        for group, ports in self.groups_ports().items():
            self.group_set(group, {position: ifindex for position, (ifindex, _) in ports.items()}, program_fd)

    def groups(self) -> list[int]:
        """The entries of dpp_atsss_tx that lead to a group of ports."""
        return self._tx.groups()

    def groups_ports(self) -> dict[int, dict[int, tuple[int, int]]]:
        """dpp_atsss_tx: group -> position -> (ifindex, the id of the program its copies run)."""
        return self._tx.ports()

    # --- reads ---------------------------------------------------------------------------------

    def moved(self, ues: Iterable[bytes], slots: Iterable[int]) -> Moved:
        """The sessions of the raw keys `ues` and the paths the `slots` hold, as the maps have them:
        read before a change, for its undo (AtsssTables.carry); the old paths read by the reclaims
        of earlier changes forgotten (`read_by_reclaim`)."""
        self._reclaim.read.clear()
        slots = sorted(set(slots))
        keys = [c_uint32(slot) for slot in slots]
        moved = Moved({raw: value for raw, (_, value) in self._held(ues).items()})
        for slot, path in zip(slots, self._paths.lookup(keys)):
            if path is not None and path.family:
                moved.paths[slot] = path
        return moved

    def read_by_reclaim(self) -> dict[int, Path]:
        """The old paths the syncs since `moved` read last before writing over their slots (slot ->
        path): after a reclaim's wait, or just before a sync empties a slot; those of a sync refused
        after the read among them: its undo carries their last DCCP numbers, which the read before
        the change is short of."""
        return dict(self._reclaim.read)

    def paths(self, slots: list[int]) -> list[Optional[Path]]:
        return self._paths.lookup([c_uint32(slot) for slot in slots])

    def stats(self, slots: list[int]) -> list[PathCounts]:
        """What each slot's path sent (its entry) and received (summed over the CPUs); zero for a
        slot not read. The received counters summed in numpy over the raw per-CPU values: a poll of
        20,000 paths field by field in Python took a quarter of a second."""
        keys = [c_uint32(slot) for slot in slots]
        per_slot = self._stats.lookup(keys)
        cpus = self._stats.cpus  # type: ignore[attr-defined]
        zero = bytes(ctypes.sizeof(PathStats) * cpus)
        raw = b"".join(bytes(values) if values is not None else zero for values in per_slot)
        received = numpy.frombuffer(raw, dtype=numpy.uint64).reshape(len(slots), cpus, len(STAT_FIELDS))
        sent = [(path.packets, path.bytes) if path is not None else (0, 0) for path in self._paths.lookup(keys)]
        return [PathCounts(*out, *row) for out, row in zip(sent, received.sum(axis=1, dtype=numpy.uint64).tolist())]

    def losses(self, slots: list[int]) -> list[PathLoss]:
        """What each slot's path learnt of its loss from the UE's Ack Vectors (zero for a slot not read)."""
        return [PathLoss(rx.delivered, rx.lost) if rx is not None else PathLoss(0, 0)
                for rx in self._rx.lookup([c_uint32(slot) for slot in slots])]

    def session(self, ue: Address) -> Optional[Session]:
        """The UE's entry, read under its lock."""
        return self._sessions.get(session_key(ue))

