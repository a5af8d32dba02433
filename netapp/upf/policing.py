"""The QERs' policers (dataplane/bpf/nf/qos/police.h): which QERs police a PDR, in which order, and
the policer a QER's direction asks for.

A PDR is policed in its direction (uplink: source interface ACCESS; downlink: the others) by those of
its QERs that police that direction: a closed gate (every packet dropped, counted by the policer as
dropped, reason qos_policed) or an MBR. Each such QER direction has a policer of its own, shared by
its PDRs, as a QER's MBR is shared by the packets of the PDRs naming it (29.244 5.2.1). Two QERs
chain: a PDR naming a flow's MBR QER and the session's AMBR QER (29.244 5.2.1A: the Session-AMBR
is a QER that all the session's PDRs name) is policed by the flow's policer, then by the AMBR's,
its parent (struct dpp_policer.parent), which all the session's flows of that direction share. The
child is the QER fewer of the session's PDRs of that direction name, the parent the one more name;
between equals a closed gate first, then the lower MBR, then the lower id. A policer has one parent
and a parent none (DPP_POLICE_DEPTH): a PDR with three policing QERs (29.244 allows an SDF's MBR, a
QoS flow's and the Session-AMBR on one PDR) and a QER chained to two parents, or to one by a PDR and
to none by another, are refused, naming the PDR and the QERs (the data path would police otherwise
than the request says).

An MBR is in kbit/s (8.2.8); the policer's rate in bit/s. An MBR of 0 (the IE gives both
directions: one the SMF leaves unlimited) and one at or above the policers' largest rate (400 Gb/s)
are not policed; one under their smallest (8 kbit/s) is refused. The burst and the algorithm are the
settings' (qos.default_burst_ms, qos.default_algorithm): the larger of the rate over the burst's
milliseconds and two MTUs (netapp.qos.spec.PoliceDefaults). The UPF gives ids of its range only
(netapp.qos.ids).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Optional

from netapp.qos.abi import DEPTH, RATE_MAX, RATE_MIN, Gate
from netapp.qos.spec import MTU, PoliceDefaults, PolicerSpec
from netapp.upf.models import Pdr, Qer, RuleError, Session
from netapp.upf.pfcp.ies import Cause, IEType, Interface, RuleType

__all__ = ["PoliceDefaults", "direction", "parents", "policer_spec", "policing_qer", "policing_qers", "session_policers",
           "wanted"]

UPLINK, DOWNLINK = 0, 1  # the index of a direction in Session.qer_policers' pairs
WAYS = ("uplink", "downlink")


def direction(pdr: Pdr) -> int:
    return UPLINK if pdr.pdi.source_interface == Interface.ACCESS else DOWNLINK


def _mbr_kbps(qer: Qer, way: int) -> Optional[int]:
    return qer.mbr_ul_kbps if way == UPLINK else qer.mbr_dl_kbps


def _closed(qer: Qer, way: int) -> bool:
    return not (qer.gate_ul_open if way == UPLINK else qer.gate_dl_open)


def _polices(qer: Qer, way: int) -> bool:
    mbr = _mbr_kbps(qer, way)
    return _closed(qer, way) or (bool(mbr) and mbr * 1000 < RATE_MAX)  # type: ignore[operator]


def _policing(session: Session, pdr: Pdr) -> list[Qer]:
    """The PDR's QERs that police its direction, each once."""
    way = direction(pdr)
    qers = [session.qers[qer_id] for qer_id in dict.fromkeys(pdr.qer_ids) if qer_id in session.qers]
    return [qer for qer in qers if _polices(qer, way)]


def _shares(session: Session, way: int) -> collections.Counter[int]:
    """QER id -> how many of the session's PDRs of direction `way` it polices."""
    return collections.Counter(qer.id for pdr in session.pdrs.values() if direction(pdr) == way
                               for qer in _policing(session, pdr))


def policing_qers(session: Session, pdr: Pdr, shares: Optional[collections.Counter[int]] = None) -> tuple[Qer, ...]:
    """The QERs that police the PDR, in the order the data path applies them (child, then parent):
    the fewer PDRs of its direction share a QER the earlier; between equals a closed gate, then the
    lower MBR, then the lower id. `shares`: _shares of the PDR's direction, when the caller has it."""
    way = direction(pdr)
    shares = _shares(session, way) if shares is None else shares
    qers = _policing(session, pdr)
    return tuple(sorted(qers, key=lambda qer: (shares[qer.id], not _closed(qer, way), _mbr_kbps(qer, way) or 0, qer.id)))


def policing_qer(session: Session, pdr: Pdr) -> Optional[Qer]:
    """The QER whose policer the PDR names (the first of its chain), or None."""
    qers = policing_qers(session, pdr)
    return qers[0] if qers else None


def wanted(session: Session) -> set[tuple[int, int]]:
    """The (QER id, direction) of the session that police some PDR: each needs a policer."""
    return {(qer.id, direction(pdr)) for pdr in session.pdrs.values() for qer in _policing(session, pdr)}


@dataclasses.dataclass
class _Link:
    """A QER direction's parent (None: none) and the PDR that chained it so, for the refusals."""

    parent: Optional[int]
    pdr_id: int


def parents(session: Session) -> dict[tuple[int, int], Optional[int]]:
    """(QER id, direction) of each QER that polices a PDR -> the QER id of its parent, None for none;
    RuleError, naming the PDR, for a chain the data path cannot follow as asked (module docstring). A
    QER both a parent and a child is one chained to none by a PDR (as the last of its chain) and to
    one by another: refused as a QER with two parents."""
    links: dict[tuple[int, int], _Link] = {}
    shares = {way: _shares(session, way) for way in (UPLINK, DOWNLINK)}
    for pdr in sorted(session.pdrs.values(), key=lambda pdr: pdr.id):
        way = direction(pdr)
        chain = [qer.id for qer in policing_qers(session, pdr, shares[way])]
        if len(chain) > DEPTH:
            raise _chain_refused(pdr, f"{WAYS[way]}: QERs {chain} police it; policers chain {DEPTH} deep at most "
                                      "(a flow's MBR, then the session's AMBR)")
        for child, parent in zip(chain, [*chain[1:], None]):
            _link(links, pdr, (child, way), parent)
    return {key: link.parent for key, link in links.items()}


def _link(links: dict[tuple[int, int], _Link], pdr: Pdr, key: tuple[int, int], parent: Optional[int]) -> None:
    """Record `key`'s parent as `pdr` chains it; RuleError when an earlier PDR chained it otherwise."""
    known = links.setdefault(key, _Link(parent, pdr.id))
    if known.parent != parent:
        named = [f"QER {qer_id}" if qer_id is not None else "none" for qer_id in (known.parent, parent)]
        raise _chain_refused(pdr, (
            f"{WAYS[key[1]]}: QER {key[0]} is under {named[1]} here and under {named[0]} in PDR {known.pdr_id}; "
            "a policer has one parent, whatever PDR names it"))


def _chain_refused(pdr: Pdr, message: str) -> RuleError:
    return RuleError(Cause.RULE_CREATION_MODIFICATION_FAILURE, f"PDR {pdr.id}: {message}", IEType.QER_ID,
                     (RuleType.PDR, pdr.id))


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
    """The session's policers by id, as its QERs ask for them (those it holds an id for), each naming
    its parent's (parents: RuleError for a chain refused)."""
    chained = parents(session)
    specs = {}
    for qer_id, pair in session.qer_policers.items():
        qer = session.qers.get(qer_id)
        for way, policer_id in enumerate(pair):
            if policer_id and qer is not None:
                parent = chained.get((qer_id, way))
                parent_id = session.qer_policers.get(parent, (0, 0))[way] if parent is not None else 0
                specs[policer_id] = dataclasses.replace(policer_spec(qer, way, defaults), parent=parent_id)
    return specs
