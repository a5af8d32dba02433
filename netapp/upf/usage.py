"""The URR logic of the UPF: each URR's usage measured from its slot of the data path's counters
(dpp_upf_usage), its thresholds, quotas and periods checked, and usage reports made (29.244 5.2.2).

`UsageMonitor.step(now)` is one poll: every URR's counts read in one batched lookup (the sum of
its own slot and the slots of the sets of URRs it is in, models.UrrSet), and per URR,
the usage since its previous report (the measurement) compared with what it asks for. In the order
below, the first that holds makes one Usage Report (trigger, UR-SEQN, Start and End Time, Volume
Measurement with bytes and packets each way, Duration Measurement when the URR measures DURAT); a
report starts the next measurement (the thresholds are re-armed, 29.244 5.2.2.2.1):

- a volume quota (total, UL or DL) or a time quota used up: VOLQU / TIMQU, and the URR is marked
  `quota_exhausted` through a session change (store and maps, like any modification): the PDRs that
  name it are compiled with FAR DROP and no usage slot, so the data path stops forwarding their
  packets and does not count them. An Update URR with a new quota forwards again (netapp.upf.sessions).
  A quota is checked whatever the reporting triggers say: it is what the SMF allows;
- a volume threshold (VOLTH) or a time threshold (TIMTH) reached, when the URR's triggers ask;
- the measurement period over (PERIO): periods follow each other on a grid from the URR's first
  poll, whatever other reports were made in between.

Time is measured from the first packet of a measurement (the first poll that saw the counts grow)
to the report: a URR without traffic uses no time (29.244 5.2.2.2.1: the duration is that of the
traffic, not of the session). Precision: the counters are read once a poll, so a threshold or a
quota is found at most one poll period after it is reached -- a quota is exceeded by at most one
poll period's traffic (and the time the maps take the DROP) -- and times are polled times.

The PFCP endpoint asks for the final reports of the URRs a Session Deletion or a Remove URR frees
(`finals`, TERMR) and for those a Query URR names (`query`, IMMER), to put them in its responses.
The measurements live in memory; what a restart needs of them is stored (netapp.upf.store) before
the report that makes it leaves: each URR's next UR-SEQN (`urr_seqn:<SEID>:<URR id>`), so that an
SMF never sees a URR's sequence number go back (29.244 8.2.70), and the counts and the time its
report measured up to (`urr_base:...`), so that after a restart its measurement goes on from there
(its slot kept counting): nothing reported is reported again, nor counted against a quota renewed
since. Both are dropped with the URR. The time of a measurement's first packet and its period's grid
start again at the restart.

`step` also gives what the telemetry writes (netapp.upf.telemetry): every URR's counts since it
was created, and per association the totals, with the final counts of the URRs gone.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any, Callable, Iterable, Optional

from netapp.telemetry.poll import UPF_COUNTS
from netapp.upf.models import Session, Urr, Volume
from netapp.upf.pfcp.codec import IE, group, leaf
from netapp.upf.pfcp.ies import IEType
from netapp.upf.store import (
    NTP_EPOCH_OFFSET,
    Base,
    UrrKey,
    delete_bases,
    delete_seqns,
    load_bases,
    load_seqns,
    put_bases,
    put_seqns,
)

log = logging.getLogger("netapp.upf")

# Usage Report Trigger flags (29.244 8.2.41) by the reporting trigger that fired.
TRIGGER_FLAGS = {
    "periodic_reporting": "perio",
    "volume_threshold": "volth",
    "time_threshold": "timth",
    "quota_holding_time": "quhti",
    "start_of_traffic": "start",
    "stop_of_traffic": "stopt",
    "dropped_dl_traffic_threshold": "droth",
    "volume_quota": "volqu",
    "time_quota": "timqu",
    "linked_usage_reporting": "liusa",
    "termination": "termr",
    "immediate": "immer",
}
COUNTS = UPF_COUNTS  # netapp.upf.abi.Usage's fields, the telemetry's too
Counts = tuple[int, int, int, int]
ZERO: Counts = (0, 0, 0, 0)


@dataclasses.dataclass(frozen=True)
class UsageReport:
    """One URR's usage since its previous report: a Usage Report of a Session Report Request (IE
    80), of a Session Modification Response (78) or of a Session Deletion Response (79). Times are
    NTP seconds (Recovery Time Stamp's)."""

    urr_id: int
    seqn: int
    trigger: str  # a key of TRIGGER_FLAGS
    start: int
    end: int
    uplink_bytes: int = 0
    downlink_bytes: int = 0
    duration_s: Optional[int] = None
    uplink_packets: int = 0
    downlink_packets: int = 0

    def ie(self, ie_type: IEType = IEType.USAGE_REPORT_REPORT) -> IE:
        return group(
            ie_type,
            leaf(IEType.URR_ID, id=self.urr_id),
            leaf(IEType.UR_SEQN, number=self.seqn),
            leaf(IEType.USAGE_REPORT_TRIGGER, **{TRIGGER_FLAGS[self.trigger]: 1}),
            leaf(IEType.START_TIME, timestamp=self.start),
            leaf(IEType.END_TIME, timestamp=self.end),
            leaf(
                IEType.VOLUME_MEASUREMENT,
                total=self.uplink_bytes + self.downlink_bytes,
                uplink=self.uplink_bytes,
                downlink=self.downlink_bytes,
                total_packets=self.uplink_packets + self.downlink_packets,
                uplink_packets=self.uplink_packets,
                downlink_packets=self.downlink_packets,
            ),
            None if self.duration_s is None else leaf(IEType.DURATION_MEASUREMENT, duration=self.duration_s),
        )


@dataclasses.dataclass(frozen=True)
class UrrUsage:
    """A URR's counts since it was created (packets and bytes each way), for the telemetry."""

    node_id: str
    seid: int
    urr_id: int
    counts: Counts


@dataclasses.dataclass
class _Measurement:
    """One URR's measurement since its previous report."""

    node_id: str
    urr: Urr
    base: Counts  # the counts at the previous report
    last: Counts  # the counts at the latest poll
    start: float  # when the measurement started (the URR's first poll, the previous report)
    next_period: Optional[float]
    first_packet: Optional[float] = None  # the poll that first saw traffic in this measurement
    seqn: int = 0
    gone: bool = False  # its session or URR went; its final counts are the endpoint's first

    def report(self, urr_id: int, trigger: str, counts: Counts, now: float) -> UsageReport:
        """The usage since the previous report, and the next measurement started."""
        used = _minus(counts, self.base)
        duration = None
        if "DURAT" in self.urr.measurement_method:
            duration = int(now - self.first_packet) if self.first_packet is not None else 0
        report = UsageReport(
            urr_id=urr_id,
            seqn=self.seqn,
            trigger=trigger,
            start=_ntp(self.start),
            end=_ntp(now),
            uplink_bytes=used[1],
            downlink_bytes=used[3],
            uplink_packets=used[0],
            downlink_packets=used[2],
            duration_s=duration,
        )
        self.seqn = (self.seqn + 1) % (1 << 32)
        self.base = self.last = counts
        self.start, self.first_packet = now, None
        return report


class UsageMonitor:
    """The URRs of `upf` measured and reported: `send(seid, reports)` sends a Session Report Request
    (it must not wait for the answer). `step` is one poll; the telemetry's collector calls it on its
    cadence (netapp.upf.telemetry), a test calls it with its own `now`."""

    def __init__(
        self, upf: Any, send: Callable[[int, list[UsageReport]], None], clock: Callable[[], float] = time.time
    ):
        self._upf = upf
        self._send = send
        self._clock = clock
        self._lock = threading.Lock()
        self._measurements: dict[tuple[int, int], _Measurement] = {}
        self._retired: dict[str, Counts] = {}  # node id -> the final counts of its URRs gone
        self.reports_sent = 0
        self._store = getattr(upf, "store", None)  # where the next UR-SEQNs are kept; None: nowhere
        # the next UR-SEQN of each URR that reported; what the last report before a restart measured
        # up to, of the URRs not measured since (netapp.upf.store.BASE_FIELDS)
        self._seqns, self._bases = self._load_reported()

    def _load_reported(self) -> tuple[dict[UrrKey, int], dict[UrrKey, Base]]:
        """The stored next UR-SEQNs and last reports' counts; those of sessions gone (deleted while
        the service was down) dropped."""
        if self._store is None:
            return {}, {}
        with self._store.transaction():
            seqns, bases = load_seqns(self._store), load_bases(self._store)
            gone = [key for key in {*seqns, *bases} if key[0] not in self._upf.sessions]
            delete_seqns(self._store, gone)
            delete_bases(self._store, gone)
        held = self._upf.sessions
        return ({key: seqn for key, seqn in seqns.items() if key[0] in held},
                {key: base for key, base in bases.items() if key[0] in held})

    def _keep_seqns(self, reported: Iterable[UrrKey], gone: Iterable[UrrKey] = ()) -> None:
        """Under the lock, before the reports leave: the next UR-SEQN of the URRs that reported and
        what their reports measured up to written, those of URRs gone deleted. A store that fails is
        logged: the reports go all the same."""
        for key in gone:
            self._seqns.pop(key, None)
            self._bases.pop(key, None)
        measured = {key: self._measurements[key] for key in reported if key in self._measurements}
        kept = {key: measurement.seqn for key, measurement in measured.items()}
        self._seqns.update(kept)
        if self._store is None or not (kept or gone):
            return
        try:
            with self._store.transaction():
                put_seqns(self._store, kept)
                put_bases(self._store, {key: (*each.base, int(each.start)) for key, each in measured.items()})
                delete_seqns(self._store, gone)
                delete_bases(self._store, gone)
        except Exception:  # noqa: BLE001 - a report is not held back by the store
            log.exception("the UR-SEQNs of URRs %s could not be stored", sorted(kept))

    # --- one poll --------------------------------------------------------------------------------

    def step(self, now: Optional[float] = None) -> list[UrrUsage]:
        """Read every URR's counts, make the reports due (sent, quotas enforced), and return the counts."""
        now = self._clock() if now is None else now
        due: dict[int, list[UsageReport]] = {}
        exhausted: dict[int, list[int]] = {}
        with self._lock:
            usages = self._read(now)
            for usage in usages:
                measurement = self._measurements[(usage.seid, usage.urr_id)]
                trigger = self._trigger(measurement, usage.counts, now)
                if trigger is None:
                    continue
                due.setdefault(usage.seid, []).append(measurement.report(usage.urr_id, trigger, usage.counts, now))
                if trigger in ("volume_quota", "time_quota"):
                    exhausted.setdefault(usage.seid, []).append(usage.urr_id)
            gone = self._retire_gone({(usage.seid, usage.urr_id) for usage in usages})
            self._keep_seqns([(seid, report.urr_id) for seid, reports in due.items() for report in reports], gone)
        for seid, urr_ids in exhausted.items():  # first stop forwarding, then say so (29.244 5.2.2.2)
            try:
                self._upf.exhaust(seid, urr_ids)
            except Exception:  # noqa: BLE001 - the session may have gone; the report is sent all the same
                log.exception("session %#x: stopping the traffic of URRs %s (quota used up) failed", seid, urr_ids)
        for seid, reports in due.items():
            self._send(seid, reports)
            self.reports_sent += len(reports)
        return usages

    def counts(self) -> list[UrrUsage]:
        """Every URR's counts now (for a scrape): nothing reported, no measurement changed."""
        with self._lock:
            return [UrrUsage(node_id, seid, urr_id, counts) for (node_id, seid, urr_id, _), counts in self._counts()]

    def session_counts(self, session: Session) -> dict[int, Counts]:
        """The counts of the session's URRs now, by URR id (those with a slot)."""
        slots = session.urr_usage_slots()
        read = self._upf.usage({slot for each in slots.values() for slot in each}) if slots else {}
        return {urr_id: counts for urr_id, each in slots.items() if (counts := _sum(read, each)) is not None}

    def totals(self, usages: Iterable[UrrUsage]) -> dict[str, Counts]:
        """Per association: the counts of its URRs (`usages`) and the final counts of those gone."""
        totals = dict(self._retired)
        for usage in usages:
            totals[usage.node_id] = _plus(totals.get(usage.node_id, ZERO), usage.counts)
        return totals

    def _read(self, now: float) -> list[UrrUsage]:
        usages = []
        for (node_id, seid, urr_id, urr), counts in self._counts():
            self._measurement(node_id, seid, urr_id, urr, counts, now)
            usages.append(UrrUsage(node_id, seid, urr_id, counts))
        return usages

    def _counts(self) -> list[tuple[tuple[str, int, int, Urr], Counts]]:
        """(node id, SEID, URR id, URR) of every URR with a slot, and its counts (the sum of its
        slots': models.UrrSet), read at once."""
        rows = [
            ((session.node_id, session.seid, urr_id, session.urrs[urr_id]), slots)
            for session in _sessions(self._upf)
            for urr_id, slots in session.urr_usage_slots().items()
        ]
        read = self._upf.usage([slot for _, slots in rows for slot in slots]) if rows else {}
        return [(key, counts) for key, slots in rows if (counts := _sum(read, slots)) is not None]

    def _measurement(self, node_id: str, seid: int, urr_id: int, urr: Urr, counts: Counts, now: float) -> _Measurement:
        """The URR's measurement, with the URR as it is now (an Update URR may have changed it)."""
        key = (seid, urr_id)
        measurement = self._measurements.get(key)
        if measurement is None or measurement.gone or not _at_least(counts, measurement.base):
            # New to us (created, or after a restart), or its slot given again (zeroed): it starts now
            # or where its last report before a restart left it, its UR-SEQN where it was.
            seqn = measurement.seqn if measurement is not None else self._seqns.get(key, 0)
            measurement = self._measurements[key] = self._started(key, node_id, urr, counts, now, seqn)
        elif urr.measurement_period_s != measurement.urr.measurement_period_s:
            measurement.next_period = _period_end(urr, now)
        measurement.urr = urr
        return measurement

    def _started(self, key: UrrKey, node_id: str, urr: Urr, counts: Counts, now: float, seqn: int) -> _Measurement:
        """A new measurement of the URR: from what its last report before a restart measured up to
        (when the store kept it and the slot counted on since), else from zero, now."""
        stored = self._bases.pop(key, None)
        base: Counts = stored[:4] if stored is not None else ZERO  # type: ignore[assignment]
        if stored is None or not _at_least(counts, base):
            return _Measurement(node_id, urr, base=ZERO, last=ZERO, start=now, next_period=_period_end(urr, now),
                                seqn=seqn)
        return _Measurement(node_id, urr, base=base, last=base, start=float(stored[4]),
                            next_period=_period_end(urr, now), seqn=seqn)

    def _trigger(self, measurement: _Measurement, counts: Counts, now: float) -> Optional[str]:
        """The reporting trigger that fires now, if any; the measurement's time kept up to date."""
        urr = measurement.urr
        if counts != measurement.last and measurement.first_packet is None:
            measurement.first_packet = now
        measurement.last = counts
        used = _minus(counts, measurement.base)
        duration = now - measurement.first_packet if measurement.first_packet is not None else 0.0
        triggers = urr.reporting_triggers
        if not urr.quota_exhausted:
            if urr.volume_quota is not None and _reached(urr.volume_quota, used):
                return "volume_quota"
            if urr.time_quota_s is not None and "DURAT" in urr.measurement_method and duration >= urr.time_quota_s:
                return "time_quota"
        if "volume_threshold" in triggers and urr.volume_threshold is not None and _reached(urr.volume_threshold, used):
            return "volume_threshold"
        if "time_threshold" in triggers and urr.time_threshold_s is not None and measurement.first_packet is not None:
            if duration >= urr.time_threshold_s:
                return "time_threshold"
        if "periodic_reporting" in triggers and measurement.next_period is not None and now >= measurement.next_period:
            period = urr.measurement_period_s or 1
            while measurement.next_period <= now:
                measurement.next_period += period
            return "periodic_reporting"
        return None

    def _retire_gone(self, seen: set[tuple[int, int]]) -> list[UrrKey]:
        """Measurements whose URR went: marked at the first poll that misses them (the endpoint takes
        their final counts for its response first), retired at the next (their final counts added
        to their association's totals). Those retired."""
        retired = []
        for key in [key for key in self._measurements if key not in seen]:
            measurement = self._measurements[key]
            if not measurement.gone:
                measurement.gone = True
                continue
            del self._measurements[key]
            retired.append(key)
            final = self._upf.final_usage(key[0]).get(key[1])
            self._retire(measurement.node_id, _counts(final) if final is not None else measurement.last)
        return retired

    def _retire(self, node_id: str, counts: Counts) -> None:
        self._retired[node_id] = _plus(self._retired.get(node_id, ZERO), counts)

    # --- for the endpoint's responses ------------------------------------------------------------

    def finals(self, session: Session) -> list[UsageReport]:
        """The final reports (TERMR) of the session's URRs freed since last asked: deleted with it, or
        removed from it."""
        now = self._clock()
        reports = []
        with self._lock:
            for urr_id, usage in sorted(self._upf.final_usage(session.seid).items()):
                counts = _counts(usage)
                key = (session.seid, urr_id)
                measurement = self._measurements.pop(key, None)
                if measurement is None:  # not polled yet: since its creation, or since a report before a restart
                    urr = session.urrs.get(urr_id) or Urr(id=urr_id, measurement_method=frozenset({"VOLUM"}))
                    measurement = self._started(key, session.node_id, urr, counts, now, self._seqns.get(key, 0))
                self._retire(measurement.node_id, counts)
                if measurement.first_packet is None and counts != measurement.last:
                    measurement.first_packet = now
                reports.append(measurement.report(urr_id, "termination", counts, now))
            self._keep_seqns((), [(session.seid, report.urr_id) for report in reports])  # the URRs are gone
        return reports

    def query(self, session: Session, urr_ids: Iterable[int]) -> list[UsageReport]:
        """Immediate reports (IMMER) of the session's URRs named, each starting a new measurement;
        URRs it has not (or without a slot) are left out."""
        slots = session.urr_usage_slots()
        wanted = sorted(urr_id for urr_id in set(urr_ids) if urr_id in slots)
        if not wanted:
            return []
        now = self._clock()
        reports = []
        with self._lock:
            read = self._upf.usage({slot for urr_id in wanted for slot in slots[urr_id]})
            for urr_id in wanted:
                counts = _sum(read, slots[urr_id]) or ZERO
                urr = session.urrs[urr_id]
                measurement = self._measurement(session.node_id, session.seid, urr_id, urr, counts, now)
                if measurement.first_packet is None and counts != measurement.last:
                    measurement.first_packet = now
                reports.append(measurement.report(urr_id, "immediate", counts, now))
            self._keep_seqns([(session.seid, urr_id) for urr_id in wanted])
        return reports


def _sessions(upf: Any) -> list[Session]:
    """The sessions now (another thread may be changing the table)."""
    while True:
        try:
            return list(upf.sessions.values())
        except RuntimeError:  # changed size during the copy
            continue


def _counts(usage: Any) -> Counts:
    return tuple(int(getattr(usage, name)) for name in COUNTS)  # type: ignore[return-value]


def _sum(read: dict[int, Any], slots: Iterable[int]) -> Optional[Counts]:
    """The sum of the slots' counts (a URR's); None when a slot was not read."""
    total = ZERO
    for slot in slots:
        if slot not in read:
            return None
        total = _plus(total, _counts(read[slot]))
    return total


def _minus(a: Counts, b: Counts) -> Counts:
    return tuple(x - y for x, y in zip(a, b))  # type: ignore[return-value]


def _plus(a: Counts, b: Counts) -> Counts:
    return tuple(x + y for x, y in zip(a, b))  # type: ignore[return-value]


def _at_least(a: Counts, b: Counts) -> bool:
    return all(x >= y for x, y in zip(a, b))


def _reached(volume: Volume, used: Counts) -> bool:
    """Whether the bytes used reach any of the volume's limits (total, uplink, downlink)."""
    uplink, downlink = used[1], used[3]
    return any(
        limit is not None and value >= limit
        for limit, value in ((volume.total, uplink + downlink), (volume.uplink, uplink), (volume.downlink, downlink))
    )


def _period_end(urr: Urr, now: float) -> Optional[float]:
    return now + urr.measurement_period_s if urr.measurement_period_s else None


def _ntp(unix: float) -> int:
    return int(unix) + NTP_EPOCH_OFFSET
