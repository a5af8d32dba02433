"""dpp_upf_dl4: the downlink of the UE IPv4 addresses the SMF gives (those the UPF assigns are in
dpp_upf_ue4, netapp.upf.pools), a set-associative table the data path looks up with inlined array
lookups instead of dpp_upf_downlink's hash (dataplane/bpf/nf/upf/upf.h, upf_dl4_pdr).

Layout. Slot = bucket * WAYS + way. The bucket of (network instance, address) is the top `bits`
bits of the address (host order) times DL4_HASH_MUL, xor the instance, and `bits` is such that
every instance the table holds is below 1 << bits: an address's buckets in two instances differ, so
the bucket and the address give back the instance, and a way keeps only the address (in its
action's `ue_addr`, the action's padding) to be one cache line. An entry takes the first clean way
of its bucket; with none (every way held, or retired and not yet waited for, below) it goes to
dpp_upf_downlink, and dpp_upf_downlink_state says the hash may hold IPv4 entries before it gets one.
An entry stays where it was put: only `plan(..., compact=True)` (the start-up reconcile) moves the
hash's into clean ways. IPv6 addresses, and instances past 1 << bits, stay in the hash.

Placement. A change's buckets and ways are chosen by libdpp (dpp_upf_dl4_buckets, dpp_upf_dl4_place:
arrays of the keys, and a byte a slot of the shadow below, `_state`), one call each a change: a group
of establishments places some 64 entries at a time. `plan_in_python` makes the same decisions in
Python: it is the reference (tests/upf/test_ways_place.py runs both over varied tables) and what
places where libdpp cannot be loaded.

Writes, and why a reader on another CPU never acts on a torn or a wrong entry. Writing an array
element is a copy, not atomic against a program reading it. The program reads a way's ENTRY bit
first, then its address, then its action, within one run (an RCU read-side section). So:

1. A way is published in two writes: its whole value with ENTRY clear (no reader can take it: the
   bit is clear before and after the copy, whatever bytes the copy has reached), then the same value
   with ENTRY set, which changes the flags byte alone: a reader sees no entry, or all of the new one
   (the first write's stores are visible before the second's: x86-64 keeps stores in order).
2. A way is retired by its value with ENTRY clear, the flags byte alone again: a reader that read
   the bit set before goes on reading the whole entry, untouched.
3. A retired way is written again (for another address, or another action of its own) only once
   the kernel has waited for every program run that began before (`Table.wait_readers`, an RCU
   grace period): no run that took the way before it was retired is still reading it.

So an entry's action is never written over itself: a changed action is published in another clean
way of the bucket (or the hash), then the old way is retired; a reader meanwhile finds either one,
each whole. An undo retires the ways it had published and publishes again those it had retired
(their values are intact: they are only rewritten after a wait, in a later change). A grace period
takes some milliseconds: it is waited for at most once a change, only when an entry would otherwise
go to the hash for lack of a clean way while its bucket has retired ones, and it cleans every
retired way at once. dpp_upf_teids and dpp_upf_ue4 need none of this: a slot there is one key's
(a TEID, a pool address the UPF gives) and no other key ever uses it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import sys
from ctypes import Array, c_int32, c_uint8, c_uint32
from typing import Collection, Iterable, Optional, Sequence

from netapp.dataplane.binding import DataplaneError, Libdpp, load_libdpp
from netapp.dataplane.tables import Table
from netapp.service.transaction import SiteChange
from netapp.upf.abi import (
    DL4_HASH_MUL,
    DL4_HASHED,
    DL4_PUBLISHED,
    DL4_RETIRED,
    DL4_STAYS,
    DL4_STRAY,
    DL4_WAYS,
    PdrAction,
    PdrFlag,
)

log = logging.getLogger("netapp.upf")

Key = tuple[int, int, bytes]  # netapp.upf.compiler.DownlinkKey: (instance, family, address in 16 bytes)
MAX_BITS = 30  # a slot (bucket * WAYS + way) must fit in 32 bits
_ENTRY = int(PdrFlag.ENTRY)
_FLAGS_AT = PdrAction.flags.offset  # a byte (struct dpp_upf_pdr's __u8 flags): translated as one
_SET_ENTRY = bytes(flags | _ENTRY for flags in range(256))  # a flags byte -> the same with ENTRY set
_CLEAR_ENTRY = bytes(flags & ~_ENTRY for flags in range(256))


def table_bits(slots: int) -> int:
    """log2 of the buckets the program uses of a table of `slots` slots: the largest power of two of
    whole buckets; 0 (the table unused) below two buckets."""
    buckets = slots // DL4_WAYS
    return min(buckets.bit_length() - 1, MAX_BITS) if buckets >= 2 else 0


def bucket_of(instance: int, address: int, bits: int) -> int:
    """The bucket of a UE IPv4 address (host order) in a network instance (bpf: dl4_bucket)."""
    return ((((address * DL4_HASH_MUL) & 0xFFFFFFFF) << bits) >> 32) ^ instance


def _address(key: Key) -> int:
    return int.from_bytes(key[2][:4], "big")


@dataclasses.dataclass
class Plan:
    """What a change does to dpp_upf_dl4 and which entries it leaves in dpp_upf_downlink."""

    publish: dict[int, tuple[Key, PdrAction]] = dataclasses.field(default_factory=dict)  # slot -> new entry
    retire: dict[int, tuple[Key, PdrAction]] = dataclasses.field(default_factory=dict)  # slot -> its entry
    hashed_before: dict[Key, PdrAction] = dataclasses.field(default_factory=dict)
    hashed_after: dict[Key, PdrAction] = dataclasses.field(default_factory=dict)


class Ways:
    """Where dpp_upf_dl4 holds each entry and which ways are clean (neither held, nor retired, nor
    a stray an earlier run left), known bucket by bucket as they are first read; and the values that
    place and remove entries, which the applier (netapp.upf.applier) writes in the order above, with
    their undo."""

    def __init__(self, table: Table, native: bool = True):
        self._table = table
        self.bits = table_bits(table.max_entries)
        self._lib = _placer() if native else None  # None: `plan_in_python` places
        # the shadow as libdpp reads it: a byte a slot, DL4_PUBLISHED, RETIRED, STRAY (`_restate`)
        self._state = bytearray(table.max_entries)
        self._state_c = (c_uint8 * len(self._state)).from_buffer(self._state)
        self._known: set[int] = set()  # the buckets read (or written) since the table was last read whole
        self._slot_of: dict[Key, int] = {}  # the entries the table holds -> their way
        self._key_of: dict[int, Key] = {}  # the ways published -> their entry
        self._retired: set[int] = set()  # ways retired that a program run may still read
        self._strays: set[int] = set()  # ways published that no entry may hold: retired by `load`
        self._waited = False  # this plan has waited for the programs' runs
        self._value_at: dict[int, PdrAction] = {}  # the published ways just read (`_learn`)

    def fits(self, key: Key) -> bool:
        """The entry may go to the table: an IPv4 address of an instance below 1 << bits."""
        return self.bits > 0 and key[1] == 4 and key[0] < (1 << self.bits)

    def holding(self, keys: list[Key]) -> list[Key]:
        """Those of `keys` the table holds (their buckets read if not known yet)."""
        if not self._all_known():
            if self._lib is None:
                self._read({self._bucket(key) for key in keys if self.fits(key)} - self._known)
            else:
                self._read(set(self._buckets(keys)) - {DL4_HASHED} - self._known)
        return [key for key in keys if key in self._slot_of]  # a key held is one that fits

    def _all_known(self) -> bool:
        """Every bucket read (after the start-up reconcile, as a running UPF has it): none to read."""
        return self.bits > 0 and len(self._known) == 1 << self.bits

    def plan(self, before: dict[Key, PdrAction], after: dict[Key, PdrAction],
             hashed: Optional[dict[Key, PdrAction]] = None, compact: bool = False) -> Plan:
        """The change from `before` to `after`: an entry the table holds with the same action stays,
        any other goes to a clean way of its bucket, or to the hash (where one there stays, unless
        `compact`); held ones that go or change are retired. `hashed`: what the hash holds (by
        default the entries of `before` the table does not hold). May wait for the programs' runs.
        The buckets and ways chosen by libdpp (`plan_in_python` where it is not loaded)."""
        if self._lib is None:
            return self.plan_in_python(before, after, hashed, compact)
        keys = list(after)
        buckets = self._buckets(keys)
        if not self._all_known():
            self._read(({*buckets, *self._buckets(list(before))} - {DL4_HASHED}) - self._known)
        held = {key: action for key, action in before.items() if key in self._slot_of} if before else {}
        held.update(self._left_behind([key for key in after if key not in before and key in self._slot_of]))
        hashed = hashed if hashed is not None else {key: a for key, a in before.items() if key not in held}
        plan = Plan(hashed_before=dict(hashed))
        if held or (hashed and not compact):
            for index, key in enumerate(keys):
                if key in held and bytes(held[key]) == bytes(after[key]):
                    buckets[index] = DL4_STAYS
                elif not compact and key in hashed:
                    buckets[index] = DL4_HASHED
        ways = self._place(buckets)
        for key, way in zip(keys, ways):
            if way >= 0:
                plan.publish[way] = (key, after[key])
            elif way == DL4_HASHED:
                plan.hashed_after[key] = after[key]
        for key, action in held.items():
            if key not in after or bytes(after[key]) != bytes(action):
                plan.retire[self._slot_of[key]] = (key, action)
        return plan

    def _buckets(self, keys: list[Key]) -> Array[c_int32]:
        """Each key's bucket, DL4_HASHED where the table cannot hold it (dpp_upf_dl4_buckets)."""
        count = len(keys)
        buckets = (c_int32 * count)()
        if count:
            addresses = b"".join([key[2] for key in keys])
            if len(addresses) != 16 * count:  # some key's address not as the compiler packs it
                addresses = b"".join([key[2][:16].ljust(16, b"\0") for key in keys])
            _checked(self._lib.dpp_upf_dl4_buckets((c_uint32 * count)(*[key[0] for key in keys]),
                                                   bytes([key[1] for key in keys]), addresses, count, self.bits,
                                                   buckets), "dpp_upf_dl4_buckets")
        return buckets

    def _place(self, buckets: Array[c_int32]) -> Array[c_int32]:
        """The ways of the buckets' entries in order (dpp_upf_dl4_place): a way, DL4_HASHED or
        DL4_STAYS each; waits for the programs' runs once, where an entry finds no clean way but
        retired ones, and places it and those after it again."""
        self._waited = False
        count = len(buckets)
        ways = (c_int32 * count)()
        place = self._lib.dpp_upf_dl4_place
        at = _checked(place(buckets, count, self._state_c, len(self._state), 0, 1, ways), "dpp_upf_dl4_place")
        if at < count:
            self.wait()
            _checked(place(buckets, count, self._state_c, len(self._state), at, 0, ways), "dpp_upf_dl4_place")
        return ways

    def plan_in_python(self, before: dict[Key, PdrAction], after: dict[Key, PdrAction],
                       hashed: Optional[dict[Key, PdrAction]] = None, compact: bool = False) -> Plan:
        """`plan`, every decision made in Python: the reference libdpp's placement is tested against."""
        self._read({self._bucket(key) for key in (*before, *after) if self.fits(key)} - self._known)
        held = {key: action for key, action in before.items() if key in self._slot_of}
        held.update(self._left_behind([key for key in after if key not in before and key in self._slot_of]))
        hashed = hashed if hashed is not None else {key: a for key, a in before.items() if key not in held}
        plan = Plan(hashed_before=dict(hashed))
        taken: set[int] = set()
        self._waited = False
        for key, action in after.items():
            if key in held and bytes(held[key]) == bytes(action):
                continue
            way = None
            if self.fits(key) and (compact or key not in hashed):
                way = self._clean_way(key, taken)
            if way is None:
                plan.hashed_after[key] = action
            else:
                taken.add(way)
                plan.publish[way] = (key, action)
        for key, action in held.items():
            if key not in after or bytes(after[key]) != bytes(action):
                plan.retire[self._slot_of[key]] = (key, action)
        return plan

    def _left_behind(self, keys: list[Key]) -> dict[Key, PdrAction]:
        """The actions of entries the table holds that `before` lacks (left by a change cut short or
        an earlier run; the reconcile removes them), as read: replaced like any other held entry."""
        if not keys:
            return {}
        values = self._table.lookup([self._slot_of[key] for key in keys])
        return {key: _compiled(value) for key, value in zip(keys, values) if value is not None}

    def _bucket(self, key: Key) -> int:
        return bucket_of(key[0], _address(key), self.bits)

    def _clean_way(self, key: Key, taken: set[int]) -> Optional[int]:
        """The first clean way of the key's bucket; if it has none but retired ones, the first after
        waiting for the programs' runs (once a plan)."""
        first = self._bucket(key) * DL4_WAYS
        ways = range(first, first + DL4_WAYS)
        for way in ways:
            if way not in self._key_of and way not in self._retired and way not in self._strays and way not in taken:
                return way
        if self._waited or self._retired.isdisjoint(ways):
            return None
        self.wait()
        return self._clean_way(key, taken)

    def wait(self) -> None:
        """Every way retired so far made clean, once no program run can still read it."""
        self._waited = True
        try:
            self._table.wait_readers()
        except DataplaneError as exc:
            log.warning("dpp_upf_dl4: waiting for the programs' runs failed (%s): retired ways stay unused", exc)
            return
        retired, self._retired = self._retired, set()
        self._restate(retired)

    # --- the values written, and the shadow kept as they are ---------------------------------------

    def staged(self, plan: Plan) -> list[tuple[int, PdrAction]]:
        """The new entries' ways, ENTRY clear (written first: no reader takes them yet)."""
        return [(slot, _way(key, action, live=False)) for slot, (key, action) in plan.publish.items()]

    def live(self, plan: Plan) -> list[tuple[int, PdrAction]]:
        """The same, ENTRY set: published."""
        return [(slot, _way(key, action, live=True)) for slot, (key, action) in plan.publish.items()]

    def retired(self, plan: Plan) -> list[tuple[int, PdrAction]]:
        """The ways retired, ENTRY clear (their undo: `republished`)."""
        return [(slot, _way(key, action, live=False)) for slot, (key, action) in plan.retire.items()]

    def republished(self, plan: Plan) -> list[tuple[int, PdrAction]]:
        return [(slot, _way(key, action, live=True)) for slot, (key, action) in plan.retire.items()]

    def publish(self, change: SiteChange, plan: Plan, left: list[str]) -> None:
        """The plan's new ways written with ENTRY clear, then published (two writes: see above);
        undone by retiring them. `left`: the ways an undo could not write, named. The values of each
        write are one C array, the published ones a copy of the staged with ENTRY set (`_staged`,
        `_live`): a group of establishments publishes some 32 ways at a time."""
        if plan.publish:
            slots = list(plan.publish)
            staged = _staged(plan.publish.values())
            change.write(lambda: self._table.update_arrays(slots, staged), lambda: None)
            self._flip(change, plan.publish, _live(staged), list(zip(slots, staged)), True, left)

    def retire(self, change: SiteChange, plan: Plan, left: list[str]) -> None:
        """The plan's ways whose entries go or move, retired (ENTRY cleared, the rest kept); undone
        by publishing them again."""
        if plan.retire:
            retired = [value for _, value in self.retired(plan)]
            self._flip(change, plan.retire, retired, self.republished(plan), False, left)

    def _flip(self, change: SiteChange, entries: dict[int, tuple[Key, PdrAction]], values: Sequence[PdrAction],
              undo_values: list, published: bool, left: list[str]) -> None:
        """Ways published (or retired) by writing `values` (those of `entries`' slots, in order), the
        shadow marked so; undone by writing `undo_values` (each tried whatever the others do), the
        shadow marked back."""

        def write() -> None:
            self._table.update_arrays(list(entries), values)
            self.mark(entries, published)

        def undo() -> None:
            for slot, value in undo_values:
                try:
                    self._table.update([(slot, value)])
                except DataplaneError as exc:
                    left.append(f"{self._table.name} ({slot},): not restored ({exc})")
            self.mark(entries, not published)

        change.write(write, undo, undo)

    def mark(self, entries: dict[int, tuple[Key, PdrAction]], published: bool) -> None:
        """The shadow after `entries` (slot -> (key, action)) were published, or retired."""
        state, strays = self._state, self._strays  # its bytes as `_restate` would make them, set as it goes
        for slot, (key, _) in entries.items():
            if published:
                self._key_of[slot], self._slot_of[key] = key, slot
                self._retired.discard(slot)
                state[slot] = DL4_PUBLISHED | (DL4_STRAY if slot in strays else 0)
            else:
                self._key_of.pop(slot, None)
                self._retired.add(slot)
                if self._slot_of.get(key) == slot:
                    del self._slot_of[key]
                state[slot] = DL4_RETIRED | (DL4_STRAY if slot in strays else 0)

    def slot(self, key: Key) -> Optional[int]:
        """The way that holds the entry, or None (for tests and tools)."""
        if self.fits(key):
            self._read({self._bucket(key)} - self._known)
        return self._slot_of.get(key)

    # --- reading what the table holds ------------------------------------------------------------

    def load(self) -> tuple[dict[Key, PdrAction], list[tuple[int, PdrAction]]]:
        """The table read whole (at start-up, as an earlier run left it): the entries it holds (their
        actions as compiled), and the values that retire its strays (ways published that no entry
        may hold: past the buckets in use, of an instance the table cannot hold, a second way of one
        address), which the caller writes."""
        self._known, self._slot_of, self._key_of, self._retired, self._strays = set(), {}, {}, set(), set()
        self._state[:] = bytes(len(self._state))
        self._learn(self._table.items())
        self._known = set(range(1 << self.bits)) if self.bits else set()
        held = {key: _compiled(self._value_at[slot]) for key, slot in self._slot_of.items()}
        strays = [(slot, _way(None, self._value_at[slot], live=False)) for slot in sorted(self._strays)]
        self._value_at = {}
        return held, strays

    def reconcile(self, desired: dict[Key, PdrAction], hashed: dict[Key, PdrAction]) -> Plan:
        """At start-up, the table read whole: its strays and the ways of entries not `desired`
        retired first (so that their buckets' entries may take them, after a wait), then the plan
        to `desired` from the table and `hashed` (the hash as it is), the hash's entries moved into
        free ways (`compact`): its new ways written and published here; the caller writes the hash,
        then `retire_now`."""
        held, strays = self.load()
        gone = self.plan({key: value for key, value in held.items() if key not in desired}, {}, hashed={})
        self._table.update([*strays, *self.retired(gone)])
        strays, self._strays = self._strays, set()
        self._retired |= strays
        self._restate(strays)
        self.mark(gone.retire, published=False)
        plan = self.plan({key: value for key, value in held.items() if key in desired}, desired, hashed, compact=True)
        if plan.publish:
            self._table.update(self.staged(plan))
            self._table.update(self.live(plan))
            self.mark(plan.publish, published=True)
        return plan

    def retire_now(self, plan: Plan) -> None:
        """The plan's retirements written, without undo (the reconcile's)."""
        if plan.retire:
            self._table.update(self.retired(plan))
            self.mark(plan.retire, published=False)

    def _read(self, buckets: set[int]) -> None:
        """The ways of buckets not known yet, read (one lookup for them all)."""
        if not buckets:
            return
        slots = [bucket * DL4_WAYS + way for bucket in sorted(buckets) for way in range(DL4_WAYS)]
        self._learn(zip(slots, self._table.lookup(slots)))
        self._value_at = {}
        self._known |= buckets

    def _learn(self, ways: Iterable[tuple[int, Optional[PdrAction]]]) -> None:
        """The shadow of ways as read: published (an entry, or a stray), retired (a value without
        ENTRY: it may have been retired a moment ago) or clean (zero)."""
        self._value_at = {}
        touched = []
        for slot, value in ways:
            if value is None or not any(bytes(value)):
                continue
            touched.append(slot)
            if not value.flags & _ENTRY:
                self._retired.add(slot)
                continue
            self._value_at[slot] = value
            key = self._key_at(slot, value.ue_addr)
            if key is None or key in self._slot_of:
                self._strays.add(slot)
            else:
                self._slot_of[key], self._key_of[slot] = slot, key
        self._restate(touched)

    def _restate(self, slots: Iterable[int]) -> None:
        """The shadow's bytes of `slots` as the sets say (`_key_of`, `_retired`, `_strays`)."""
        for slot in slots:
            self._state[slot] = ((DL4_PUBLISHED if slot in self._key_of else 0)
                                 | (DL4_RETIRED if slot in self._retired else 0)
                                 | (DL4_STRAY if slot in self._strays else 0))

    def _key_at(self, slot: int, ue_addr: int) -> Optional[Key]:
        """The entry a way of `slot` holding `ue_addr` (network order) is for, or None."""
        bucket = slot // DL4_WAYS
        if not self.bits or bucket >= 1 << self.bits:
            return None
        packed = ue_addr.to_bytes(4, sys.byteorder)
        instance = bucket ^ bucket_of(0, int.from_bytes(packed, "big"), self.bits)
        return (instance, 4, packed.ljust(16, b"\0"))


def _placer() -> Optional[Libdpp]:
    """libdpp, for the placement; None where it cannot be loaded (not built: Python places)."""
    try:
        return load_libdpp()
    except (DataplaneError, OSError) as exc:
        log.info("dpp_upf_dl4: libdpp not loaded (%s): ways placed in Python", exc)
        return None


def _checked(rc: int, call: str) -> int:
    if rc < 0:
        raise DataplaneError(-rc, call, "refused the ways' arrays")
    return rc


def _way(key: Optional[Key], action: PdrAction, live: bool) -> PdrAction:
    """A way's value: the action, the key's address in ue_addr (None: the action's own), ENTRY as
    `live` says."""
    value = PdrAction.from_buffer_copy(action)
    if key is not None:
        value.ue_addr = int.from_bytes(key[2][:4], sys.byteorder)
    value.flags = (value.flags | _ENTRY) if live else (value.flags & ~_ENTRY)
    return value


def _staged(entries: Collection[tuple[Key, PdrAction]]) -> Array[PdrAction]:
    """The ways' values of `entries` (key, action) as one C array: `_way(key, action, live=False)`
    of each, made from the actions' bytes at once."""
    values = (PdrAction * len(entries)).from_buffer_copy(b"".join([bytes(action) for _, action in entries]))
    for value, (key, _) in zip(values, entries):
        value.ue_addr = int.from_bytes(key[2][:4], sys.byteorder)
    return _with_flags(values, _CLEAR_ENTRY)


def _live(staged: Array[PdrAction]) -> Array[PdrAction]:
    """A copy of the staged ways with ENTRY set: published (the flags byte alone differs)."""
    return _with_flags(staged, _SET_ENTRY)


def _with_flags(values: Array[PdrAction], translation: bytes) -> Array[PdrAction]:
    """A copy of `values` with every flags byte translated (ENTRY set or cleared), in one pass."""
    data = bytearray(values)
    data[_FLAGS_AT::ctypes.sizeof(PdrAction)] = data[_FLAGS_AT::ctypes.sizeof(PdrAction)].translate(translation)
    return (PdrAction * len(values)).from_buffer_copy(data)


def _compiled(value: PdrAction) -> PdrAction:
    """A way's action as the compiler makes it (no ENTRY, no address)."""
    action = PdrAction.from_buffer_copy(value)
    action.flags &= ~_ENTRY
    action.ue_addr = 0
    return action
