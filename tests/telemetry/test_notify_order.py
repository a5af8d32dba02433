"""A subscription's notifications go out in the order they were made, one at a time, even with
several workers and retries (netapp.telemetry.notify.DeliveryQueue); other subscriptions are not
held back by it. MEC 011's service availability notifications carry no sequence number, so a
receiver cannot put them back in order itself."""

from __future__ import annotations

import json

import pytest

from netapp.core.config import SubscriptionSettings
from netapp.telemetry.notify import Delivery, DeliveryQueue, DeliveryStats, Notifier
from tests.utils.callbacks import CallbackReceiver


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def delivery(subscription: str, sequence: int, url: str = "http://127.0.0.1:9/") -> Delivery:
    body = json.dumps({"sequence": sequence}).encode()
    return Delivery(subscription, url, "secret", body, sequence, DeliveryStats())


def names(*deliveries: Delivery) -> list[tuple[str, int]]:
    return [(d.subscription_id, d.sequence) for d in deliveries]


def test_the_next_of_a_subscription_is_due_only_when_the_one_out_is_done():
    queue = DeliveryQueue(10, Clock())
    a1, a2, a3, b1 = delivery("a", 1), delivery("a", 2), delivery("a", 3), delivery("b", 1)
    for one in (a1, a2, a3, b1):
        assert queue.put(one)

    assert names(queue.get(), queue.get()) == [("a", 1), ("b", 1)], "b is not held back by a"
    assert len(queue) == 2, "a's second and third wait"
    queue.done(a1)
    assert names(queue.get()) == [("a", 2)]
    queue.done(a2)
    queue.done(b1)
    assert names(queue.get()) == [("a", 3)]
    queue.done(a3)
    assert len(queue) == 0
    queue.close()
    assert queue.get() is None


def test_a_retry_holds_its_subscription_back_until_it_is_done():
    clock = Clock()
    queue = DeliveryQueue(10, clock)
    a1, a2 = delivery("a", 1), delivery("a", 2)
    queue.put(a1)
    queue.put(a2)
    assert queue.get() is a1
    queue.retry(a1, 5.0)

    clock.now += 5.0
    assert queue.get() is a1, "the retry, not the next one"
    queue.done(a1)
    assert queue.get() is a2


def test_what_waits_behind_a_retry_is_left_behind_at_close_and_counts_against_the_capacity():
    queue = DeliveryQueue(2, Clock())
    a1, a2 = delivery("a", 1), delivery("a", 2)
    queue.put(a1)
    queue.put(a2)
    assert not queue.put(delivery("b", 1)), "full: the one waiting counts"
    assert queue.get() is a1
    queue.retry(a1, 60.0)
    queue.close()

    assert queue.get() is None
    assert names(*queue.left_behind()) == [("a", 1), ("a", 2)]


def test_a_subscriber_that_stopped_answering_cannot_fill_the_queue_the_others_share():
    queue = DeliveryQueue(10, Clock(), max_behind=2)
    a1 = delivery("a", 1)
    queue.put(a1)
    assert queue.get() is a1
    queue.retry(a1, 60.0)  # its receiver is down

    assert [queue.put(delivery("a", sequence)) for sequence in (2, 3, 4)] == [True, True, False]
    assert all(queue.put(delivery("b", sequence)) for sequence in (1, 2))
    assert len(queue) == 5


@pytest.mark.parametrize("workers", [1, 4])
def test_several_workers_send_a_subscribers_notifications_in_order_while_one_is_in_flight(workers):
    settings = SubscriptionSettings(workers=workers, timeout_ms=30_000, callback_allow=["127.0.0.1/32"])
    notifier = Notifier(settings)
    with CallbackReceiver() as receiver:
        receiver.hold()  # the first stays in flight while the others are queued
        notifier.start()
        try:
            for sequence in range(1, 6):
                notifier.send(delivery("a", sequence, receiver.url))
            receiver.wait_holding(1)
            assert receiver.holding == 1 and len(notifier.queue) == 4, "the others wait their turn"
        finally:
            receiver.release()
        received = receiver.wait_for(5)
        notifier.stop()

    assert [request.headers["x-dpp-subscription"] for request in received] == ["a"] * 5
    assert [request.json()["sequence"] for request in received] == [1, 2, 3, 4, 5]
    assert notifier.totals().sent == 5
