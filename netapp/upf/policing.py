"""The QERs' policers (dataplane/bpf/nf/qos/police.h): which QER polices a PDR, and the policer a
QER's direction asks for.

A PDR is policed in its direction (uplink: source interface ACCESS; downlink: the others) by one of
its QERs: one whose gate of that direction is closed (every packet dropped, counted by the policer
as dropped, reason qos_policed), else the one with the lowest MBR of that direction. A PDR has one
policer id in its entry (struct dpp_upf_pdr.policer), so of several QERs with an MBR the lowest
alone is enforced: a session AMBR shared with a flow's MBR is the flow's then (logged nowhere; the
PDR's other QERs are stored and shown as given). Each QER direction that polices some PDR has a
policer of its own, shared by its PDRs, as a QER's MBR is shared by the packets of the PDRs naming
it (29.244 5.2.1). An MBR is in kbit/s (8.2.8); the policer's rate in bit/s. An MBR of 0 (the IE
gives both directions: one the SMF leaves unlimited) and one at or above the policers' largest rate
(400 Gb/s) are not policed; one under their smallest (8 kbit/s) is refused. The burst and the algorithm are the settings' (qos.default_burst_ms,
qos.default_algorithm): the larger of the rate over the burst's milliseconds and two MTUs
(netapp.qos.spec.PoliceDefaults). The UPF gives ids of its range only (netapp.qos.ids).
"""

from __future__ import annotations

from typing import Optional

from netapp.qos.abi import RATE_MAX, RATE_MIN, Gate
from netapp.qos.spec import MTU, PoliceDefaults, PolicerSpec
from netapp.upf.models import Pdr, Qer, RuleError, Session
from netapp.upf.pfcp.ies import Cause, IEType, Interface, RuleType

__all__ = ["PoliceDefaults", "direction", "policer_spec", "policing_qer", "session_policers", "wanted"]

UPLINK, DOWNLINK = 0, 1  # the index of a direction in Session.qer_policers' pairs


def direction(pdr: Pdr) -> int:
    return UPLINK if pdr.pdi.source_interface == Interface.ACCESS else DOWNLINK


def _mbr_kbps(qer: Qer, way: int) -> Optional[int]:
    return qer.mbr_ul_kbps if way == UPLINK else qer.mbr_dl_kbps


def _closed(qer: Qer, way: int) -> bool:
    return not (qer.gate_ul_open if way == UPLINK else qer.gate_dl_open)


def _polices(qer: Qer, way: int) -> bool:
    mbr = _mbr_kbps(qer, way)
    return _closed(qer, way) or (bool(mbr) and mbr * 1000 < RATE_MAX)  # type: ignore[operator]


def policing_qer(session: Session, pdr: Pdr) -> Optional[Qer]:
    """The QER that polices the PDR (a closed gate first, else the lowest MBR), or None."""
    way = direction(pdr)
    qers = [session.qers[qer_id] for qer_id in pdr.qer_ids if qer_id in session.qers]
    qers = [qer for qer in qers if _polices(qer, way)]
    if not qers:
        return None
    return min(qers, key=lambda qer: (not _closed(qer, way), _mbr_kbps(qer, way) or 0, qer.id))


def wanted(session: Session) -> set[tuple[int, int]]:
    """The (QER id, direction) of the session that police some PDR: each needs a policer."""
    found = set()
    for pdr in session.pdrs.values():
        qer = policing_qer(session, pdr)
        if qer is not None:
            found.add((qer.id, direction(pdr)))
    return found


def policer_spec(qer: Qer, way: int, defaults: PoliceDefaults) -> PolicerSpec:
    """The policer of the QER's direction; RuleError, naming the QER, for an MBR under 8 kbit/s."""
    mbr = _mbr_kbps(qer, way)
    rate = (mbr or 0) * 1000
    if _closed(qer, way):
        return PolicerSpec(rate=min(max(rate, RATE_MIN), RATE_MAX), burst=2 * MTU, algo=defaults.algo,
                           gate=Gate.CLOSED)
    if rate < RATE_MIN:
        raise RuleError(Cause.RULE_CREATION_MODIFICATION_FAILURE,
                        f"MBR {mbr} kbit/s: the policers take {RATE_MIN // 1000} kbit/s or more (0: nothing passes)",
                        IEType.MBR, (RuleType.QER, qer.id))
    return PolicerSpec(rate=rate, burst=defaults.burst(rate), algo=defaults.algo)


def session_policers(session: Session, defaults: PoliceDefaults) -> dict[int, PolicerSpec]:
    """The session's policers by id, as its QERs ask for them (those it holds an id for)."""
    specs = {}
    for qer_id, pair in session.qer_policers.items():
        qer = session.qers.get(qer_id)
        for way, policer_id in enumerate(pair):
            if policer_id and qer is not None:
                specs[policer_id] = policer_spec(qer, way, defaults)
    return specs
