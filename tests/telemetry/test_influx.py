"""The InfluxDB sink against a real influxd 1.8 (fixtures in conftest.py): what InfluxDB holds is
each poll's counters under the poll's one timestamp; an InfluxDB that is down, stalled or
misconfigured never delays the collector, what fits in the buffer arrives afterwards, and what does
not is counted: offered == written + dropped (+ still queued)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from netapp.atsss.mts import QosStatus
from netapp.atsss.qos_watch import QosChange
from netapp.atsss.telemetry import AtsssPoints
from netapp.service.service import NetAppService
from netapp.telemetry.collector import Collector
from netapp.telemetry.influx import InfluxSink
from netapp.telemetry.poll import ATSSS_QOS, INTENT, SLICE, TELEMETRY, UPF_ASSOCIATION, UPF_URR, Poll
from netapp.upf.telemetry import UsagePoints
from netapp.upf.usage import UsageMonitor
from tests.utils.influxd import field_types, influx_settings, points_per_time, rows, write_lines
from tests.telemetry.test_schema import FakeAtsss, FakeUpf
from tests.utils.service import ALICE, BOB, fake_service, intent, slice_spec

SECOND = 1_000_000_000
START = 1_750_000_000 * SECOND
INTERVAL_S = 0.1  # polls during outages: ten a second, so that 300 polls take at least 30 s
OUTAGE_POLLS = 300
STALL_S = 4.0
STALL_TIMEOUT_MS = 1000  # a write's timeout while influxd is stalled: a quarter of the stall
# An offer takes microseconds; one that waited for InfluxDB would take the stall (STALL_S) or a
# write's retries. A quarter of the stall tells the two apart and leaves a loaded machine's
# scheduling hiccups (tens of milliseconds on 2 shared cores) well inside.
OFFER_BUDGET_S = STALL_S / 4


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now


class TimedSink:
    """A sink whose offer() is timed: what the collector waits for. Two sinks of one collector
    need two names: their dpp_telemetry points would otherwise be one series, and overwrite."""

    def __init__(self, sink: InfluxSink, name: str = "influxdb"):
        self.sink = sink
        self.name = name
        self.offer_s: list[float] = []

    def offer(self, poll: Poll) -> None:
        started = time.perf_counter()
        self.sink.offer(poll)
        self.offer_s.append(time.perf_counter() - started)

    def stats(self) -> dict[str, Any]:
        return self.sink.stats()

    def close(self, timeout_s: float = 5.0) -> None:
        self.sink.close(timeout_s)


@pytest.fixture
def service(tmp_path):
    service = fake_service(tmp_path / "state")
    service.create_intent(ALICE, intent("voice", 5004))
    service.create_intent(BOB, intent("video", 5006))
    service.put_slice(ALICE, slice_spec())
    yield service
    service.close()


def count(service: NetAppService, qualified: str, packets: int, size: int) -> None:
    service.dataplane._dpp.count(service.dataplane.installed_intents[qualified], packets, size)


def drive(collector: Collector, service: NetAppService, seconds: float) -> list[Poll]:
    """Poll every INTERVAL_S for `seconds`, with traffic on alice/voice between polls."""
    polls = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        polls.append(poll_with_traffic(collector, service))
    return polls


def drive_polls(collector: Collector, service: NetAppService, count_of: int) -> list[Poll]:
    """`count_of` polls INTERVAL_S apart, with traffic on alice/voice between polls: as many however
    slowly a loaded machine makes them (they then take longer)."""
    return [poll_with_traffic(collector, service) for _ in range(count_of)]


def poll_with_traffic(collector: Collector, service: NetAppService) -> Poll:
    count(service, "alice/voice", 5, 100)
    poll = collector.poll_once()
    assert poll is not None
    time.sleep(INTERVAL_S)  # the pace of the polls, not a wait for anything
    return poll


def every_point_of(polls: list[Poll]) -> dict[int, int]:
    return {poll.time_ns: poll.point_count for poll in polls}


def assert_accounted(stats: dict[str, int]) -> None:
    assert (
        stats["points_offered"] == stats["points_written"] + stats["points_dropped"] + stats["points_queued"]
    )


# --- what arrives ------------------------------------------------------------------------------


def test_influxdb_holds_each_polls_counters_and_tags_under_the_polls_one_timestamp(
    influxd, database, service, make_sink
):
    sink = make_sink(influx_settings(influxd, database))
    clock = Clock()
    collector = Collector(service, node="edge-1", sinks=[sink], clock_ns=clock)
    polls = []
    for n in (1, 2, 3):
        count(service, "alice/voice", 10 * n, 100)
        count(service, "bob/video", 7 * n, 64)
        polls.append(collector.poll_once())
        clock.now += SECOND

    assert sink.flush(10)

    intents = {(row["time"], row["tenant"], row["intent"]): row for row in rows(influxd, database, INTENT)}
    for poll, voice_packets, video_packets in zip(polls, (10, 30, 60), (7, 21, 42)):
        voice = intents[poll.time_ns, "alice", "voice"]
        video = intents[poll.time_ns, "bob", "video"]
        assert (voice["packets"], voice["bytes"]) == (voice_packets, voice_packets * 100)
        assert (video["packets"], video["bytes"]) == (video_packets, video_packets * 64)
        assert voice["_tags"] == video["_tags"] == {"node", "tenant", "intent"} and voice["node"] == "edge-1"
    assert intents[polls[2].time_ns, "alice", "voice"]["packets_rate"] == 30.0
    assert "packets_rate" not in intents[polls[0].time_ns, "alice", "voice"]  # no rate on the first poll
    members = [row for key, row in intents.items() if key[0] == polls[0].time_ns and "slice" in row]
    assert members and all(row["_tags"] == {"node", "tenant", "intent", "slice"} for row in members)
    (embb,) = [row for row in rows(influxd, database, SLICE) if row["time"] == polls[0].time_ns]
    assert embb["_tags"] == {"node", "tenant", "slice"} and embb["intents"] == len(members)
    assert field_types(influxd, database, INTENT) == {
        "packets": "integer",
        "bytes": "integer",
        "packets_rate": "float",
        "bytes_rate": "float",
    }
    assert points_per_time(influxd, database) == every_point_of(polls)
    stats = sink.stats()
    assert stats["points_written"] == sum(poll.point_count for poll in polls)
    assert (stats["points_dropped"], stats["points_queued"], stats["write_errors"]) == (0, 0, 0)


def test_the_sinks_own_counters_reach_influxdb_as_integers(influxd, database, service, make_sink):
    sink = make_sink(influx_settings(influxd, database))
    collector = Collector(service, node="edge-1", sinks=[sink])
    first = collector.poll_once()
    collector.poll_once()

    assert sink.flush(10)

    own = sorted(
        (row for row in rows(influxd, database, TELEMETRY) if row["component"] == "influxdb"),
        key=lambda row: row["time"],
    )
    assert len(own) == 2 and own[1]["points_offered"] == first.point_count  # stats as the poll was built
    types = field_types(influxd, database, TELEMETRY)
    assert {types[name] for name in sink.stats()} == {"integer"}


def test_a_qos_status_change_is_one_point_of_its_poll_whatever_the_app_instance_holds(
    influxd, database, service, make_sink
):
    """A change of an MTS session's qosStatus, as netapp.atsss.qos_watch.QosWatch returns it, with
    the poll of ATSSS's paths (test_schema's FakeAtsss) that saw it: one dpp_atsss_qos row under the
    poll's time, statuses as tags, the known losses as floats. Its appInsId is the application's
    text: one holding a newline and a line of another tenant's point stays one tag of this point."""
    app = "app-1\ndpp_atsss_qos,node=edge-1,tenant=bob paths_up=9i"
    change = QosChange("alice", "mts-1", "ue5", app, QosStatus.MET, QosStatus.NOT_MET, "qosD.maxLoss: ...",
                       (0.05, None), (True, True))
    sink = make_sink(influx_settings(influxd, database))
    collector = Collector(service, node="edge-1", sinks=[sink], clock_ns=Clock())
    collector.add_source(AtsssPoints(FakeAtsss().readings, "edge-1", on_losses=lambda windows: [change]))
    poll = collector.poll_once()

    assert sink.flush(10)

    [row] = rows(influxd, database, ATSSS_QOS)
    assert row["time"] == poll.time_ns
    assert {tag: row[tag] for tag in row["_tags"]} == {
        "node": "edge-1", "tenant": "alice", "mts_session": "mts-1", "session": "ue5",
        "app": app.replace("\n", "\ufffd"), "previous": "MET", "status": "NOT_MET"}
    assert (row["paths_up"], row["loss_0"], "loss_1" in row) == (2, 0.05, False)
    assert field_types(influxd, database, ATSSS_QOS) == {"paths_up": "integer", "loss_0": "float"}


# --- InfluxDB down, stalled, refusing ----------------------------------------------------------


def test_with_influxdb_down_a_full_buffer_keeps_the_newest_points_and_counts_the_oldest(
    own_influxd, service, make_sink
):
    own_influxd.create_database("tight")
    sink = make_sink(influx_settings(own_influxd, "tight", buffer_points=1000))
    collector = Collector(service, node="edge-1", sinks=[sink])
    own_influxd.stop()

    polls = [collector.poll_once() for _ in range(100)]  # back to back: the buffer fills at once

    offered = sum(poll.point_count for poll in polls)
    held = sink.stats()
    assert held["points_queued"] == 1000 and held["points_dropped"] == offered - 1000
    assert_accounted(held)
    own_influxd.start()
    assert sink.flush(30)
    stats = sink.stats()
    assert (stats["points_written"], stats["points_dropped"]) == (1000, offered - 1000)
    in_db = points_per_time(own_influxd, "tight")
    assert sum(in_db.values()) == 1000
    per_poll = polls[0].point_count
    newest = polls[-((1000 - sink.max_in_flight) // per_poll) :]
    assert all(in_db[poll.time_ns] == per_poll for poll in newest)


@pytest.mark.slow
def test_a_30_s_outage_loses_nothing_that_fits_the_buffer_counts_the_rest_and_never_blocks(
    own_influxd, service, make_sink
):
    """Slow: ~35 s. influxd stopped for OUTAGE_POLLS polls, INTERVAL_S apart (30 s at least); one
    sink has room for the whole outage, the other a buffer of 1000 points."""
    own_influxd.create_database("roomy")
    own_influxd.create_database("tight")
    roomy = TimedSink(make_sink(influx_settings(own_influxd, "roomy", buffer_points=100_000)), "roomy")
    tight = TimedSink(make_sink(influx_settings(own_influxd, "tight", buffer_points=1000)), "tight")
    collector = Collector(service, node="edge-1", sinks=[roomy, tight])
    before = drive(collector, service, 1.0)
    assert roomy.sink.flush(10) and tight.sink.flush(10)

    own_influxd.stop()
    during = drive_polls(collector, service, OUTAGE_POLLS)
    own_influxd.start()

    assert roomy.sink.flush(60) and tight.sink.flush(60)
    polls = before + during
    per_poll = polls[0].point_count
    offered = len(polls) * per_poll
    assert {poll.point_count for poll in polls} == {per_poll}
    assert len(during) * per_poll > 1000, "the outage overflows the tight buffer"
    assert points_per_time(own_influxd, "roomy") == every_point_of(polls)
    assert roomy.stats()["points_written"] == offered and roomy.stats()["points_dropped"] == 0
    stats = tight.stats()
    assert stats["points_offered"] == offered == stats["points_written"] + stats["points_dropped"]
    in_db = points_per_time(own_influxd, "tight")
    assert sum(in_db.values()) == stats["points_written"] <= len(before) * per_poll + 1000
    newest = during[-((1000 - tight.sink.max_in_flight) // per_poll) :]
    assert all(in_db[poll.time_ns] == per_poll for poll in newest)
    assert max(roomy.offer_s + tight.offer_s) < OFFER_BUDGET_S


def test_a_stalled_influxdb_delays_the_points_but_never_the_collector(own_influxd, service, make_sink):
    own_influxd.create_database("stalled")
    sink = TimedSink(make_sink(influx_settings(own_influxd, "stalled", timeout_ms=STALL_TIMEOUT_MS)))
    collector = Collector(service, node="edge-1", sinks=[sink])
    polls = drive(collector, service, 0.5)
    assert sink.sink.flush(10)

    own_influxd.suspend()  # SIGSTOP: connections are accepted, nothing is answered
    try:
        polls += drive(collector, service, STALL_S)
        stalled = sink.stats()
    finally:
        own_influxd.resume()

    assert stalled["points_queued"] > 0 and stalled["write_errors"] > 0
    assert sink.sink.flush(30)
    stats = sink.stats()
    assert stats["points_written"] == sum(poll.point_count for poll in polls) and stats["points_dropped"] == 0
    assert points_per_time(own_influxd, "stalled") == every_point_of(polls)
    assert max(sink.offer_s) < OFFER_BUDGET_S


def test_a_missing_database_holds_the_points_until_it_exists(influxd, service, make_sink):
    sink = make_sink(influx_settings(influxd, "created_late"))
    collector = Collector(service, node="edge-1", sinks=[sink])
    polls = [collector.poll_once() for _ in range(3)]

    assert not sink.flush(1.0)  # 404 database not found: kept and retried, not dropped
    waiting = sink.stats()
    assert waiting["write_errors"] > 0 and waiting["points_dropped"] == 0 and waiting["points_written"] == 0
    influxd.create_database("created_late")
    assert sink.flush(10)
    assert points_per_time(influxd, "created_late") == every_point_of(polls)


def test_points_influxdb_refuses_are_counted_as_rejected_not_retried_forever(
    influxd, database, service, make_sink
):
    write_lines(influxd, database, f'dpp_intent,node=edge-1 packets="text" {START}')  # packets: a string now
    sink = make_sink(influx_settings(influxd, database))
    collector = Collector(service, node="edge-1", sinks=[sink], clock_ns=Clock())
    poll = collector.poll_once()

    assert sink.flush(10)  # HTTP 400, a partial write: every point but the intents' is stored

    stats = sink.stats()
    intents = len(poll.intents.table)
    assert stats["points_rejected"] == stats["points_dropped"] == intents
    assert stats["points_written"] == poll.point_count - intents
    assert stats["write_errors"] == 1 and stats["batches_written"] == 0
    assert_accounted(stats)
    assert sum(points_per_time(influxd, database).values()) == 1 + stats["points_written"]  # 1: the string


def test_the_upfs_usage_reaches_influxdb_per_urr_and_per_association(influxd, database, service, make_sink):
    sink = make_sink(influx_settings(influxd, database))
    collector = Collector(service, node="edge-1", sinks=[sink])
    collector.add_source(UsagePoints(UsageMonitor(FakeUpf(), lambda seid, reports: None), "edge-1"))
    collector.poll_once()

    assert sink.flush(10)

    (urr,) = rows(influxd, database, UPF_URR)
    assert (urr["tenant"], urr["seid"], urr["urr_id"]) == ("smf-1", "5", "1")
    assert (urr["ul_packets"], urr["ul_bytes"], urr["dl_packets"], urr["dl_bytes"]) == (1, 100, 2, 300)
    (association,) = rows(influxd, database, UPF_ASSOCIATION)
    assert association["tenant"] == "smf-1" and association["dl_bytes"] == 300
    assert set(field_types(influxd, database, UPF_URR).values()) == {"integer"}
