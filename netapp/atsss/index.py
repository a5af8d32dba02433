"""The index of ATSSS's sessions by UE address: dpp_atsss_index4 and dpp_atsss_index6 (buckets of
ways, each way a UE address whole and the slot of its session), dpp_atsss_slots (slot -> the
session) and, for a session whose bucket had no free way, dpp_atsss_sessions (UE address -> the
session), which the data path reads when no way holds the address (nf/atsss/index.h).

Layout. The bucket of an address is the top INDEX_LOG2 bits of its hash (abi.index_bucket: its
words xored, times the UE filter's multiplier); IPv4 buckets hold 7 ways, IPv6 buckets 3, each one
64-byte line. Way i is live when bit i of the bucket's `live` byte is set.

Writes, and why a packet on another CPU never meets a half-written session. Writing an array
element is a copy, not atomic against a program reading it; a hash map's update is (the kernel
swaps in a new element). The program reads a bucket's `live` byte first, then the addresses of the
live ways, then the slot, then the session, within one run (an RCU read-side section). So:

1. A new session is written whole into a slot no way leads to, then its way's address and slot
   are written with the way's bit clear (no reader takes a way whose bit is clear, whatever bytes
   the copy has reached), then the bucket again with the bit set: the `live` byte alone changes,
   and a byte is written whole.
2. A changed session is not written here: netapp.atsss.table stores its own words in place (the
   data plane's writer program), its MP_SEQ counter left to the packets, its slot kept. A held key
   given to `write` again (where the instance has no such writer: the fake, one pinned by an older
   build; or a test) is never written over itself: the copy of a value is not atomic, and a
   session's value holds a lock, so its array cannot be mapped for word stores either; a packet
   could read the new n_paths with the old path[]. It is written whole into another free slot, its
   address and that slot into another clean way of the bucket, and one write of `live` sets the
   new way's bit and clears the old's: a reader finds the old session or the new, each whole.
   With no clean way left in the bucket, the new session goes into dpp_atsss_sessions first,
   then the old way's bit is cleared (a reader finds the way before, the hash after), and the
   write waits and moves it back into the way it left (5., `_move_back`). Its MP_SEQ
   counter counts on from MP_SEQ_SKIP numbers beyond the held session's as read at the write
   (`counting_on`), whatever the value given says: packets take numbers from the held one until
   the new one is live, and the caller read it earlier. It has left its paired slot (6.): the
   write waits and moves it back.
3. A deleted session's way has its bit cleared (the `live` byte alone); a session in the hash is
   deleted from it.
4. A way whose bit was cleared, and the slot it led to, are written again (for another address,
   another session) only once the kernel has waited for every program run that began before
   (`Table.wait_readers`, an RCU grace period): no run that took the way is still reading it or
   its session. The wait is made at most once a write or delete (a sync makes one of each, and a
   delete more where its reclaim deletes a session, netapp.atsss.reclaim), only when a free way or
   slot is lacking (or the slot a new session would rather have, 6., is retired), and it frees
   every retired one at once (a move's own wait, 5., aside).
5. A session in the hash moves into a way of its bucket once one is clean (a way of the bucket
   deleted, its own write again, 2., or at `load`): written whole into a free slot, its way written
   and made live as a new session's (1.), then, once the kernel has waited for every program run
   that began before, its hash entry deleted. A reader finds the way before the hash, so every
   packet finds the session, in the way or in the hash, never neither. Its MP_SEQ counter cannot be
   handed over exactly: a packet that found the hash entry before the way was live takes its number
   from the hash's counter after the control plane read it. So the way's session counts on from
   MP_SEQ_SKIP numbers beyond the hash's as read, and no number is given twice as long as fewer
   packets than that took one from the hash meanwhile (checked after the wait, and logged if not);
   the UE's receiver sees the numbers skipped never come, a hole it passes over as it does a loss.
6. A new session (or one moved in, 5.) takes, when it is free, the slot whose pair of path slots
   holds its first path (`paired_slot`: slot s pairs path slots 2s - 1 and 2s, the pair the
   store gives a new two-path session, admission.paired_slots), else the lowest free one: a
   retired paired slot is not waited for (`_free_slot`), so a session given the pair a delete
   just freed (the store passes over such pairs while it can, admission.PASSED_OVER, but not past
   that) is served unpaired, through path[], and so, for a moment, is a session written
   again (2.), which leaves its slot while packets read it. Either moves into its paired slot at
   the end of the first write that waits (4.) once the slot is free; the write of a session again
   waits for that itself (`_regain_pairs`; a second time if it had waited before retiring the
   slot): left to an unrelated write's wait, which a session's own writes rarely make, a session
   changed often was unpaired most of the time. That wait costs the write a grace period (6-20
   ms on a 2-CPU VM), only where a changed session is written whole (2.: an instance without the
   writer); a new session given a retired pair is not worth one, as above. The move, as a held
   key's write (2.): whole into the slot, its way written clean and made live in the one write of
   `live` that retires its old way and slot. Its MP_SEQ counter counts on from MP_SEQ_SKIP numbers
   beyond the old slot's as read, as a session moved from the hash does (5.), with no wait of its
   own (the old slot is not written again before the next wait), and unlike that move's not checked
   after one (`_check_numbers`): MP_SEQ_SKIP numbers would have to be taken from the old slot in the
   microseconds between its read and the `live` write; a bucket with no clean way leaves
   it where it is until a later wait. Which sessions are unpaired is known from the writes
   since the shadow was read: one an earlier run left unpaired stays so until written again.
   The downlink requests those two paths' lines with the session's (nf/atsss/index.h,
   atsss_touch_paths), from the slot the bucket gives, before the session's path[] says which
   path it takes: the session's line and its path's are then fetched together, not one after the
   other. A session in another slot is only slower (its paths fetched after its line), not wrong:
   the data path takes its paths from path[] whatever the slot.

Start (`load`): the buckets and the hash are read whole (a few hundred KiB), the live ways are the
sessions held; a live way that cannot be right (its address of another bucket, a second way of one
address, a slot out of range) is cleared, a hash entry of an address a way holds is deleted, and
every slot no live way leads to is taken as retired (an earlier run may have just left it); the
hash's sessions whose bucket has a clean way are moved into it (5.). A shadow read for a read
(`get`, `lookup`, `items` before any write) makes no move: they are made by the first write.
"""

from __future__ import annotations

import contextlib
import ctypes
import heapq
import ipaddress
import logging
import struct
from ctypes import c_uint32
from typing import Callable, Iterable, Iterator, Optional, Union

from netapp.atsss.abi import (DCCP_SEQ_BITS, INDEX4_WAYS, INDEX6_WAYS, INDEX_BUCKETS, INDEX_LOG2, MAX_SESSIONS,
                              Index4, Index6, Session, SessionKey, index_bucket, paired_session_slot)
from netapp.dataplane.tables import Table

Bucket = Union[Index4, Index6]
Where = tuple[int, int, int]  # (family, bucket, way) of a live way
WAYS = {4: INDEX4_WAYS, 6: INDEX6_WAYS}
BUCKET_TYPES = {4: Index4, 6: Index6}
# MP_SEQ numbers a session moved from the hash into a way skips (5.): more than the packets to one
# UE in the control plane's few writes between its read of the hash's counter and the way's
# publication, the control plane's thread preempted meanwhile included (2^20: 100 ms of one core's
# 10 Mpps to a single UE; tests/atsss/test_index_in_flight.py saw some 300 in an unpreempted move)
MP_SEQ_SKIP = 1 << 20
# The MP_SEQ number of a session's counter: its top bits count a round-robin's own turns on a
# session with flow rules (dataplane/bpf/nf/atsss/schedule.h, ATSSS_TURN_SHIFT)
MP_SEQ_MASK = (1 << DCCP_SEQ_BITS) - 1
log = logging.getLogger(__name__)


def bucket_of(key: SessionKey) -> int:
    return index_bucket(tuple(key.addr))


def way_address(bucket: Bucket, family: int, way: int) -> tuple[int, ...]:
    """The address words a way holds, as a session key's four words."""
    if family == 4:
        return (bucket.addr[way], 0, 0, 0)
    return tuple(bucket.addr[way])


def set_way(bucket: Bucket, key: SessionKey, way: int, slot: int) -> None:
    """The way's address and slot in `bucket` (its live bit untouched)."""
    if key.family == 4:
        bucket.addr[way] = key.addr[0]
    else:
        bucket.addr[way][:] = key.addr[:]
    bucket.slot[way] = slot


def way_key(family: int, words: tuple[int, ...]) -> SessionKey:
    key = SessionKey(family=family)
    key.addr[:] = words
    return key


def key_address(key: SessionKey) -> str:
    """The UE address of a session key, as text."""
    words = struct.pack("=4I", *key.addr)
    return str(ipaddress.ip_address(words[:4] if key.family == 4 else words))


def way_holding(bucket: Bucket, key: SessionKey) -> Optional[int]:
    """The live way of the bucket that holds the key's address, or None."""
    for way in range(WAYS[key.family]):
        if bucket.live & 1 << way and way_address(bucket, key.family, way) == tuple(key.addr):
            return way
    return None


def paired_slot(value: Optional[Session]) -> Optional[int]:
    """The slot the session would rather have: the one whose pair of path slots holds its first path
    (abi.paired_session_slot), which the downlink requests with the session's line (nf/atsss/index.h,
    atsss_touch_paths); None for a session without paths, or whose pair is past the slots."""
    if value is None or not value.n_paths:
        return None
    slot = paired_session_slot(value.path[0])
    return slot if 0 < slot < MAX_SESSIONS else None


def counting_on(value: Session, held: Session) -> Session:
    """`value` with its MP_SEQ counter MP_SEQ_SKIP numbers beyond `held`'s, the session it replaces
    as read just before (2.): packets took numbers from `held` since any earlier read, and go on
    taking them until the new one is live."""
    value = Session.from_buffer_copy(value)
    value.mp_seq = held.mp_seq + MP_SEQ_SKIP
    return value


def put_at_once(bucket: Bucket, key: SessionKey, slot: int) -> bool:
    """The key's way (its own, or the first not live) made to lead to `slot`, live at once; False
    when the bucket has no room. Only where no program runs meanwhile (a benchmark's or a test's
    setup): the writes of SessionIndex are what keeps a running reader safe."""
    way = way_holding(bucket, key)
    if way is None:
        way = next((way for way in range(WAYS[key.family]) if not bucket.live & 1 << way), None)
    if way is None:
        return False
    set_way(bucket, key, way, slot)
    bucket.live |= 1 << way
    return True


class FreeSlots:
    """Slots of dpp_atsss_slots free to take: the lowest, or one asked for, each in O(log n) (a
    session's paired slot asked for by membership in a list was a scan of 16,384 a write). A slot
    taken out of turn stays in the heap until it comes up, and is passed over then."""

    def __init__(self, slots: Iterable[int] = ()):
        self._free = set(slots)
        self._heap = sorted(self._free)  # a sorted list is a heap

    def __bool__(self) -> bool:
        return bool(self._free)

    def __contains__(self, slot: int) -> bool:
        return slot in self._free

    def add(self, slot: int) -> None:
        if slot not in self._free:
            self._free.add(slot)
            heapq.heappush(self._heap, slot)

    def take(self, wanted: Optional[int] = None) -> Optional[int]:
        """`wanted` when it is free, else the lowest free slot; None when none is."""
        if wanted is not None and wanted in self._free:
            self._free.discard(wanted)
            return wanted
        while self._heap:
            slot = heapq.heappop(self._heap)
            if slot in self._free:
                self._free.discard(slot)
                return slot
        return None

    def union(self, slots: Iterable[int]) -> FreeSlots:
        return FreeSlots(self._free | set(slots))


class SessionIndex:
    """The sessions of the data path by UE address, in the index and the hash, written in the order
    above; a shadow of the buckets and of which ways and slots are held, retired or free, read from
    the maps whole at first use."""

    def __init__(self, table_of: Callable[[str], Table], waited: Callable[[], None] = lambda: None):
        self._buckets = {4: table_of("dpp_atsss_index4"), 6: table_of("dpp_atsss_index6")}
        self._on_wait = waited  # told after each wait for the programs' runs (AtsssMaps: its slots retired)
        self._slots = table_of("dpp_atsss_slots")
        self.hash = table_of("dpp_atsss_sessions")
        self._loaded = False
        self._bucket: dict[tuple[int, int], Bucket] = {}  # (family, bucket) -> its value, as written
        self._where: dict[bytes, Where] = {}  # raw key -> its live way
        self._hashed: dict[tuple[int, int], set[bytes]] = {}  # (family, bucket) -> raw keys of its sessions in the hash
        self._retired_ways: set[Where] = set()  # cleared, a program run may still read them
        self._retired_slots: set[int] = set()  # led to by a retired way
        self._free_slots = FreeSlots()  # free since a wait
        self._unpaired: dict[bytes, int] = {}  # raw key -> the paired slot of a session in another (6.)
        self._waited = False  # waited for the programs' runs in this write
        self._moves_due = False  # the hash's sessions not yet moved into clean ways since a read

    # --- the shadow ------------------------------------------------------------------------------

    def load(self) -> None:
        """The shadow read from the maps (`_read`), then the hash's sessions whose bucket has a
        clean way moved into it (5.: writes, and a wait for the programs' runs)."""
        self._read()
        with self._reloaded_on_error():
            self._move_pending()

    def _read(self) -> None:
        """The shadow read from the maps (at first use: the pinned maps an earlier run left), the
        ways that cannot be right cleared, the hash's copies of indexed addresses deleted. The moves
        into clean ways are left to the first write (_move_pending), not made by a read: a second
        SessionIndex over the same maps that only reads (a test's, a tool's) would otherwise move a
        session behind the first's shadow, which would go on writing it in the hash it left."""
        self._bucket, self._where, self._retired_ways = {}, {}, set()
        used: set[int] = set()
        for family, table in self._buckets.items():
            for raw_index, value in table.items():
                if any(bytes(value)):
                    index = int(getattr(raw_index, "value", raw_index))
                    self._bucket[(family, index)] = value
                    self._learn(family, index, value, used)
        self._free_slots, self._waited, self._unpaired = FreeSlots(), False, {}
        self._retired_slots = set(range(1, MAX_SESSIONS)) - used  # freed by the first wait
        hashed = [key for key, _ in self.hash.items()]
        self.hash.delete([key for key in hashed if bytes(key) in self._where])
        self._hashed = {}
        for key in hashed:
            if bytes(key) not in self._where and key.family in WAYS:
                self._hashed.setdefault((key.family, bucket_of(key)), set()).add(bytes(key))
        self._loaded, self._moves_due = True, True

    def _move_pending(self) -> None:
        """The moves the read of the shadow left (_read), made once."""
        if self._moves_due:
            self._moves_due = False
            self._move_in(list(self._hashed))

    def _learn(self, family: int, index: int, value: Bucket, used: set[int]) -> None:
        """The bucket's live ways taken as held, or cleared when they cannot be right."""
        live = value.live
        for way in range(WAYS[family]):
            if not live & 1 << way:
                if value.slot[way]:
                    self._retired_ways.add((family, index, way))
                continue
            key = way_key(family, way_address(value, family, way))
            slot = value.slot[way]
            if bucket_of(key) != index or bytes(key) in self._where or not 0 < slot < MAX_SESSIONS or slot in used:
                value.live &= ~(1 << way)
                self._retired_ways.add((family, index, way))
                continue
            self._where[bytes(key)] = (family, index, way)
            used.add(slot)
        if value.live != live:
            self._buckets[family].update([(c_uint32(index), value)])

    @property
    def slots(self) -> Table:
        """dpp_atsss_slots, whose sessions a changed session is written into in place (netapp.atsss.table)."""
        return self._slots

    def _ensure(self) -> None:
        if not self._loaded:
            self._read()

    def _bucket_value(self, family: int, index: int) -> Bucket:
        return self._bucket.setdefault((family, index), BUCKET_TYPES[family]())

    # --- reads -----------------------------------------------------------------------------------

    def items(self) -> Iterator[tuple[SessionKey, Session]]:
        """Every session held (the index's, then the hash's)."""
        self._ensure()
        raws = list(self._where)
        yield from zip([SessionKey.from_buffer_copy(raw) for raw in raws], self._values(raws))
        yield from self.hash.items()

    def lookup(self, keys: list[SessionKey]) -> list[Optional[Session]]:
        """The sessions of the keys, where they are held (None: none)."""
        self._ensure()
        indexed = [bytes(key) for key in keys if bytes(key) in self._where]
        found = dict(zip(indexed, self._values(indexed)))
        rest = [key for key in keys if bytes(key) not in found]
        found.update(zip([bytes(key) for key in rest], self.hash.lookup(rest)))
        return [found[bytes(key)] for key in keys]

    def get(self, key: SessionKey) -> Optional[Session]:
        return self.lookup([key])[0]

    def slot(self, key: SessionKey) -> Optional[int]:
        """The slot of dpp_atsss_slots the key's way leads to, or None (in the hash, or none)."""
        self._ensure()
        where = self._where.get(bytes(key))
        return None if where is None else self._bucket[where[:2]].slot[where[2]]

    def _values(self, raws: list[bytes]) -> list[Optional[Session]]:
        slots = [self._bucket[self._where[raw][:2]].slot[self._where[raw][2]] for raw in raws]
        return self._slots.lookup([c_uint32(slot) for slot in slots])

    # --- writes ----------------------------------------------------------------------------------

    def write(self, entries: Iterable[tuple[SessionKey, Session]]) -> None:
        """Each session written as new, or in place of the key's held one (never over it)."""
        with self._reloaded_on_error():
            self._write(entries)

    def delete(self, keys: Iterable[SessionKey]) -> None:
        """The keys' sessions gone: their ways' bits cleared (retired), or their hash entries deleted."""
        with self._reloaded_on_error():
            self._delete(keys)

    @contextlib.contextmanager
    def _reloaded_on_error(self) -> Iterator[None]:
        """A write, the moves a read of the shadow left made first; a write the maps refused part of
        leaves the shadow to be read again from them."""
        self._ensure()
        try:
            self._move_pending()
            yield
        except BaseException:
            self._loaded = False
            raise

    def _write(self, entries: Iterable[tuple[SessionKey, Session]]) -> None:
        self._waited = False
        entries = list(entries)
        held = self._held(entries)
        hashed = {raw for raw in held if raw not in self._where}
        left: set[int] = set()  # the paired slots rewritten sessions left (6.)
        spilled: set[tuple[int, int]] = set()  # the buckets of held sessions now in the hash (2.)
        for key, value in entries:
            now = held.get(bytes(key))
            value = counting_on(value, now) if now is not None else value
            if bytes(key) in hashed:
                self.hash.update([(key, value)])  # the kernel's replace is whole
            elif self._place(key, value, self._where.get(bytes(key))):
                left.add(self._unpaired[bytes(key)])
            if now is not None and bytes(key) not in self._where:
                spilled.add((key.family, bucket_of(key)))
        self._move_back(spilled)
        self._regain_pairs(left)

    def _held(self, entries: list[tuple[SessionKey, Session]]) -> dict[bytes, Session]:
        """The sessions the entries' keys hold now, in the index or the hash (raw key -> session)."""
        indexed = [bytes(key) for key, _ in entries if bytes(key) in self._where]
        unindexed = [key for key, _ in entries if bytes(key) not in self._where]
        held = {bytes(key): value for key, value in zip(unindexed, self.hash.lookup(unindexed)) if value is not None}
        held.update((raw, value) for raw, value in zip(indexed, self._values(indexed)) if value is not None)
        return held

    def _move_back(self, buckets: set[tuple[int, int]]) -> None:
        """The held sessions of `buckets` that are in the hash moved back into the ways their writes
        retired (2.: a full bucket), in the same write: it waits (a second time, if it had before the
        ways were retired), then moves them as a session the hash held (5.). Left to a delete in the
        bucket, a session changed once stayed in the hash, a lookup more for each packet, until then."""
        buckets = {(family, index) for family, index in buckets
                   if self._bucket_value(family, index).live != (1 << WAYS[family]) - 1}  # a way not live
        if buckets:
            self._waited = False
            self.wait()
            self._move_in(sorted(buckets))

    def _regain_pairs(self, left: set[int]) -> None:
        """The sessions served unpaired moved into their paired slots (_pair_unpaired) once this
        write has waited; it waits when a session written again left its paired slot, retired (6.):
        a second wait if this write waited before that slot was retired."""
        if left & self._retired_slots:
            self._waited = False
            self.wait()
        self._pair_unpaired()

    def _delete(self, keys: Iterable[SessionKey]) -> None:
        self._waited = False
        hashed, freed = [], []
        for key in keys:
            where = self._where.pop(bytes(key), None)
            self._unpaired.pop(bytes(key), None)
            if where is None:
                hashed.append(key)
                self._hashed.get((key.family, bucket_of(key)), set()).discard(bytes(key))
                continue
            family, index, way = where
            bucket = self._bucket[(family, index)]
            bucket.live &= ~(1 << way)
            self._buckets[family].update([(c_uint32(index), bucket)])
            self._retire(where)
            freed.append((family, index))
        self.hash.delete(hashed)
        self._move_in(freed)
        self._pair_unpaired()

    def _place(self, key: SessionKey, value: Session, old: Optional[Where]) -> bool:
        """The session in a free slot and a clean way of its bucket (the old way, if any, retired in
        the same write of `live`), or in the hash when the bucket has no clean way. True when a
        session written again is now served outside its paired slot while that slot is retired
        (its own old slot, or one a delete left): free after a wait."""
        family, index = key.family, bucket_of(key)
        way = self._clean_way(family, index)
        slot = self._free_slot(paired_slot(value)) if way is not None else None
        bucket = self._bucket_value(family, index)
        indexed = way is not None and slot is not None
        if indexed:
            self._write_way(key, value, way, slot)
        else:
            self.hash.update([(key, value)])
            self._where.pop(bytes(key), None)
            self._unpaired.pop(bytes(key), None)
            self._hashed.setdefault((family, index), set()).add(bytes(key))
        if old is not None:
            bucket.live &= ~(1 << old[2])
            self._retire(old)
        if indexed or old is not None:
            self._buckets[family].update([(c_uint32(index), bucket)])  # one byte: the new way live, the old not
        return old is not None and self._unpaired.get(bytes(key)) in self._retired_slots

    def _write_way(self, key: SessionKey, value: Session, way: int, slot: int) -> None:
        """The session whole in `slot`, then its way's address and slot with the way's bit clear; the
        bit set in the shadow only, for the caller's next write of the bucket (1.)."""
        family, index = key.family, bucket_of(key)
        bucket = self._bucket_value(family, index)
        self._slots.update([(c_uint32(slot), value)])
        set_way(bucket, key, way, slot)
        self._buckets[family].update([(c_uint32(index), bucket)])  # the way written, its bit clear
        bucket.live |= 1 << way
        self._where[bytes(key)] = (family, index, way)
        wanted = paired_slot(value)
        if wanted is not None and wanted != slot:
            self._unpaired[bytes(key)] = wanted
        else:
            self._unpaired.pop(bytes(key), None)

    def _move_in(self, buckets: Iterable[tuple[int, int]]) -> None:
        """The hash's sessions of `buckets` moved into the clean ways the buckets have (5.): each made
        live in its way, then, after one wait for the programs' runs, every moved one's hash entry
        deleted."""
        moved: list[tuple[SessionKey, int]] = []  # (key, the first MP_SEQ number of its way's session)
        for family, index in dict.fromkeys(buckets):
            hashed = self._hashed.get((family, index), set())
            for raw in sorted(hashed):
                way = self._clean_way(family, index)
                if way is None:
                    break
                key = SessionKey.from_buffer_copy(raw)
                value = self.hash.get(key)
                slot = self._free_slot(paired_slot(value))
                if slot is None:
                    break
                hashed.discard(raw)
                if value is None:  # not in the hash (an earlier run's shadow): nothing to move
                    self._free_slots.add(slot)
                    continue
                value.mp_seq += MP_SEQ_SKIP
                self._write_way(key, value, way, slot)
                self._buckets[family].update([(c_uint32(index), self._bucket[(family, index)])])  # live
                moved.append((key, value.mp_seq))
        if moved:
            self._slots.wait_readers()  # no run still reads a moved session's hash entry
            self._on_wait()
            self._check_numbers(moved)
            self.hash.delete([key for key, _ in moved])

    def _pair_unpaired(self) -> None:
        """After a write that waited (4.), the sessions served unpaired whose paired slot is free
        moved into it (6.)."""
        if not self._waited:
            return
        for raw, wanted in list(self._unpaired.items()):
            family, index, old = self._where[raw]
            way = self._clean_way(family, index) if wanted in self._free_slots else None
            if way is None:
                continue
            bucket = self._bucket[(family, index)]
            value = self._slots.lookup([c_uint32(bucket.slot[old])])[0]
            if value is None:  # unreadable: left where it is
                continue
            value.mp_seq += MP_SEQ_SKIP
            self._free_slots.take(wanted)
            self._write_way(SessionKey.from_buffer_copy(raw), value, way, wanted)
            bucket.live &= ~(1 << old)
            self._retire((family, index, old))
            self._buckets[family].update([(c_uint32(index), bucket)])  # one byte: the new way live, the old not

    def _check_numbers(self, moved: list[tuple[SessionKey, int]]) -> None:
        """Logged: a moved session whose hash entry's counter passed where its way's began (more
        packets than MP_SEQ_SKIP took a number from the hash before the way was live)."""
        for (key, first), last in zip(moved, self.hash.lookup([key for key, _ in moved])):
            if last is not None and last.mp_seq & MP_SEQ_MASK > first & MP_SEQ_MASK:
                log.warning("ATSSS session of UE %s moved from the hash into the index: MP_SEQ numbers %d..%d "
                            "were given twice", key_address(key), first & MP_SEQ_MASK, (last.mp_seq - 1) & MP_SEQ_MASK)

    def _retire(self, where: Where) -> None:
        self._retired_ways.add(where)
        self._retired_slots.add(self._bucket[where[:2]].slot[where[2]])

    def _clean_way(self, family: int, index: int) -> Optional[int]:
        """The first way of the bucket neither live nor retired; if none but retired ones, the first
        after waiting for the programs' runs (once a write)."""
        bucket = self._bucket_value(family, index)
        for way in range(WAYS[family]):
            if not bucket.live & 1 << way and (family, index, way) not in self._retired_ways:
                return way
        if any((family, index, way) in self._retired_ways for way in range(WAYS[family])) and self.wait():
            return self._clean_way(family, index)
        return None

    def _free_slot(self, wanted: Optional[int] = None) -> Optional[int]:
        """A free slot: `wanted` when it is free already, else the lowest (the session then served
        unpaired, its paths from path[], until a write that waits moves it: _pair_unpaired); None
        when there is none. A retired `wanted` is not waited
        for: the store may give a new session the pair a delete just freed (past admission.
        PASSED_OVER retired path slots), whose slot is retired until a wait, and a grace period
        under the service's lock for such a create costs more than a fetch of the paths after the
        session's line."""
        lacking = not self._free_slots
        if lacking and self._retired_slots and not self._waited:
            self.wait()
        return self._free_slots.take(wanted)

    def wait(self) -> bool:
        """Every way and slot retired so far made free, once no program run can still read them;
        False when it was waited for already in this write (nothing more to free)."""
        if self._waited:
            return False
        self._waited = True
        self._slots.wait_readers()
        self._on_wait()
        self._retired_ways.clear()
        self._free_slots = self._free_slots.union(self._retired_slots)
        self._retired_slots = set()
        return True


assert ctypes.sizeof(Index4) == ctypes.sizeof(Index6) == 64, "a bucket is one line (include/dpp/nf/atsss.h)"
assert INDEX_BUCKETS == 1 << INDEX_LOG2
