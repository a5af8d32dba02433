"""api/telemetry.md is the measurement schema: every tag and field a poll writes is documented there
with its type, and everything documented is written."""

from __future__ import annotations

import re
from pathlib import Path

import numpy
import pytest

from netapp.atsss.abi import MAX_PATHS_PER_SESSION
from netapp.atsss.abi import Path as PathEntry
from netapp.atsss.abi import PathFlags
from netapp.atsss.models import AtsssSession
from netapp.atsss.service import PathReading, path_key
from netapp.atsss.table import PathCounts, PathLoss
from netapp.atsss.acks import AckCounters
from netapp.atsss.mts import QosStatus
from netapp.atsss.qos_watch import QosChange
from netapp.atsss.telemetry import AckPoints, AtsssPoints
from netapp.core.config import InfluxSettings, SubscriptionSettings
from netapp.telemetry.collector import Collector
from netapp.telemetry.influx import InfluxSink
from netapp.telemetry.notifications import NotificationPoints
from netapp.telemetry.notify import Notifier
from netapp.telemetry.poll import ATSSS_QOS_FIELDS, MEASUREMENTS, TELEMETRY
from netapp.telemetry.sample import AlternativeCounters, Counters, CpuCounters, IntentTable, InterfaceCounters
from netapp.upf.abi import Usage
from netapp.upf.models import FSeid, Session, Urr
from netapp.upf.buffering import Buffering
from netapp.upf.sessions import NoApplier
from netapp.upf.telemetry import BufferingPoints, UsagePoints
from netapp.upf.usage import UsageMonitor

DOC = Path(__file__).resolve().parents[2] / "api" / "telemetry.md"
TYPES = {"integer": int, "float": float, "boolean": bool}


def documented() -> dict[str, dict[str, dict[str, str]]]:
    """measurement -> {"tag": {name: ""}, "field": {name: type}} from the doc's tables."""
    schema: dict[str, dict[str, dict[str, str]]] = {}
    measurement = None
    for line in DOC.read_text().splitlines():
        heading = re.match(r"^### `(\w+)`", line)
        if heading:
            measurement = heading.group(1)
            schema[measurement] = {"tag": {}, "field": {}}
            continue
        row = re.match(r"^\| (tag|field) \| `(\w+)` \| ?(\w*) ?\|", line)
        if row and measurement:
            schema[measurement][row.group(1)][row.group(2)] = row.group(3)
    return schema


class EverythingSource:
    """Counters with one of everything: intents in and out of a slice, a metered CPU, an
    interface; each read counts up so the second poll has rates."""

    def __init__(self) -> None:
        self.reads = 0

    def counters(self) -> Counters:
        self.reads += 1
        n = self.reads
        table = IntentTable(
            revision=1,
            tenants=("alice", "alice"),
            ids=("voice", "embb-1"),
            slices=(None, "embb"),
            slots=numpy.array([0, 1], dtype=numpy.int64),
        )
        return Counters(
            program_id=1,
            stats_map_id=2,
            intents=table,
            rule_counters=numpy.array([[n, 64 * n], [2 * n, 128 * n]], dtype=numpy.uint64),
            cpus=(CpuCounters(1, 10 * n, 640 * n, True, False, 1000),),
            verdicts={"PASS": (n, 64 * n)},
            actions={"steer": (n, 64 * n)},
            reasons={"none": (n, 64 * n)},
            interfaces=(InterfaceCounters("eth0", n, n, n, n, 0, 0, 0, 0),),
            alternatives=(AlternativeCounters("10.30.0.2", True, 1, 10 * n, 10 * n),),
            workers={"1": (5 * n, 320 * n)},
        )


class FakeUpf:
    """One session with one URR counting on slot 1, counting up on each read (netapp.upf.usage's view
    of netapp.upf.sessions.Upf)."""

    def __init__(self) -> None:
        self.reads = 0
        urr = Urr(id=1, measurement_method=frozenset({"VOLUM"}))
        remote = FSeid(seid=9, ipv4="10.0.0.1")
        self.sessions = {5: Session(seid=5, node_id="smf-1", remote=remote, urrs={1: urr}, urr_slots={1: 1})}

    def usage(self, slots):
        self.reads += 1
        n = self.reads
        return {slot: Usage(ul_packets=n, ul_bytes=100 * n, dl_packets=2 * n, dl_bytes=300 * n) for slot in slots}

    def final_usage(self, seid):
        return {}


class FakeAtsss:
    """One ATSSS session of two paths sending and receiving more on each read (netapp.atsss.service's
    readings)."""

    def __init__(self) -> None:
        self.reads = 0
        paths = [{"access": access, "local": f"192.0.2.{n}", "peer": f"198.51.100.{n}", "local_port": 5000 + n,
                  "peer_port": 6000 + n, "source_mac": "02:00:00:00:aa:01", "next_hop_mac": "02:00:00:00:bb:01"}
                 for n, access in ((1, "3GPP"), (2, "non-3GPP"))]
        self.session = AtsssSession.model_validate({
            "name": "ue5", "tenant": "alice", "ue": "10.60.0.5", "mode": "weighted", "effective_mode": "weighted",
            "paths": paths, "slots": [1, 2], "revision": 1, "updated_at": "2026-11-29T12:00:00Z"})

    def readings(self) -> list[PathReading]:
        self.reads += 1
        n = self.reads
        entry = PathEntry(flags=PathFlags.UP, rtt_us=20000)
        return [PathReading(self.session, index, entry, PathCounts(n, 100 * n, n, 90 * n, n), 0.5, PathLoss(9 * n, n),
                            path_key(self.session, index))
                for index in range(2)]


def one_qos_change(windows) -> list[QosChange]:
    """What netapp.atsss.qos_watch.QosWatch returns when an MTS session's qosStatus changed: one
    change, of a session of four paths, each of known loss."""
    return [QosChange("alice", "mts-1", "ue5", "app-1", QosStatus.MET, QosStatus.NOT_MET, "qosD.maxLoss: ...",
                      (0.1, 0.2, 0.3, 0.4), (True, True, False, True))]


def everything_collector(sinks=()) -> Collector:
    """A collector of EverythingSource's counters, a UPF's usage and its buffering, ATSSS's paths
    and a change of an MTS session's qosStatus, the Ack sender's counts, a notifier's."""
    collector = Collector(EverythingSource(), node="edge-1", sinks=list(sinks))
    collector.add_source(UsagePoints(UsageMonitor(FakeUpf(), lambda seid, reports: None), "edge-1"))
    collector.add_source(BufferingPoints(Buffering(NoApplier(), None), "edge-1"))
    collector.add_source(AtsssPoints(FakeAtsss().readings, "edge-1", path_metrics=True, on_losses=one_qos_change))
    collector.add_source(AckPoints(AckCounters(sent=3, failed={"ENETDOWN": 1}), "edge-1"))
    collector.add_source(NotificationPoints({"telemetry_subscriptions": Notifier(SubscriptionSettings())}, "edge-1"))
    return collector


class SinkWithStats:
    """Reports the fields a sink documents (the InfluxDB sink's, as the schema lists them)."""

    name = "influxdb"

    def __init__(self, fields):
        self.fields = fields

    def offer(self, poll):
        pass

    def stats(self):
        return self.fields

    def close(self, timeout_s=5.0):
        pass


@pytest.fixture(scope="module")
def schema():
    return documented()


@pytest.fixture(scope="module")
def points(schema):
    sink_fields = {
        name: 0 for name in schema[TELEMETRY]["field"] if name.startswith(("points_", "write_", "batches_"))
    }
    collector = everything_collector([SinkWithStats(sink_fields)])
    collector.poll_once()
    return list(collector.poll_once().points())


def test_the_doc_lists_exactly_the_measurements_of_the_code(schema):
    assert set(schema) == set(MEASUREMENTS)


def test_a_qos_change_has_a_loss_field_for_each_path_a_session_may_have():
    assert ATSSS_QOS_FIELDS == ("paths_up", *(f"loss_{index}" for index in range(MAX_PATHS_PER_SESSION)))


def test_every_tag_written_is_documented(schema, points):
    for point in points:
        assert set(point.tags) <= set(schema[point.measurement]["tag"]), point


def test_every_field_written_is_documented_with_its_type(schema, points):
    for point in points:
        documented_fields = schema[point.measurement]["field"]
        for name, value in point.fields.items():
            assert name in documented_fields, (point.measurement, name)
            assert type(value) is TYPES[documented_fields[name]], (point.measurement, name, value)


def test_everything_documented_is_written(schema, points):
    written: dict[str, set[str]] = {}
    for point in points:
        written.setdefault(point.measurement, set()).update(point.tags, point.fields)
    for measurement, parts in schema.items():
        assert set(parts["tag"]) | set(parts["field"]) == written[measurement], measurement


def test_the_influxdb_sink_reports_the_documented_fields(schema):
    sink = InfluxSink.from_settings(
        InfluxSettings(url="http://127.0.0.1:9", token="user:pass", bucket="dpp/autogen")
    )
    try:
        reported = set(sink.stats())
    finally:
        sink.close(0.1)
    documented_sink_fields = {
        name for name in schema[TELEMETRY]["field"] if name.startswith(("points_", "write_", "batches_"))
    }
    assert reported == documented_sink_fields
