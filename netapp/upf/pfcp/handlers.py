"""What the endpoint answers: one handler per request type, from a decoded request to its response.

Every refusal is a `RuleError` turned into the response's Cause, with Offending IE (the IE at fault)
and, for a rule that could not be created or changed, Failed Rule ID (29.244 7.5.3, 7.5.5)."""

from __future__ import annotations

import ipaddress
import logging
from typing import Callable, Optional, Union

from netapp.upf.models import FSeid, FTeid, RuleError, Session
from netapp.upf.pfcp.codec import IE, Message, group, leaf, message
from netapp.upf.pfcp.ies import Cause, IEType, MsgType, RuleType, response_to
from netapp.upf.pfcp.rules import labels_or_text, mandatory, read_rules
from netapp.upf.sessions import Outcome, Upf
from netapp.upf.store import Association
from netapp.upf.usage import UsageMonitor, UsageReport

log = logging.getLogger("netapp.upf.pfcp")

# UP Function Features (29.244 8.2.25), octets 5 and 6: FTUP, the UPF allocates F-TEIDs (CHOOSE).
UP_FUNCTION_FEATURES = bytes((0x10, 0x00))
Peer = tuple[str, int]


def node_id_of(ie: IE) -> str:
    """A Node ID as text: the IPv4 or IPv6 address, or the FQDN."""
    kind = ie["id_type"]
    if kind == 0:
        return str(ie["ipv4"])
    if kind == 1:
        return str(ipaddress.IPv6Address(ie["ipv6"]))
    if kind == 2:
        return labels_or_text(ie.raw[1:])
    raise RuleError(Cause.MANDATORY_IE_INCORRECT, f"Node ID type {kind}", IEType.NODE_ID)


def node_id_ie(node_id: str) -> IE:
    try:
        address = ipaddress.ip_address(node_id)
    except ValueError:
        return leaf(IEType.NODE_ID, id_type=2, id=node_id.encode())
    if address.version == 4:
        return leaf(IEType.NODE_ID, id_type=0, ipv4=node_id)
    return leaf(IEType.NODE_ID, id_type=1, ipv6=node_id)


def cause_ies(error: Optional[RuleError]) -> list[IE]:
    """Cause, and for a refusal Offending IE and Failed Rule ID where they apply."""
    if error is None:
        return [leaf(IEType.CAUSE, cause=Cause.REQUEST_ACCEPTED)]
    ies = [leaf(IEType.CAUSE, cause=error.cause)]
    if error.ie_type is not None and error.cause != Cause.SESSION_CONTEXT_NOT_FOUND:
        ies.append(leaf(IEType.OFFENDING_IE, type=int(error.ie_type)))
    if error.rule is not None and error.cause == Cause.RULE_CREATION_MODIFICATION_FAILURE:
        rule_type, rule_id = error.rule
        field = {RuleType.PDR: "pdr_id", RuleType.FAR: "far_id", RuleType.QER: "qer_id", RuleType.URR: "urr_id"}
        ies.append(leaf(IEType.FAILED_RULE_ID, type=int(rule_type), **{field[rule_type]: rule_id}))
    return ies


def fteid_ie(fteid: FTeid) -> IE:
    return leaf(
        IEType.F_TEID,
        v4=int(fteid.ipv4 is not None),
        v6=int(fteid.ipv6 is not None),
        teid=fteid.teid,
        **({"ipv4": fteid.ipv4} if fteid.ipv4 else {}),
        **({"ipv6": fteid.ipv6} if fteid.ipv6 else {}),
    )


class Handlers:
    """The UPF's answers. `node_id`: ours, in every response that carries one; `address`: the IPv4
    or IPv6 address of our F-SEIDs."""

    def __init__(self, upf: Upf, node_id: str, address: str, usage: Optional[UsageMonitor] = None):
        self.upf = upf
        self.usage = usage
        self.node_id = node_id
        self._node_id_ie = node_id_ie(node_id)  # in every response that carries ours (IEs are not changed)
        family = "4" if ipaddress.ip_address(address).version == 4 else "6"
        self._fseid_fields = {f"v{family}": 1, f"ipv{family}": address}
        # A handler's response, or what makes it once the change is committed (usage reports).
        self.by_type: dict[int, Callable[[Message, Peer], Union[Message, Callable[[], Message]]]] = {
            MsgType.HEARTBEAT_REQUEST: self.heartbeat,
            MsgType.ASSOCIATION_SETUP_REQUEST: self.association_setup,
            MsgType.ASSOCIATION_UPDATE_REQUEST: self.association_update,
            MsgType.ASSOCIATION_RELEASE_REQUEST: self.association_release,
            MsgType.SESSION_ESTABLISHMENT_REQUEST: self.establishment,
            MsgType.SESSION_MODIFICATION_REQUEST: self.modification,
            MsgType.SESSION_DELETION_REQUEST: self.deletion,
        }

    def refusal(self, request: Message, error: RuleError) -> Optional[Message]:
        """The response to `request` refused with `error` (None for a Heartbeat: it has no Cause)."""
        msg_type = MsgType(request.type)
        if msg_type == MsgType.HEARTBEAT_REQUEST:
            return None
        ours = [] if msg_type in (MsgType.SESSION_MODIFICATION_REQUEST, MsgType.SESSION_DELETION_REQUEST) else [
            self._node_id_ie
        ]
        if msg_type == MsgType.ASSOCIATION_SETUP_REQUEST:
            ours.append(self._recovery())
        return message(response_to(msg_type), request.seq, self._peer_seid(request), *ours, *cause_ies(error))

    def _peer_seid(self, request: Message) -> Optional[int]:
        """The SEID of a session response's header: the CP's, or 0 when the session is unknown."""
        if request.seid is None:
            return None
        session = self.upf.sessions.get(request.seid)
        if session is not None:
            return session.remote.seid
        if request.type == MsgType.SESSION_ESTABLISHMENT_REQUEST:
            fseid = request.ies.one(IEType.F_SEID)
            return fseid["seid"] if fseid is not None and "seid" in fseid.fields else 0
        return 0

    def _recovery(self) -> IE:
        return leaf(IEType.RECOVERY_TIME_STAMP, timestamp=self.upf.recovery_time_stamp)

    # --- node messages ---------------------------------------------------------------------------

    def heartbeat(self, request: Message, peer: Peer) -> Message:
        stamp = request.ies.one(IEType.RECOVERY_TIME_STAMP)
        if stamp is not None:
            self.upf.peer_heartbeat(peer[0], stamp["timestamp"])
        return message(MsgType.HEARTBEAT_RESPONSE, request.seq, None, self._recovery())

    def association_setup(self, request: Message, peer: Peer) -> Message:
        node_id = node_id_of(mandatory(request.ies, IEType.NODE_ID))
        held = self.upf.associations.get(node_id)
        if held is not None and held.address != peer[0]:  # a node id is a tenant: not taken over
            raise RuleError(
                Cause.REQUEST_REJECTED, f"{node_id} is associated from {held.address}, not {peer[0]}", IEType.NODE_ID
            )
        stamp = mandatory(request.ies, IEType.RECOVERY_TIME_STAMP)["timestamp"]
        association = Association(node_id=node_id, address=peer[0], port=peer[1], recovery_time_stamp=stamp)
        self.upf.setup_association(association)
        return message(
            MsgType.ASSOCIATION_SETUP_RESPONSE,
            request.seq,
            None,
            self._node_id_ie,
            *cause_ies(None),
            self._recovery(),
            IE(IEType.UP_FUNCTION_FEATURES, raw=UP_FUNCTION_FEATURES),
        )

    def association_update(self, request: Message, peer: Peer) -> Message:
        node_id = self._own(node_id_of(mandatory(request.ies, IEType.NODE_ID)), peer)
        self.upf.update_association(node_id, peer[0], peer[1])
        return self._node_response(MsgType.ASSOCIATION_UPDATE_RESPONSE, request)

    def association_release(self, request: Message, peer: Peer) -> Message:
        self.upf.release_association(self._own(node_id_of(mandatory(request.ies, IEType.NODE_ID)), peer))
        return self._node_response(MsgType.ASSOCIATION_RELEASE_RESPONSE, request)

    def _own(self, node_id: str, peer: Peer) -> str:
        """`node_id`, when `peer` is the address its association was set up from: a peer acts on its
        own association and sessions only (the node id is the tenant). Otherwise, to that peer, the
        association does not exist."""
        if self.upf.require_association(node_id).address != peer[0]:
            raise RuleError(Cause.NO_ESTABLISHED_ASSOCIATION, f"no PFCP association with {node_id} from {peer[0]}",
                            IEType.NODE_ID)
        return node_id

    def _own_session(self, seid: int, peer: Peer) -> Session:
        """The session, when `peer` is its association's address; else, to that peer, none."""
        session = self.upf.require_session(seid)
        if self.upf.require_association(session.node_id).address != peer[0]:
            raise RuleError(Cause.SESSION_CONTEXT_NOT_FOUND, f"no session with SEID {seid:#x}")
        return session

    def _node_response(self, msg_type: MsgType, request: Message) -> Message:
        return message(msg_type, request.seq, None, self._node_id_ie, *cause_ies(None))

    # --- session messages ------------------------------------------------------------------------

    def establishment(self, request: Message, peer: Peer) -> Message:
        return self.established(request.seq, self.establish(request, peer))

    def establish(self, request: Message, peer: Peer) -> Outcome:
        """The session a Session Establishment Request makes (RuleError: refused)."""
        ies = request.ies
        node_id = node_id_of(mandatory(ies, IEType.NODE_ID))
        remote = _fseid(mandatory(ies, IEType.F_SEID))
        mandatory(ies, IEType.CREATE_PDR)
        mandatory(ies, IEType.CREATE_FAR)
        self._own(node_id, peer)
        return self.upf.establish(node_id, remote, read_rules(ies))

    def established(self, seq: int, outcome: Outcome) -> Message:
        """The Session Establishment Response (sequence number `seq`) of an established session."""
        fseid = leaf(IEType.F_SEID, seid=outcome.session.seid, **self._fseid_fields)
        return message(
            MsgType.SESSION_ESTABLISHMENT_RESPONSE,
            seq,
            outcome.session.remote.seid,
            self._node_id_ie,
            *cause_ies(None),
            fseid,
            *_created(outcome),
        )

    def modification(self, request: Message, peer: Peer) -> Callable[[], Message]:
        """The response is made once the change is committed: a Usage Report (IE 78) for each URR
        removed (its final counts, TERMR) and each URR a Query URR names (all with the flag QAURR;
        IMMER, starting a new measurement)."""
        session = self._own_session(request.seid or 0, peer)
        fseid = request.ies.one(IEType.F_SEID)
        outcome = self.upf.modify(session.seid, read_rules(request.ies), _fseid(fseid) if fseid else None)
        flags = request.ies.one(IEType.PFCPSM_REQ_FLAGS)
        queried = set(outcome.session.urrs) if flags is not None and flags.get("quarr") else {
            urr_id["id"] for query in request.ies.all(IEType.QUERY_URR) for urr_id in query.all(IEType.URR_ID)
        }

        def response() -> Message:
            reports = self._usage(lambda usage: [*usage.finals(session), *usage.query(outcome.session, queried)])
            return message(
                MsgType.SESSION_MODIFICATION_RESPONSE,
                request.seq,
                outcome.session.remote.seid,
                *cause_ies(None),
                *_created(outcome),
                *(report.ie(IEType.USAGE_REPORT_MODIFICATION) for report in reports),
            )

        return response

    def deletion(self, request: Message, peer: Peer) -> Callable[[], Message]:
        """The response is made once the deletion is committed: the final Usage Report (IE 79, TERMR)
        of each URR of the session."""
        session = self.upf.delete(self._own_session(request.seid or 0, peer).seid)

        def response() -> Message:
            reports = self._usage(lambda usage: usage.finals(session))
            return message(
                MsgType.SESSION_DELETION_RESPONSE,
                request.seq,
                session.remote.seid,
                *cause_ies(None),
                *(report.ie(IEType.USAGE_REPORT_DELETION) for report in reports),
            )

        return response

    def _usage(self, reports: Callable[[UsageMonitor], list[UsageReport]]) -> list[UsageReport]:
        """The usage reports of a response; none (logged) if they cannot be read: the change stands."""
        if self.usage is None:
            return []
        try:
            return reports(self.usage)
        except Exception:  # noqa: BLE001 - the change is committed: it is answered all the same
            log.exception("PFCP: the usage reports of a response could not be read")
            return []


def _fseid(ie: IE) -> FSeid:
    fields = {
        "seid": ie["seid"],
        "ipv4": str(ie["ipv4"]) if ie["v4"] else None,
        "ipv6": str(ie["ipv6"]) if ie["v6"] else None,
    }
    try:
        return FSeid.model_validate(fields)
    except ValueError as exc:
        raise RuleError(Cause.MANDATORY_IE_INCORRECT, f"F-SEID: {exc}", IEType.F_SEID) from None


def _created(outcome: Outcome) -> list[IE]:
    """A Created PDR for each PDR the UPF chose something of: its F-TEID (CHOOSE), its UE IP Address
    (CHV4), or both (29.244 7.5.3.2)."""
    chosen: dict[int, list[IE]] = {}
    for pdr_id, fteid in outcome.created:
        chosen.setdefault(pdr_id, []).append(fteid_ie(fteid))
    for pdr_id, ue in outcome.ue_created:
        chosen.setdefault(pdr_id, []).append(leaf(IEType.UE_IP_ADDRESS, sd=int(ue.destination), v4=1, ipv4=ue.ipv4))
    return [group(IEType.CREATED_PDR, leaf(IEType.PDR_ID, id=pdr_id), *ies) for pdr_id, ies in sorted(chosen.items())]

