"""`netapp serve` wires ATSSS's telemetry as the tests of its parts assume: the paths' poll
(netapp.atsss.telemetry.AtsssPoints) reads the service's readings, hands its losses to MEC 015's QoS
watch and asks the service which unread paths it still serves (so a path whose reading a change
dropped keeps its counters: tests/atsss/test_telemetry.py). The service with no data plane and a
collector that only keeps its sources: the wiring, not the poll, is what is checked here."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from netapp.atsss.qos_watch import QosWatch
from netapp.atsss.service import Atsss
from netapp.atsss.telemetry import AtsssPoints
from netapp.cli import serve
from netapp.core.config import Settings
from netapp.service.store import Store


class KeptSources:
    def __init__(self) -> None:
        self.sources: list[Any] = []

    def add_source(self, source: Any) -> None:
        self.sources.append(source)


def test_the_atsss_poll_is_given_the_services_readings_watch_and_served_paths(tmp_path) -> None:
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    try:
        atsss = Atsss(store)
        telemetry = SimpleNamespace(collector=KeptSources())
        serve._atsss_telemetry(Settings(state_dir=tmp_path, auth_disabled=True), atsss, None, telemetry)
        [points] = [source for source in telemetry.collector.sources if isinstance(source, AtsssPoints)]
        assert points.read == atsss.readings and points.served == atsss.served_paths
        assert isinstance(points.on_losses, QosWatch) and points.on_losses.atsss is atsss
    finally:
        store.close()
