"""What the telemetry's poll and a session's counters read of ATSSS's path slots, which of a poll's
readings stand (`unchanged`: the slots are read outside the service's lock, so a change made
meanwhile may have given a session's slots to another), and each path's loss measured over the
polls (MeasuredLoss)."""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, NamedTuple, Optional

from netapp.atsss.abi import Path, PathFlags
from netapp.atsss.admission import path_identity
from netapp.atsss.models import AtsssSession, PathCounters, SessionCounters
from netapp.atsss.table import PathCounts, PathLoss

# A path's identity while it runs: its session's tenant and name, its slot, and the path as written
# in it (admission.path_identity: its subflow and access), not its position (a body that reorders
# the paths keeps their slots, admission.slots_for, and so their rates and measured loss). A path
# given another slot, or a slot emptied and given to another path (its counters zeroed), starts
# over: two PUTs between polls, one removing a path and one adding another that takes its slot,
# leave the session and slot as they were, and by them alone the new path took the removed one's
# measured loss and had its rates diffed against its counters. The same subflow on the same access
# given its slot back is the same path to this key (its loss is that network path's): its
# counters, zeroed, went backwards, which leaves its rates and loss window out for a poll
# (RateKeeper), unless it counted more meanwhile than it had.
PathKey = tuple[str, str, int, tuple]


# The path keys of the sessions named, (tenant, name), that the data path serves (Atsss.served_paths).
ServedPaths = Callable[[set[tuple[str, str]]], set[PathKey]]


def path_key(session: AtsssSession, index: int) -> PathKey:
    return session.tenant, session.name, session.slots[index], path_identity(session.paths[index])


def still_served(keys: set[PathKey], served: ServedPaths) -> set[PathKey]:
    """Those of `keys` (paths a poll did not read) that the data path still serves in the same
    slot: their session changed while the poll read their slots, and their readings were dropped
    (unchanged). The others are no longer served: their session deleted, the path removed or
    given another slot; their slot may be another session's now, another tenant's."""
    return keys & served({key[:2] for key in keys}) if keys else set()


class PathReading(NamedTuple):
    """One path of a session as the maps hold it now: its slot's entry (None: not there), its
    counters, its share of the session's packets (None: the session sent none), what the UE's
    Ack Vectors told of its loss, and its path_key (made once: a poll looks it up four times).
    Plain tuples: a poll reads 20,000 of them, and validated models would cost it most of its time."""

    session: AtsssSession
    index: int
    value: Optional[Path]
    counts: PathCounts
    share: Optional[float]
    loss: PathLoss
    key: PathKey

    @property
    def up(self) -> bool:
        return bool(self.value.flags & PathFlags.UP) if self.value is not None else False

    @property
    def rtt_us(self) -> int:
        return self.value.rtt_us if self.value is not None else 0


def path_readings(session: AtsssSession, values: list[Optional[Path]], counts: list[PathCounts],
                  losses: list[PathLoss]) -> list[PathReading]:
    """The session's paths, by position, as its slots' entries and counters say."""
    total = sum(count.packets for count in counts)
    return [PathReading(session, index, value, count, count.packets / total if total else None, loss,
                        path_key(session, index))
            for index, (value, count, loss) in enumerate(zip(values, counts, losses))]


def unchanged(readings: list[PathReading], changed: Iterable[tuple[str, str]],
              unserved: Iterable[str]) -> list[PathReading]:
    """The `readings` of the sessions no change touched while their slots were read (`changed`:
    (tenant, name) of those touched, changes_seen.ChangesSeen) and still served (`unserved`:
    "<tenant>/<name>" of those that are not). A session changed meanwhile may have had its slots
    given to another, maybe another tenant's, whose counters its readings would carry under its
    tenant; one untouched holds its slots as it did, since the store gives a stored session's slots
    to no other. Its readings stand whatever else changed: a reconcile, or a change whose maps or
    COMMIT failed, reloads the served sessions, and comparing the objects read with the reloaded
    ones dropped every reading of the poll."""
    changed, unserved = set(changed), set(unserved)
    return [reading for reading in readings if (reading.session.tenant, reading.session.name) not in changed
            and f"{reading.session.tenant}/{reading.session.name}" not in unserved]


def session_counters(session: AtsssSession, readings: list[PathReading]) -> SessionCounters:
    """What GET .../counters answers of the session's paths."""
    paths = [PathCounters(index=path.index, slot=session.slots[path.index], access=session.paths[path.index].access,
                          weight=session.paths[path.index].weight, up=path.up, rtt_us=path.rtt_us,
                          share=path.share, delivered=path.loss.delivered, lost=path.loss.lost,
                          loss=path.loss.ratio, **path.counts._asdict())
             for path in readings]
    return SessionCounters(name=session.name, tenant=session.tenant, ue=session.ue, paths=paths)


class MeasuredLoss:
    """Each path's loss as measured from the UE's Ack Vectors, by path_key: the exponentially
    weighted average of the polls' windows of the data path's counters (netapp.atsss.telemetry)."""

    def __init__(self) -> None:
        self._loss: dict[PathKey, float] = {}

    def of(self, session: AtsssSession) -> list[Optional[float]]:
        """Each path's, by position; None: never measured."""
        return [self._loss.get(path_key(session, index)) for index in range(len(session.slots))]

    def note(self, windows: Mapping[PathKey, Optional[float]], weight: float,
             served: ServedPaths) -> set[tuple[str, str]]:
        """A poll's loss of every path it read, the part of the numbers judged since the previous
        poll that the UE reported lost, into each path's average (`weight` the window's; a path's
        first window starts it). None: none judged, the average kept, as a UE sending nothing loses
        nothing new. A path the poll did not read keeps its average while it is `served` (those of
        the sessions named, the service's): its session changed while its slots were read, and
        its readings were dropped (unchanged), not its loss; else it is forgotten (its session
        deleted, or the path given another slot). Returns (tenant, name) of the sessions whose
        measured loss changed."""
        before = self._loss
        measured = {key: before[key] for key in windows if key in before}
        measured.update((key, before[key]) for key in still_served(before.keys() - windows.keys(), served))
        measured.update((key, loss if key not in before else weight * loss + (1 - weight) * before[key])
                        for key, loss in windows.items() if loss is not None)
        self._loss = measured  # one assignment: a reader sees the old dict or the new one
        return {key[:2] for key in before.keys() | measured.keys() if before.get(key) != measured.get(key)}
