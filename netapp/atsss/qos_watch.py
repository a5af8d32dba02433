"""MEC 015 QoS sessions (mtsMode 4, netapp.atsss.mts) watched over their paths' measured loss.

Each telemetry poll hands the loss of its window of every path (netapp.atsss.telemetry.AtsssPoints'
`on_losses`) to QosWatch, which keeps it in the service (Atsss.note_losses), checks the QoS sessions
of the paths whose measured loss changed again and returns each change of their qosStatus as a
QosChange. The telemetry makes each one a `dpp_atsss_qos` point of the same poll (api/telemetry.md),
so a change goes where the tenant's paths' points go: InfluxDB, the event stream and the telemetry
subscriptions, each filtered by tenant as those are. MEC 015 v2.1.1's MTS API has no subscriptions,
and no new address is called: only the sinks and subscribers the operator allowed get it
(telemetry.subscriptions.callback_allow).

A change is one from the status of the previous check of the same session: the first check of a
session (created, or the NetApp started) sets where it stands and tells nothing; its GET says it.

Against flapping, a path's loss checked is an exponentially weighted average of the polls' windows
(Atsss.note_losses, the window's weight telemetry.atsss_loss_weight), and each qosD requirement's
status last told is kept in the service (Atsss.qos_held) for the hysteresis of maxLoss
(netapp.atsss.mts.LOSS_MARGIN): a maxLoss NOT_MET is MET again only once the average is clearly
below the bound, whatever the session's other requirement (maxLatency) did meanwhile, and its GET
says the same as the watch. The change told is of the session's qosStatus, its worst requirement's.

The MTS sessions are read and checked outside the service's lock (a read of every one under it
would hold every change up); the statuses are kept under it, but none of a session an MTS PUT wrote
or a DELETE took away while the check read it (Atsss.watching_mts, hold_qos): kept, they would carry
the old qosD's statuses over to the new one, its maxLoss held to the margin of a requirement the
tenant replaced. Such a session's first check is the next poll's, and its change at this poll, of
a qosD no longer stored, is not told.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

from netapp.atsss import store as stored
from netapp.atsss.models import AtsssSession
from netapp.atsss.mts import QOS, QosCheck, QosD, QosStatus, qos_check, steered_session, worst
from netapp.atsss.readings import PathKey
from netapp.atsss.service import Atsss, MtsKey
from netapp.core.config import TelemetrySettings

# A poll window's weight in a path's average loss when none is given: the setting's default, which
# says why.
LOSS_WEIGHT = TelemetrySettings.model_fields["atsss_loss_weight"].default

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QosChange:
    """The qosStatus of a tenant's MTS session changed over its paths' losses at a poll."""

    tenant: str
    mts_session: str
    session: str  # the ATSSS session it steers
    app: str  # the MTS session's appInsId
    before: QosStatus
    after: QosStatus
    reason: Optional[str]  # NOT_MET, UNVERIFIED: which qosD field and why
    losses: tuple[Optional[float], ...]  # each path's loss as checked (measured, else fed; None: unknown)
    up: tuple[bool, ...]  # each path's state as checked


class QosWatch:
    """The polls' window losses kept in the service; the QoS sessions whose paths' measured loss
    changed checked again, each change of their qosStatus returned (and logged)."""

    def __init__(self, atsss: Atsss, loss_weight: float = LOSS_WEIGHT):
        self.atsss = atsss
        self.loss_weight = loss_weight

    @property
    def statuses(self) -> dict[tuple[str, str], dict[str, QosStatus]]:
        """(tenant, MTS session) -> each qosD requirement's status as last checked, by its field
        (held in the service)."""
        return self.atsss.qos_held

    def __call__(self, windows: dict[PathKey, Optional[float]]) -> list[QosChange]:
        changed = self.atsss.note_losses(windows, self.loss_weight)
        if not changed:
            return []
        with self.atsss.watching_mts() as written:
            qos_sessions = [(tenant, mts_id, ue, body) for tenant, mts_id, ue, body in stored.load_mts(self.atsss.store)
                            if body.get("mtsMode") == QOS]
            checks: dict[MtsKey, tuple[QosCheck, Optional[QosChange]]] = {}
            for tenant, mts_id, ue, body in qos_sessions:
                session = steered_session(self.atsss, tenant, ue)
                if session is not None and (session.tenant, session.name) in changed:
                    checks[(tenant, mts_id)] = self._checked(tenant, mts_id, body, session)
            kept = self.atsss.hold_qos({key: check.requirements for key, (check, _) in checks.items()},
                                       {(tenant, mts_id) for tenant, mts_id, _, _ in qos_sessions}, written)
        return [told(change) for key, (_, change) in checks.items() if key in kept and change is not None]

    def _checked(self, tenant: str, mts_id: str, body: dict, session: AtsssSession
                 ) -> tuple[QosCheck, Optional[QosChange]]:
        """The session's qosD checked, and the change of its qosStatus from the check before (None:
        none, or this is its first)."""
        held = self.statuses.get((tenant, mts_id))
        check = qos_check(QosD.model_validate(body["qosD"]), session, held)
        before = worst(held.values()) if held is not None else None
        if before is None or before == check.status:
            return check, None
        return check, QosChange(tenant, mts_id, session.name, body["appInsId"], before, check.status, check.reason,
                                tuple(path.loss for path in session.paths), tuple(path.up for path in session.paths))


def told(change: QosChange) -> QosChange:
    """`change`, logged."""
    log.warning("MTS session %s of tenant %s: qosStatus %s -> %s over the measured losses%s", change.mts_session,
                change.tenant, change.before.value, change.after.value, f" ({change.reason})" if change.reason else "")
    return change
