"""The telemetry of a running NetApp: the collector over the service, with the sinks its settings
ask for, the subscriptions (a collector listener), the event streams, and the delivery counts of
the notifiers (the subscriptions' and the service's: netapp.telemetry.notifications). `netapp serve` starts it
after the service and stops it before; the API reaches it as `app.state.telemetry` (None when
telemetry is disabled)."""

from __future__ import annotations

import logging
from typing import Optional

from netapp.core.config import MetricsListenerSettings, Settings, StreamSettings
from netapp.telemetry.collector import Collector, Sink
from netapp.telemetry.metrics_listener import MetricsListener
from netapp.telemetry.notifications import TELEMETRY_SUBSCRIPTIONS, NotificationPoints
from netapp.telemetry.notify import Notifier
from netapp.telemetry.sample import CounterSource
from netapp.telemetry.stream import StreamHub
from netapp.telemetry.subscriptions import SubscriptionManager

log = logging.getLogger("netapp.telemetry")


class Telemetry:
    """The collector and its sinks, the subscriptions and the streams, started and stopped
    together. Without a subscription manager the subscription routes answer 503."""

    def __init__(
        self,
        collector: Collector,
        subscriptions: Optional[SubscriptionManager] = None,
        stream_settings: Optional[StreamSettings] = None,
        metrics_listener: Optional[MetricsListenerSettings] = None,
    ):
        self.collector = collector
        self.subscriptions = subscriptions
        self.streams = StreamHub(collector, stream_settings or StreamSettings())
        enabled = metrics_listener is not None and metrics_listener.enabled
        self.metrics_listener = MetricsListener(collector, metrics_listener) if enabled else None
        if subscriptions is not None:
            collector.add_listener(subscriptions.offer)

    @classmethod
    def from_settings(cls, settings: Settings, source: CounterSource) -> Optional["Telemetry"]:
        """None when telemetry is disabled."""
        telemetry = settings.telemetry
        if not telemetry.enabled:
            return None
        collector = Collector(
            source,
            node=telemetry.node,
            interval_s=telemetry.interval_s,
            sinks=_sinks(settings),
            intent_rates=telemetry.intent_rates,
        )
        subscriptions = SubscriptionManager.open(
            settings.state_dir, telemetry.subscriptions, interval_s=telemetry.interval_s
        )
        collector.add_source(NotificationPoints(_notifiers(subscriptions, source), telemetry.node))
        return cls(collector, subscriptions, telemetry.stream, telemetry.metrics_listener)

    def start(self) -> None:
        """Raises OSError when the metrics listener cannot bind (nothing else is started then)."""
        if self.metrics_listener is not None:
            self.metrics_listener.start()
        if self.subscriptions is not None:
            self.subscriptions.start()  # first: the collector's first poll finds it listening
        self.streams.start()
        self.collector.start()
        log.info(
            "telemetry: polling every %.3g s into %s",
            self.collector.interval_s,
            ", ".join(sink.name for sink in self.collector.sinks) or "the API only",
        )

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.metrics_listener is not None:
            self.metrics_listener.stop()
        self.streams.stop()
        self.collector.stop(timeout_s)
        if self.subscriptions is not None:
            self.subscriptions.stop(timeout_s)


def _notifiers(subscriptions: SubscriptionManager, source: CounterSource) -> dict[str, Notifier]:
    """The subscriptions' notifier and the counter source's own, if it has any (the service's MEC
    notifiers: NetAppService.notifiers)."""
    own = getattr(source, "notifiers", None)
    return {TELEMETRY_SUBSCRIPTIONS: subscriptions.notifier, **(own() if callable(own) else {})}


def _sinks(settings: Settings) -> list[Sink]:
    sinks: list[Sink] = []
    if settings.telemetry.influxdb is not None:
        from netapp.telemetry.influx import InfluxSink

        sinks.append(InfluxSink.from_settings(settings.telemetry.influxdb))
    return sinks
