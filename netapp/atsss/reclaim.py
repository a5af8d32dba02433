"""A path slot given to a new path of the session whose path it held (netapp.atsss.admission.
replaced_slots: so that a session whose path is replaced keeps its pair of path slots, 2s - 1 and
2s, which the downlink requests with the session's line), written for the new path by a sync
(netapp.atsss.table.AtsssMaps.sync) before its other writes, in an order that no packet on another
CPU can tell from two slots:

1. The old path marked down in place (its flags' word, one store) and the session's mask of the
   paths up (REDUNDANT's, which its copies take the slots from without reading the paths' flags)
   cleared at its position, the session's other words kept: from then on no packet picks the
   position, every mode taking only a path up (nf/atsss/schedule.h). Its uplink entry is deleted,
   even where a path the sync writes has its addresses and ports (the sync's uplink writes give it
   back, leading to that path's slot): the UE's packets on the old subflow no longer count into the
   slot nor move its loss estimate. A session leading to the slot that the sync deletes (the
   session moved to another UE address, whose session is written anew under its key) is deleted
   here, not after 3.: its UE's packets would go out on the new path, to another device's subflow.
2. A wait for every program run that began before (`Table.wait_readers`, an RCU grace period): a
   packet that read the path up, before 1., has sent on it or been dropped; none still takes a DCCP
   number from the old path, whose last is then read exactly (for an undo: `emptied`).
3. The slot written whole for the new path, its up flag clear (a copy is not atomic: the flag is
   what keeps a packet from reading the words half-written), its DCCP number 0 (a new subflow's),
   its counters and loss estimate zeroed (its telemetry key, readings.PathKey, is another path's:
   it starts fresh; an undo writing the old path back gets them back, `_received_back`); then its
   own words stored in place, the up flag last, as a changed path's.
   The sync then writes the session's words (its mask of the paths up among them) as any change.

Meanwhile the session runs on its other paths. A session every one of whose positions up is a
slot given anew (all its paths replaced) keeps its last up for a second round, after the first's
slots are up again: one grace period more, rather than none of its packets sent through one. A
session with no other path up (one path, or its others down) is given no slot of its own anew
(admission.another_up): its new path takes a free slot, up at once, as any new path. The
old path's slot written in place for the new one, without the wait, is sound only where the two
are one subflow (another access: admission.replaced_slots gives it the slot, a changed path's
words are then stored in place, its DCCP numbers going on): otherwise a packet meanwhile could
mix the two subflows' addresses (an IPv6 address is two stores) and send a UE's packet to a third.

The wait costs the change a grace period (6-20 ms on a 2-CPU VM) under the service's lock, only
where a path is replaced in a session that keeps a slot of it; a new path given a free slot waits
for none.
"""

from __future__ import annotations

from ctypes import c_uint32
from typing import Callable, Iterable, Optional

from netapp.atsss.abi import Path, PathFlags, PathRx, Session, SessionKey
from netapp.dataplane.tables import Span, Table

Held = dict[bytes, tuple[SessionKey, Session]]  # raw session key -> (key, session), as the maps hold them


def subflow(value: Path) -> tuple:
    """What makes a path of the maps the subflow it is: its addresses and ports."""
    return value.family, tuple(value.local), tuple(value.peer), value.sport, value.dport


def without_up(value: Path) -> Path:
    down = Path.from_buffer_copy(value)
    down.flags &= ~PathFlags.UP
    return down


def delete_present(table: Table, keys: list) -> None:
    """The entries of `keys` the table holds deleted, those it holds no more left: a sync that failed
    before writing a new path's uplink entry leaves none for its undo to delete (a delete of a key
    gone is refused, and would refuse every later sync of the session alike)."""
    found = table.lookup(keys)
    table.delete([key for key, value in zip(keys, found) if value is not None])


def rounds(taken: set[int], held: Held, wanted: dict[int, Path]) -> list[set[int]]:
    """The slots `taken` in one round, or two where a session would have no position up left outside
    the first: a position up then waits for the second, the session sending on it meanwhile, and on
    the first round's new paths through the second's wait. So the one kept back is one whose new path
    (`wanted`) is down where there is one: the first round then writes those that are up, and the
    session has a path up at each wait unless none of its new paths is."""
    later = set()
    for _, value in held.values():
        up = [slot for position, slot in enumerate(value.path[: value.n_paths]) if slot and value.up >> position & 1]
        if up and set(up) <= taken:
            later.add(min(reversed(up), key=lambda slot: bool(wanted[slot].flags & PathFlags.UP)))
    return [batch for batch in (taken - later, later) if batch]


def with_up(value: Session, down: set[int], wanted: dict[int, Path]) -> Session:
    """`value` with the positions of slots `down` out of its mask of the paths up, and those of the
    slots given anew in an earlier round (`wanted`) in it when their path is up."""
    interim = Session.from_buffer_copy(value)
    for position, slot in enumerate(value.path[: value.n_paths]):
        if slot in down:
            interim.up &= ~(1 << position)
        elif slot in wanted and wanted[slot].flags & PathFlags.UP:
            interim.up |= 1 << position
    return interim


class SlotReclaim:
    """The rounds above over one instance's path tables; `write_sessions(wanted, held)` writes the
    sessions' words as a sync does, `held(raws)` reads the sessions again, `uplink_key(path)`,
    `wait_readers()` waits for the programs' runs, `delete_sessions(keys)` deletes sessions."""

    def __init__(self, paths: Table, stats: Table, rx: Table, uplink: Table, owned: list[Span],
                 write_sessions: Callable[[Held, Held], None], held: Callable[[Iterable[bytes]], Held],
                 uplink_key: Callable[[Path], object], wait_readers: Callable[[], None],
                 delete_sessions: Callable[[list[SessionKey]], None]):
        self._paths, self._stats, self._rx, self._uplink = paths, stats, rx, uplink
        self._wait_readers = wait_readers  # the maps' (Table.wait_readers, their retired slots freed)
        self._delete_sessions = delete_sessions
        self.deleted: set[bytes] = set()  # raw keys of the sessions the last reclaim deleted (1.)
        self._owned = owned
        self._write_sessions, self._held, self._uplink_key = write_sessions, held, uplink_key
        # slot -> (the subflow, what it received, its loss estimate) of the old path a reclaim wrote
        # over last, for the change's undo (_received_back)
        self._received: dict[int, tuple[tuple, object, object]] = {}
        # slot -> the old path as read after the wait, before the slot is written: a sync refused
        # after it returns none of them, yet its undo must carry their DCCP numbers (AtsssMaps.moved
        # forgets them, before a change; AtsssMaps.sync adds the paths it empties)
        self.read: dict[int, Path] = {}

    def given_anew(self, wanted: dict[int, Path], used: set[int]) -> dict[int, Path]:
        """The slots of `wanted` that held sessions lead to (`used`) whose path is another subflow
        now (slot -> the path it holds)."""
        slots = sorted(slot for slot in wanted if slot in used)
        now = self._paths.lookup([c_uint32(slot) for slot in slots])
        return {slot: path for slot, path in zip(slots, now)
                if path is not None and path.family and subflow(path) != subflow(wanted[slot])}

    def reclaim(self, wanted: dict[int, Path], moved: dict[int, Path], held: Held, used: set[int],
                staying: set[bytes]) -> dict[int, Path]:
        """The slots given anew written for their new paths (`wanted`; `moved`: paths written with
        the numbers an undo carries, not zeroed), `held` updated with the sessions as rewritten
        (but those deleted, `deleted`: the sessions leading to a slot that the sync does not keep,
        not among `staying`); returns the old paths as last read (slot -> path)."""
        self.deleted = set()
        old = self.given_anew(wanted, used)
        if not old:
            return {}
        emptied: dict[int, Path] = {}
        done: dict[int, Path] = {}
        for batch in rounds(set(old), {raw: entry for raw, entry in held.items() if raw in staying}, wanted):
            leading = {raw: entry for raw, entry in held.items() if set(entry[1].path[: entry[1].n_paths]) & batch
                       and raw not in self.deleted}
            self._mark_down(batch, old, leading, done, staying)
            self._wait_readers()
            emptied.update(self._write_anew(batch, wanted, moved))
            done.update((slot, wanted[slot]) for slot in batch)
            held.update(self._held(list(leading)))
        return emptied

    def _mark_down(self, batch: set[int], old: dict[int, Path], leading: Held, done: dict[int, Path],
                   staying: set[bytes]) -> None:
        """1.: the old paths of `batch` down, the sessions leading to them not sending on them (those
        the sync deletes, deleted now: once a slot is up for its new path, a session left leading to
        it would send its UE's packets on it, to the subflow of another UE the session moved to),
        their uplink entries gone."""
        leaving = {raw: key for raw, (key, _) in leading.items() if raw not in staying}
        if leaving:
            self._delete_sessions(list(leaving.values()))
            self.deleted.update(leaving)
        with self._paths.in_place() as paths:
            for slot in sorted(batch):
                paths.store(slot, bytes(without_up(old[slot])), self._owned)
        kept = {raw: entry for raw, entry in leading.items() if raw not in leaving}
        interim = {raw: (key, with_up(value, batch, done)) for raw, (key, value) in kept.items()}
        self._write_sessions(interim, kept)
        gone = {bytes(key): key for key in (self._uplink_key(old[slot]) for slot in sorted(batch))}  # once each
        delete_present(self._uplink, list(gone.values()))

    def _write_anew(self, batch: set[int], wanted: dict[int, Path], moved: dict[int, Path]) -> dict[int, Path]:
        """3.: each slot of `batch` whole for its new path, down, then up in place. Returns the old
        paths as read after the wait."""
        slots = sorted(batch)
        keys = [c_uint32(slot) for slot in slots]
        last = dict(zip(slots, self._paths.lookup(keys)))
        # kept before the first write: a write refused after it leaves the new path in the slot, and
        # the undo must carry the old one's last numbers
        self.read.update((slot, path) for slot, path in last.items() if path is not None)
        self._received_back(last, wanted, moved)
        self._stats.fill([key for key in keys if key.value not in moved])  # type: ignore[attr-defined]
        self._rx.update([(key, PathRx()) for key in keys if key.value not in moved])
        self._paths.update([(c_uint32(slot), without_up(wanted[slot])) for slot in slots])
        with self._paths.in_place() as paths:
            for slot in slots:
                paths.store(slot, bytes(wanted[slot]), self._owned)
        return {slot: path for slot, path in last.items() if path is not None}

    def _received_back(self, last: dict[int, Optional[Path]], wanted: dict[int, Path], moved: dict[int, Path]) -> None:
        """What the old paths (`last`: slot -> path, as read after the wait) received and their loss
        estimates kept (`_received`), before 3. zeroes them; those of an undo's paths (`moved`) that
        an earlier reclaim wrote over written back: no packet counts into them meanwhile (their
        uplink entries are gone, 1.)."""
        slots = sorted(last)
        keys = [c_uint32(slot) for slot in slots]
        now = zip(slots, [last[slot] for slot in slots], self._stats.lookup(keys), self._rx.lookup(keys))
        back = [(slot, self._received.pop(slot)) for slot in slots
                if slot in moved and self._received.get(slot, (None,))[0] == subflow(wanted[slot])]
        self._received.update((slot, (subflow(path), stats, rx)) for slot, path, stats, rx in now if path is not None)
        self._stats.update([(c_uint32(slot), stats) for slot, (_, stats, _) in back])
        self._rx.update([(c_uint32(slot), rx) for slot, (_, _, rx) in back])
