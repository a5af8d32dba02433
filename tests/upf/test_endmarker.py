"""End Markers on handover (netapp.upf.endmarker): which tunnels moved, the message itself (read with
scapy's GTP-U, not ours), and the applier that sends them after the maps changed."""

from __future__ import annotations

from typing import Optional

from scapy.contrib.gtp import GTP_U_Header

from netapp.upf.endmarker import EndMarkers, end_marker, moved_tunnels
from netapp.upf.held import SessionChange
from netapp.upf.models import Far, ForwardingParameters, FSeid, OuterHeaderCreation, RuleError, Session
from netapp.upf.pfcp.ies import Interface


def session(gnb: str = "10.31.0.2", teid: int = 0x100, *, sndem: bool = False, core_sndem: bool = False) -> Session:
    to_gnb = Far(id=2, apply_action=frozenset({"FORW"}), send_end_marker=sndem, forwarding=ForwardingParameters(
        destination_interface=Interface.ACCESS,
        outer_header_creation=OuterHeaderCreation(kind="gtpu-ipv4", teid=teid, address=gnb)))
    to_core = Far(id=1, apply_action=frozenset({"FORW"}), send_end_marker=core_sndem,
                  forwarding=ForwardingParameters(destination_interface=Interface.CORE))
    return Session(seid=1, node_id="smf", remote=FSeid(seid=7, ipv4="10.40.0.2"), fars={1: to_core, 2: to_gnb})


def test_a_moved_tunnel_with_sndem_gets_an_end_marker_on_its_old_teid_and_peer():
    old = session()
    assert moved_tunnels(old, session("10.32.0.2", 0x200, sndem=True)) == [("10.31.0.2", 0x100)]
    assert moved_tunnels(old, session("10.31.0.2", 0x200, sndem=True)) == [("10.31.0.2", 0x100)], "a new TEID"


def test_no_end_marker_without_sndem_a_move_an_old_tunnel_or_a_session():
    old = session()
    assert moved_tunnels(old, session("10.32.0.2", 0x200)) == [], "no SNDEM"
    assert moved_tunnels(old, session(sndem=True)) == [], "the same tunnel"
    assert moved_tunnels(old, session(core_sndem=True)) == [], "the FAR had no tunnel"
    assert moved_tunnels(None, session(sndem=True)) == [], "established (or reapplied on a restart)"
    assert moved_tunnels(old, None) == [], "deleted"


def test_the_end_marker_is_gtpu_type_254_with_the_teid_and_no_payload():
    header = GTP_U_Header(end_marker(0x100))
    assert (header.version, header.PT, header.E, header.S, header.PN) == (1, 1, 0, 0, 0)
    assert (header.gtp_type, header.teid, header.length) == (254, 0x100, 0)
    assert len(end_marker(0x100)) == 8


class Recording:
    def __init__(self, fail: bool = False):
        self.applied: list = []
        self.fail = fail

    def apply(self, old: Optional[Session], new: Optional[Session]) -> None:
        if self.fail:
            raise RuntimeError("the data path is full")
        self.applied.append((old, new))


def _transaction(applier: EndMarkers, pairs: list, *, commit_fails: bool = False) -> None:
    """A UPF transaction's map change (netapp.upf.held.SessionChange) as netapp.service.transaction
    runs it: the pairs applied, then committed, or undone when the maps or the commit fail; then,
    its locks released, settled."""
    change = SessionChange(applier)
    change.add(pairs, lambda: None)
    try:
        change.apply_to_maps()
    except RuleError:
        pass
    else:
        if commit_fails:
            change.undo_maps(RuntimeError("the disk is full"))
            change.roll_back()
        else:
            change.committed()
    change.settle()


def test_the_applier_sends_once_the_change_stands_and_not_for_one_refused_or_undone():
    sent: list = []
    inner = Recording()
    applier = EndMarkers(inner, "10.30.0.1", None, send=lambda *args: sent.append((inner.applied[:], args)))
    old, new = session(), session("10.32.0.2", 0x200, sndem=True)
    applier.apply(old, new)
    assert sent == [], "the maps changed, the change does not stand yet"
    applier.settled([(old, new)])
    assert sent == [([(old, new)], ("10.31.0.2", 0x100, "10.30.0.1"))], "after the inner apply, from N3"

    sent.clear()
    _transaction(EndMarkers(Recording(fail=True), "10.30.0.1", None, send=lambda *args: sent.append(args)),
                 [(old, new)])
    assert sent == [], "nothing sent for a change the data path refused"
    _transaction(EndMarkers(Recording(), "10.30.0.1", None, send=lambda *args: sent.append(args)), [(old, new)],
                 commit_fails=True)
    assert sent == [], "nothing sent for a change undone when the store could not commit it"
    _transaction(EndMarkers(Recording(), "10.30.0.1", None, send=lambda *args: sent.append(args)), [(old, new)])
    assert sent == [("10.31.0.2", 0x100, "10.30.0.1")], "sent for the change committed"


class GroupRecording(Recording):
    def apply_group(self, pairs) -> bool:  # noqa: ANN001
        self.applied.extend(pairs)
        return True


def test_a_transactions_changes_at_once_send_their_end_markers():
    """A handover in a group of PFCP requests (one transaction, netapp.upf.held.SessionChange)."""
    sent: list = []
    inner = GroupRecording()
    applier = EndMarkers(inner, "10.30.0.1", None, send=lambda *args: sent.append(args))
    other = session().model_copy(update={"seid": 2})
    _transaction(applier, [(session(), session("10.32.0.2", 0x200, sndem=True)), (None, other)])
    assert len(inner.applied) == 2 and sent == [("10.31.0.2", 0x100, "10.30.0.1")]


def test_a_failed_send_leaves_the_change_made():
    def unreachable(*_args):
        raise OSError(101, "Network is unreachable")

    inner = Recording()
    _transaction(EndMarkers(inner, "10.30.0.1", None, send=unreachable),
                 [(session(), session("10.32.0.2", 0x200, sndem=True))])
    assert len(inner.applied) == 1


def test_a_handover_in_a_group_of_changes_sends_its_end_marker_too():
    sent: list = []
    inner = GroupRecording()
    applier = EndMarkers(inner, "10.30.0.1", None, send=lambda *args: sent.append(args))
    old, new = session(), session("10.32.0.2", 0x200, sndem=True)
    assert applier.apply_group([(None, session()), (old, new)]) is True
    applier.settled([(None, session()), (old, new)])
    assert len(inner.applied) == 2 and sent == [("10.31.0.2", 0x100, "10.30.0.1")]
    assert EndMarkers(Recording(), "10.30.0.1", None).apply_group([(old, new)]) is False, "pair by pair instead"
