"""The collector over the service (FakeDpp underneath): exact counters, honest rates, one timestamp
per poll, resets on a program reload, tenant filtering, and a failing source or sink costing one
poll or one delivery, never the collector."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from netapp.steering.models import CpuSpec
from netapp.service.service import NetAppService
from netapp.telemetry.collector import Collector
from netapp.telemetry.poll import (
    CPU,
    INTENT,
    NODE_MEASUREMENTS,
    SLICE,
    TELEMETRY,
    Point,
    PointFilter,
    escape_key,
    format_field,
    rfc3339_ns,
)
from netapp.telemetry.sample import Counters
from tests.utils.clock import START, NanoClock
from tests.utils.service import ADMIN, ALICE, BOB, fake_service, intent, slice_spec


class Reloadable:
    """The service as a CounterSource, whose program id the test can change (a reload)."""

    def __init__(self, service: NetAppService):
        self.service = service
        self.program_bump = 0
        self.fail_with: Exception | None = None

    def counters(self) -> Counters:
        if self.fail_with is not None:
            raise self.fail_with
        counters = self.service.counters()
        return dataclasses.replace(counters, program_id=counters.program_id + self.program_bump)


@pytest.fixture
def service(tmp_path):
    service = fake_service(tmp_path)
    service.create_intent(ALICE, intent("voice", 5004))
    service.create_intent(BOB, intent("video", 5006))
    service.put_cpu(ADMIN, CpuSpec(cpu=1, capacity_pps=1000))
    yield service
    service.close()


@pytest.fixture
def clock() -> NanoClock:
    return NanoClock()


@pytest.fixture
def source(service) -> Reloadable:
    return Reloadable(service)


@pytest.fixture
def collector(source, clock) -> Collector:
    return Collector(source, node="edge-1", interval_s=1.0, clock_ns=clock)


def count(service: NetAppService, qualified: str, packets: int, size: int) -> None:
    service.dataplane._dpp.count(service.dataplane.installed_intents[qualified], packets, size)


def the(points: Any, measurement: str, **tags: str) -> Point:
    found = [
        p for p in points if p.measurement == measurement and all(p.tags.get(k) == v for k, v in tags.items())
    ]
    assert len(found) == 1, (measurement, tags, found)
    return found[0]


def test_counters_are_exact_and_the_first_poll_has_no_rates(service, collector):
    count(service, "alice/voice", 10, 100)

    poll = collector.poll_once()

    voice = the(poll.points(), INTENT, intent="voice")
    assert voice.fields == {"packets": 10, "bytes": 1000}
    assert voice.tags == {"node": "edge-1", "tenant": "alice", "intent": "voice"}
    assert poll.elapsed_s is None


def test_rates_are_deltas_over_the_time_between_polls(service, collector, clock):
    collector.poll_once()
    count(service, "alice/voice", 300, 64)
    service.dataplane._dpp.steer(1, 300, 64)
    clock.advance(2)

    poll = collector.poll_once()

    voice = the(poll.points(), INTENT, intent="voice")
    assert voice.fields == {"packets": 300, "bytes": 19200, "packets_rate": 150.0, "bytes_rate": 9600.0}
    cpu = the(poll.points(), CPU, cpu="1")
    assert cpu.fields["packets_rate"] == 150.0
    assert cpu.fields["load"] == pytest.approx(0.15)
    assert cpu.fields["capacity_pps"] == 1000 and cpu.fields["enabled"] is True
    assert poll.elapsed_s == 2.0


def test_every_point_of_a_poll_has_the_same_timestamp(service, collector, clock):
    service.put_slice(ALICE, slice_spec())
    collector.poll_once()
    clock.advance(1)

    poll = collector.poll_once()

    stamps = {point.time_ns for point in poll.points()}
    assert stamps == {clock.now}
    lines = "\n".join(text for text, _ in poll.line_chunks(3)).splitlines()
    assert {line.rsplit(" ", 1)[1] for line in lines} == {str(clock.now)}
    assert len(lines) == poll.point_count == len(list(poll.points()))
    measurements = {point.measurement for point in poll.points()}
    assert {INTENT, SLICE, CPU, TELEMETRY, "dpp_verdict", "dpp_action", "dpp_reason"} <= measurements


def test_a_program_reload_restarts_every_rate_instead_of_reporting_a_negative_one(
    service, source, collector, clock
):
    count(service, "alice/voice", 500, 64)
    collector.poll_once()
    source.program_bump = 1  # the program was replaced: counters start again from zero
    service.dataplane._dpp.stats_rules_clear(0, 16)
    count(service, "alice/voice", 5, 64)
    clock.advance(1)

    poll = collector.poll_once()

    assert poll.reset and poll.elapsed_s is None
    rated = [p for p in poll.points() if any(name.endswith("_rate") for name in p.fields)]
    assert rated == []
    count(service, "alice/voice", 10, 64)
    clock.advance(1)
    after = collector.poll_once()
    assert the(after.points(), INTENT, intent="voice").fields["packets_rate"] == 10.0


def test_a_counter_that_went_backwards_has_no_rate_that_poll(service, collector, clock):
    count(service, "alice/voice", 50, 64)
    collector.poll_once()
    slot = service.dataplane.installed_intents["alice/voice"]
    service.dataplane._dpp.stats_rules_clear(slot, 1)
    clock.advance(1)

    voice = the(collector.poll_once().points(), INTENT, intent="voice")

    assert voice.fields == {"packets": 0, "bytes": 0}


def test_an_intent_recreated_in_another_slot_starts_without_a_rate(service, collector, clock):
    count(service, "alice/voice", 50, 64)
    collector.poll_once()
    service.create_intent(ALICE, intent("holder", 7000))  # takes the freed slot next
    service.delete_intent(ALICE, "voice")
    service.create_intent(ALICE, intent("voice", 5004))
    count(service, "alice/voice", 80, 64)
    clock.advance(1)

    voice = the(collector.poll_once().points(), INTENT, intent="voice")

    assert voice.fields == {"packets": 80, "bytes": 80 * 64}


def test_a_resized_slice_restarts_its_rate(service, collector, clock):
    service.put_slice(ALICE, slice_spec())
    collector.poll_once()
    clock.advance(1)
    assert "packets_rate" in the(collector.poll_once().points(), SLICE, slice="embb").fields
    members = {"vnis": [1093, 1094], "teids": [0x8894D0D4], "ue_prefixes": ["10.60.0.0/16"], "dscp": [46]}
    service.put_slice(ALICE, slice_spec(members=members))
    clock.advance(1)

    embb = the(collector.poll_once().points(), SLICE, slice="embb")

    assert "packets_rate" not in embb.fields
    assert embb.fields["intents"] == 6


def test_slice_points_sum_their_intents(service, collector):
    service.put_slice(ALICE, slice_spec())
    members = [q for q in service.dataplane.installed_intents if q.startswith("alice/embb-")]
    for n, qualified in enumerate(members, start=1):
        count(service, qualified, n, 100)

    poll = collector.poll_once()

    embb = the(poll.points(), SLICE, slice="embb")
    total = sum(range(1, len(members) + 1))
    assert (embb.fields["packets"], embb.fields["bytes"]) == (total, total * 100)
    member_points = [p for p in poll.points() if p.measurement == INTENT and p.tags.get("slice") == "embb"]
    assert len(member_points) == len(members) == embb.fields["intents"]


def test_a_tenant_sees_only_its_own_intents_and_slices_and_no_node_measurements(service, collector):
    service.put_slice(BOB, slice_spec("urllc"))
    poll = collector.poll_once()

    bobs = list(poll.points(PointFilter(tenant="bob")))

    assert bobs and {p.tags["tenant"] for p in bobs} == {"bob"}
    assert not {p.measurement for p in bobs} & NODE_MEASUREMENTS
    admins = {p.measurement for p in poll.points(PointFilter())}
    # none attached, none probed, no UPF, no ATSSS, no dispatcher, no notifier given to this collector
    unseen = {"dpp_interface", "dpp_alternative", "dpp_upf_buffering", "dpp_atsss_ack", "dpp_rss_worker",
              "dpp_notification"}
    assert NODE_MEASUREMENTS - unseen <= admins


def test_filters_narrow_by_intent_slice_and_measurement(service, collector):
    service.put_slice(ALICE, slice_spec())
    poll = collector.poll_once()

    by_intent = list(poll.points(PointFilter(tenant="alice", intents=frozenset({"voice"}))))
    by_slice = list(poll.points(PointFilter(tenant="alice", slices=frozenset({"embb"}))))
    cpus_only = list(poll.points(PointFilter(measurements=frozenset({CPU}))))

    assert [(p.measurement, p.tags.get("intent")) for p in by_intent] == [(INTENT, "voice")]
    assert {p.tags["slice"] for p in by_slice} == {"embb"} and len(by_slice) == 6
    assert {p.measurement for p in cpus_only} == {CPU}


def test_a_failing_source_costs_one_poll_and_is_counted(source, collector):
    source.fail_with = RuntimeError("the service is not started")

    assert collector.poll_once() is None

    source.fail_with = None
    poll = collector.poll_once()
    assert poll is not None
    stats = the(poll.points(), TELEMETRY, component="collector").fields
    assert (stats["polls"], stats["polls_failed"]) == (1, 1)


class Sink:
    name = "recording"

    def __init__(self, fail: bool = False):
        self.polls: list[Any] = []
        self.fail = fail

    def offer(self, poll):
        if self.fail:
            raise RuntimeError("sink bug")
        self.polls.append(poll)

    def stats(self):
        return {"points_written": sum(p.point_count for p in self.polls)}

    def close(self, timeout_s: float = 5.0):
        pass


def test_a_failing_sink_does_not_stop_the_others_or_the_listeners(source, clock):
    good = Sink()
    heard: list[int] = []
    collector = Collector(source, node="n", sinks=[Sink(fail=True), good], clock_ns=clock)
    collector.add_listener(lambda poll: heard.append(poll.seq))

    collector.poll_once()
    collector.poll_once()

    assert [p.seq for p in good.polls] == heard == [1, 2]
    reported = [p for p in good.polls[-1].points() if p.tags.get("component") == "recording"]
    # Both sinks are named "recording": each reports its own stats.
    assert {"points_written": good.polls[0].point_count} in [p.fields for p in reported]


def test_a_snapshot_has_counters_but_no_rates_and_leaves_the_polls_alone(service, collector, clock):
    collector.poll_once()
    count(service, "alice/voice", 7, 10)
    clock.advance(1)

    snapshot = collector.snapshot()
    poll = collector.poll_once()

    assert the(snapshot.points(), INTENT, intent="voice").fields == {"packets": 7, "bytes": 70}
    assert the(poll.points(), INTENT, intent="voice").fields["packets_rate"] == 7.0
    assert poll.seq == 2


def test_the_collector_thread_polls_on_its_interval(source):
    heard: list[int] = []
    collector = Collector(source, node="n", interval_s=0.05)
    collector.add_listener(lambda poll: heard.append(poll.seq))
    collector.start()
    try:
        deadline = __import__("time").monotonic() + 5
        while len(heard) < 3 and __import__("time").monotonic() < deadline:
            __import__("time").sleep(0.01)
    finally:
        collector.stop()
    assert heard[:3] == [1, 2, 3]


@pytest.mark.parametrize(
    "text, escaped",
    [("plain", "plain"), ("a b", r"a\ b"), ("a,b", r"a\,b"), ("a=b", r"a\=b"), ("a\\b", "a\\\\b")],
)
def test_tag_values_are_escaped_for_line_protocol(text, escaped):
    assert escape_key(text) == escaped


def test_fields_are_typed_for_line_protocol():
    assert [format_field(v) for v in (3, 2.5, True, False)] == ["3i", "2.5", "true", "false"]
    assert math.isclose(float(format_field(1e20)), 1e20)


def test_timestamps_render_with_nanoseconds():
    assert rfc3339_ns(START + 123) == "2025-06-15T15:06:40.000000123Z"


def test_with_intent_rates_off_intents_carry_counters_only_and_the_rest_keep_their_rates(
    service, source, clock
):
    collector = Collector(source, node="edge-1", clock_ns=clock, intent_rates=False)
    collector.poll_once()
    count(service, "alice/voice", 30, 64)
    service.dataplane._dpp.steer(1, 30, 64)
    clock.advance(1)

    poll = collector.poll_once()

    assert the(poll.points(), INTENT, intent="voice").fields == {"packets": 30, "bytes": 1920}
    assert the(poll.points(), CPU, cpu="1").fields["packets_rate"] == 30.0
    lines = "\n".join(text for text, _ in poll.line_chunks()).splitlines()
    (voice_line,) = [line for line in lines if line.startswith("dpp_intent,intent=voice,")]
    assert "_rate" not in voice_line
