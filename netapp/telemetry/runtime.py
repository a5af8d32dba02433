"""The telemetry of a running NetApp: the collector over the service, with the sinks its settings
ask for. `netapp serve` starts it after the service and stops it before; the API reaches it as
`app.state.telemetry` (None when telemetry is disabled)."""

from __future__ import annotations

import logging
from typing import Optional

from netapp.core.config import Settings
from netapp.telemetry.collector import Collector, Sink
from netapp.telemetry.sample import CounterSource

log = logging.getLogger("netapp.telemetry")


class Telemetry:
    """The collector and its sinks, started and stopped together."""

    def __init__(self, collector: Collector):
        self.collector = collector

    @classmethod
    def from_settings(cls, settings: Settings, source: CounterSource) -> Optional["Telemetry"]:
        """None when telemetry is disabled."""
        telemetry = settings.telemetry
        if not telemetry.enabled:
            return None
        collector = Collector(
            source, node=telemetry.node, interval_s=telemetry.interval_s, sinks=_sinks(settings)
        )
        return cls(collector)

    def start(self) -> None:
        self.collector.start()
        log.info(
            "telemetry: polling every %.3g s into %s",
            self.collector.interval_s,
            ", ".join(sink.name for sink in self.collector.sinks) or "the API only",
        )

    def stop(self, timeout_s: float = 5.0) -> None:
        self.collector.stop(timeout_s)


def _sinks(settings: Settings) -> list[Sink]:
    sinks: list[Sink] = []
    if settings.telemetry.influxdb is not None:
        from netapp.telemetry.influx import InfluxSink

        sinks.append(InfluxSink.from_settings(settings.telemetry.influxdb))
    return sinks
