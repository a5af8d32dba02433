"""The notifiers' delivery counts as `dpp_notification` points, node-wide, in every poll and scrape:
one point per notifier (the telemetry subscriptions', the MEC 011 termination notifications', the
MEC 011 service availability notifications'), so that callbacks that stop taking notifications
show in /metrics and InfluxDB, not only in the log and in each subscription's own counts."""

from __future__ import annotations

from collections.abc import Mapping

from netapp.telemetry.notify import DeliveryStats, Notifier
from netapp.telemetry.poll import NOTIFICATION, Point

TELEMETRY_SUBSCRIPTIONS = "telemetry_subscriptions"
MEC_TERMINATION = "mec_termination"
MEC_SERVICE_AVAILABILITY = "mec_service_availability"


class NotificationPoints:
    """A collector's point source (netapp.telemetry.collector.PointSource) over named notifiers."""

    name = "notifications"

    def __init__(self, notifiers: Mapping[str, Notifier], node: str):
        self.notifiers = dict(notifiers)
        self.node = node

    def poll(self, time_ns: int) -> list[Point]:
        return [self._point(name, notifier.totals(), time_ns) for name, notifier in sorted(self.notifiers.items())]

    snapshot = poll

    def _point(self, notifier: str, totals: DeliveryStats, time_ns: int) -> Point:
        fields = {"delivered": totals.sent, "retried": totals.retried, "failed": totals.failed,
                  "refused": totals.refused, "dropped": totals.dropped}
        return Point(NOTIFICATION, {"node": self.node, "notifier": notifier}, fields, time_ns)
