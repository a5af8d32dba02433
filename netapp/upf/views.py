"""What the REST API shows of the UPF (read-only): associations and sessions as stored, by tenant.

The tenant of a session is its PFCP association's node id (the SMF's Node ID): a caller sees the
sessions and the association whose node id is its tenant; an admin sees all. Another tenant's
session looks like one that does not exist (404), as another tenant's intent does. Read from the
store, so only what is committed is shown.

A session's `usage` is read from the data path's counters when it is shown, listed or alone
(netapp.upf.usage): per URR, the packets and bytes each way since the URR was created; null when no
data path counts them (`netapp serve` without PFCP, or a view over the store alone). Its `buffered`
packets and bytes are those user space holds for its FARs with BUFF (netapp.upf.buffering), null
likewise; its `policers` those of its QERs (netapp.upf.policing) as the data path holds them now
(netapp.qos.views), null likewise. An admin lists every session's policers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Optional

from pydantic import BaseModel, Field

from netapp.qos.views import PolicerReader, PolicerRecord, policer_record
from netapp.service.contract import Forbidden, NotFound, Page, Principal, Scope
from netapp.service.state import ServiceState
from netapp.service.store import Store
from netapp.upf import store as rows
from netapp.upf.models import Far, FSeid, Pdr, Qer, Session, Urr
from netapp.upf.store import Association
from netapp.upf.usage import COUNTS, UsageMonitor

DIRECTIONS: tuple[Literal["uplink"], Literal["downlink"]] = ("uplink", "downlink")  # Session.qer_policers' order


class UrrUsage(BaseModel):
    """What the data path counted on a URR since it was created (the UE's IP packets)."""

    urr_id: int
    ul_packets: int
    ul_bytes: int
    dl_packets: int
    dl_bytes: int


class Buffered(BaseModel):
    """What user space holds of the session's packets for its FARs that buffer (netapp.upf.buffering)."""

    packets: int
    bytes: int


class SessionRecord(BaseModel):
    """A PFCP session as stored: ours (`seid`), the CP function's (`remote`), its association
    (`node_id`, the tenant) and its rules, in id order."""

    seid: int = Field(description="the UPF's SEID (decimal)")
    node_id: str = Field(description="the node id of the session's PFCP association: its tenant")
    remote: FSeid = Field(description="the CP function's F-SEID")
    pdrs: list[Pdr]
    fars: list[Far]
    qers: list[Qer]
    urrs: list[Urr]
    updated_at: datetime
    usage: Optional[list[UrrUsage]] = Field(
        None, description="per URR with a usage slot, in id order: its counts now; null when no data path counts"
    )
    buffered: Optional[Buffered] = Field(
        None, description="the packets its FARs with BUFF hold now; null when no data path buffers"
    )
    policers: Optional[list[PolicerRecord]] = Field(
        None, description="its QERs' policers, by QER id and direction: configuration, state and counters now; "
        "null when no data path polices"
    )

    @classmethod
    def of(cls, session: Session, updated_at: str) -> "SessionRecord":
        return cls(
            seid=session.seid,
            node_id=session.node_id,
            remote=session.remote,
            pdrs=[session.pdrs[key] for key in sorted(session.pdrs)],
            fars=[session.fars[key] for key in sorted(session.fars)],
            qers=[session.qers[key] for key in sorted(session.qers)],
            urrs=[session.urrs[key] for key in sorted(session.urrs)],
            updated_at=datetime.fromisoformat(updated_at),
        )


class SessionViews:
    """The UPF's rows in `store`, as `who` may see them."""

    def __init__(self, store: Store, usage: Optional[UsageMonitor] = None, buffering: Optional[Any] = None,
                 policers: Optional[PolicerReader] = None):
        self._store = store
        self._usage = usage
        self._buffering = buffering  # netapp.upf.buffering.Buffering
        self._policers = policers

    def list_sessions(self, who: Principal, node_id: Optional[str], offset: int, limit: int) -> Page[SessionRecord]:
        """A page of sessions, in SEID order: the caller's (`node_id` None), or an admin's choice."""
        node_id = self._node_id(who, node_id)
        total = rows.count_sessions(self._store, node_id)
        page = rows.page_of_sessions(self._store, node_id, offset, limit)
        return Page([self._record(*row) for row in page], total, offset, limit)

    def get_session(self, who: Principal, seid: int) -> SessionRecord:
        ServiceState.require(who, Scope.READ)
        row = rows.get_session(self._store, seid)
        if row is None or not (who.is_admin or row[0].node_id == who.tenant):
            raise NotFound(f"no session with SEID {seid}")
        return self._record(*row)

    def _record(self, session: Session, updated_at: str) -> SessionRecord:
        """The session's record, with its URRs' usage now where a data path counts."""
        record = SessionRecord.of(session, updated_at)
        if self._usage is not None:
            counts = self._usage.session_counts(session)
            record.usage = [UrrUsage(urr_id=urr_id, **dict(zip(COUNTS, counts[urr_id]))) for urr_id in sorted(counts)]
        if self._buffering is not None:
            packets, size = self._buffering.held(session.seid)
            record.buffered = Buffered(packets=packets, bytes=size)
        if self._policers is not None:
            record.policers = session_policers(self._policers, session)
        return record

    def session_policers(self, who: Principal, seid: int) -> list[PolicerRecord]:
        """A session's policers (the caller's session; an admin's: any); none without a data path."""
        return self.get_session(who, seid).policers or []

    def list_policers(self, who: Principal) -> list[PolicerRecord]:
        """Every session's policers, in SEID order (admins only); none without a data path."""
        ServiceState.require(who, Scope.ADMIN)
        reader = self._policers
        if reader is None:
            return []
        return [record for session, _ in rows.load_sessions(self._store) for record in session_policers(reader, session)]

    def list_associations(self, who: Principal) -> list[Association]:
        """The PFCP associations: the caller's (at most one), an admin's: all."""
        ServiceState.require(who, Scope.READ)
        associations = rows.load_associations(self._store)
        return [item for item in associations if who.is_admin or item.node_id == who.tenant]

    @staticmethod
    def _node_id(who: Principal, node_id: Optional[str]) -> Optional[str]:
        """The node id to list: the caller's own; an admin's choice (None: all)."""
        ServiceState.require(who, Scope.READ)
        if who.is_admin:
            return node_id
        if node_id not in (None, who.tenant):
            raise Forbidden(
                f"node_id {node_id!r}: another association's sessions need scope 'admin'",
                field="node_id",
                required_scope="admin",
            )
        return who.tenant


def session_policers(reader: PolicerReader, session: Session) -> list[PolicerRecord]:
    """The session's policers as the data path holds them, by QER id and direction."""
    return [policer_record(reader, policer_id, DIRECTIONS[way], session.seid, qer_id)
            for qer_id, pair in sorted(session.qer_policers.items()) for way, policer_id in enumerate(pair) if policer_id]
