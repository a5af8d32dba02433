"""The event stream's parts: a client's bounded queue (drops the oldest, counted, never waits),
the hub (a listener per client, removed when it goes, a cap on clients) and the events."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from netapp.core.config import StreamSettings
from netapp.telemetry.collector import Collector
from netapp.telemetry.poll import PointFilter, Poll
from netapp.service.contract import QuotaExceeded
from netapp.telemetry.stream import PollQueue, StreamHub, TooManyStreams, poll_event
from tests.utils.service import ALICE, BOB, fake_service, intent


@pytest.fixture
def collector(tmp_path):
    service = fake_service(tmp_path)
    service.create_intent(ALICE, intent("voice", 5004))
    service.create_intent(BOB, intent("voice", 5006))
    yield Collector(service, node="edge-1", interval_s=1.0)
    service.close()


def event_data(event: str) -> tuple[str, dict]:
    lines = dict(line.split(": ", 1) for line in event.strip().splitlines())
    return lines["event"], json.loads(lines["data"])


def test_a_poll_event_holds_the_points_the_filter_lets_through(collector):
    poll = collector.poll_once()

    name, data = event_data(poll_event(poll, PointFilter(tenant="alice")))

    assert name == "poll" and data["seq"] == poll.seq and data["node"] == "edge-1"
    assert [(p["measurement"], p["tags"]["tenant"]) for p in data["points"]] == [("dpp_intent", "alice")]
    assert poll_event(poll, PointFilter(tenant="alice")).endswith("\n\n")


def test_a_full_queue_drops_the_oldest_poll_and_counts_it():
    async def scenario() -> tuple[list[int], int, int]:
        queue = PollQueue(2, asyncio.get_running_loop())
        for seq in (1, 2, 3, 4):
            queue.offer(_poll(seq))
        kept = [(await queue.get(0.1)).seq, (await queue.get(0.1)).seq]
        return kept, queue.take_dropped(), queue.take_dropped()

    kept, dropped, dropped_again = asyncio.run(scenario())

    assert kept == [3, 4]
    assert (dropped, dropped_again) == (2, 0)


def test_a_poll_offered_from_another_thread_wakes_the_client_and_none_comes_after_the_keepalive():
    async def scenario() -> tuple[int, object]:
        queue = PollQueue(4, asyncio.get_running_loop())
        threading.Timer(0.05, queue.offer, args=(_poll(7),)).start()
        woken = await queue.get(5.0)
        return woken.seq, await queue.get(0.05)

    seq, nothing = asyncio.run(scenario())

    assert seq == 7 and nothing is None


def test_offering_never_waits_for_the_client():
    # The offers run on the client's own loop thread, so an offer that waited for a reader would
    # never return (the reader cannot run): finishing at all is the proof, without a clock.
    async def scenario() -> tuple[int, int]:
        queue = PollQueue(1, asyncio.get_running_loop())
        for seq in range(10_000):  # nobody reads
            queue.offer(_poll(seq))
        return queue.dropped_total, (await queue.get(0)).seq

    dropped, kept = asyncio.run(scenario())

    assert (dropped, kept) == (9_999, 9_999)


def running_hub(collector: Collector, **settings) -> StreamHub:
    hub = StreamHub(collector, StreamSettings(**settings))
    hub.start()
    return hub


def test_a_client_gets_polls_as_events_and_its_listener_goes_with_it(collector):
    hub = running_hub(collector, keepalive_s=0.05)

    async def scenario() -> list[str]:
        events = hub.events(PointFilter(tenant="bob"))
        received = [await anext(events)]  # retry: ...
        assert hub.clients == 1
        # the poll from another thread, as the poller's; awaited before the read, so that a loaded
        # machine's slow poll is not taken for the keep-alive's silence
        await asyncio.to_thread(collector.poll_once)
        received.append(await anext(events))
        received.append(await anext(events))  # nothing more: a keep-alive
        await events.aclose()
        return received

    retry, poll, keepalive = asyncio.run(scenario())

    assert retry.startswith("retry: ")
    name, data = event_data(poll)
    assert name == "poll" and {p["tags"]["tenant"] for p in data["points"]} == {"bob"}
    assert keepalive == ": keep-alive\n\n"
    assert hub.clients == 0
    assert collector.poll_once() is not None  # no listener left behind to call


def test_a_client_that_fell_behind_is_told_how_many_polls_it_lost(collector):
    hub = running_hub(collector, queue_polls=1)

    async def scenario() -> list[str]:
        events = hub.events(PointFilter())
        await anext(events)
        for _ in range(3):  # the client reads none of them in time
            collector.poll_once()
        received = [await anext(events), await anext(events)]
        await events.aclose()
        return received

    dropped, poll = asyncio.run(scenario())

    assert event_data(dropped) == ("dropped", {"dropped": 2, "droppedTotal": 2})
    assert event_data(poll)[1]["seq"] == 3


def test_clients_beyond_the_most_allowed_are_refused(collector):
    hub = running_hub(collector, max_clients=1)

    async def scenario() -> list[str]:
        first = hub.events(PointFilter())
        await anext(first)
        await asyncio.sleep(0)  # let it take its place
        with pytest.raises(TooManyStreams):
            hub.check_room()
        # One that passed the check before the place went is told and ends.
        late = [event async for event in hub.events(PointFilter())]
        await first.aclose()
        hub.check_room()
        return late

    retry, closed = asyncio.run(scenario())
    assert retry.startswith("retry: ")
    assert event_data(closed) == ("closed", {"reason": "too many streams"})


def test_a_tenant_at_its_streams_quota_is_refused_and_others_are_not(collector):
    hub = running_hub(collector, max_clients=8)

    async def scenario() -> list[str]:
        first = hub.events(PointFilter(tenant="alice"), "alice", 1)
        await anext(first)
        await asyncio.sleep(0)  # let it take its place
        with pytest.raises(QuotaExceeded):
            hub.check_room("alice", 1)
        hub.check_room("bob", 1)
        late = [event async for event in hub.events(PointFilter(tenant="alice"), "alice", 1)]
        assert (hub.held("alice"), hub.held("bob")) == (1, 0)
        await first.aclose()
        hub.check_room("alice", 1)
        return late

    _, closed = asyncio.run(scenario())
    assert event_data(closed) == ("closed", {"reason": "the tenant's streams quota is reached"})


def test_stopping_ends_every_open_stream_and_a_stream_before_the_start_ends_at_once(collector):
    hub = running_hub(collector, keepalive_s=5)

    async def scenario() -> tuple[list[str], list[str]]:
        events = hub.events(PointFilter())
        await anext(events)
        threading.Timer(0.05, hub.stop).start()
        ended = [event async for event in events]
        return ended, [event async for event in hub.events(PointFilter())]

    ended, refused = asyncio.run(scenario())

    assert [event_data(event) for event in ended] == [("closed", {"reason": "telemetry stopped"})]
    assert event_data(refused[-1]) == ("closed", {"reason": "telemetry is not running"})
    assert hub.clients == 0


def _poll(seq: int) -> Poll:
    return Poll(seq, seq, "edge-1", intents=None)  # type: ignore[arg-type]  # never read here
