"""netapp.upf.buffering without a kernel: the queues' limits, the Downlink Data Report once per FAR,
the replay in order once the FAR forwards (after the inner applier has the change), discards, and
DUPL copies sent to a loopback collector this test listens on."""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import struct
import threading
import time

import pytest

from netapp.telemetry.poll import UPF_BUFFERING_FIELDS
from netapp.telemetry.prometheus import exposition
from netapp.upf.abi import PuntKind
from netapp.service.store import Store
from netapp.upf.buffering import Buffering, Buffers, Limits, gtpu_tpdu
from netapp.upf.compiler import Site
from netapp.upf.endmarker import EndMarkers
from netapp.upf.held import SessionChange
from netapp.upf.models import DuplicatingParameters, Far, ForwardingParameters, OuterHeaderCreation
from netapp.upf.peers import Destinations
from netapp.upf.pfcp.ies import Interface
from netapp.upf.punts import Punted
from netapp.upf.runtime import _reconcile
from netapp.upf.sessions import Upf
from netapp.upf.telemetry import BufferingPoints
from tests.upf.test_datapath import N3_IP, session

SEID, PDR, FAR = 7, 2, 2


def frame(n: int, size: int = 100, kind: PuntKind = PuntKind.BUFFER, pdr_id: int = PDR, seid: int = SEID) -> Punted:
    body = bytes([n % 256]) * size
    return Punted(seid, pdr_id, kind, 4, 14, 5, b"\x02" * 14 + body)


def with_far(far: Far, seid: int = SEID):
    plain = session(seid=seid)
    return plain.model_copy(update={"fars": {**plain.fars, FAR: far}})


BUFF_NOCP = Far(id=FAR, apply_action=frozenset({"BUFF", "NOCP"}))
FORW = session().fars[FAR]


class Recorder:
    """The inner applier and the data plane: what they were given, in order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def apply(self, old, new) -> None:
        self.events.append(("apply", new.fars[FAR].apply_action if new else None))

    def reconcile(self, sessions):
        return {}

    def upf_replay(self, data: bytes, ifindex: int) -> None:
        self.events.append(("replay", data, ifindex))

    def upf_punts(self):
        return None


class GroupRecorder(Recorder):
    """An inner applier that also takes a transaction's pairs at once, and reconciles sessions
    compiled at start-up, as the data path's does (netapp.upf.applier.BpfApplier)."""

    site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP)

    def apply_group(self, pairs) -> bool:
        self.events.append(("apply_group", [new.fars[FAR].apply_action if new else None for _, new in pairs]))
        return True

    def reconcile_compiled(self, compiled):
        for _seid, entries in compiled:
            entries()
        return {}


@pytest.fixture
def chain():
    """netapp.upf.runtime's chain, Buffering(EndMarkers(the data path's applier)), over a recorder."""
    recorder, reports = GroupRecorder(), []
    buffering = Buffering(EndMarkers(recorder, N3_IP, None), recorder,
                          report=lambda seid, ids: reports.append((seid, ids)))
    yield buffering, recorder, reports
    buffering.close()


def _in_one_transaction(applier, pairs) -> None:
    change = SessionChange(applier)
    change.add(pairs, lambda: None)
    change.apply_to_maps()
    change.committed()
    change.settle()


def stands(buffering: Buffering) -> None:
    """The changes `buffering` was given stand, as a UPF transaction ends once it has committed
    (netapp.upf.held.SessionChange: committed, then settled once the transaction's locks are released)."""
    buffering.committed()
    buffering.settled([])


@pytest.fixture
def rig():
    recorder, reports = Recorder(), []
    buffering = Buffering(recorder, recorder, Limits(session_packets=3, session_bytes=10_000, packets=5,
                                                     bytes=100_000), report=lambda seid, ids: reports.append((seid, ids)))
    yield buffering, recorder, reports
    buffering.close()


def test_a_session_past_its_packet_limit_drops_the_newest_counted():
    buffers = Buffers(Limits(session_packets=2, session_bytes=10_000, packets=10, bytes=100_000))
    assert [buffers.add((SEID, FAR), frame(n)) for n in range(3)] == [True, True, False]
    assert buffers.counters["overflow"] == 1
    assert [item.frame for item in buffers.take((SEID, FAR))] == [frame(0).frame, frame(1).frame]
    assert buffers.held(SEID) == (0, 0) and (buffers.packets, buffers.bytes) == (0, 0)


def test_the_byte_limits_per_session_and_in_total_hold():
    buffers = Buffers(Limits(session_packets=100, session_bytes=250, packets=100, bytes=300))
    assert [buffers.add((SEID, FAR), frame(n)) for n in range(3)] == [True, True, False]  # 114 bytes each
    assert buffers.add((SEID + 1, FAR), frame(9, seid=SEID + 1)) is False  # 342 > 300 in total
    assert buffers.held(SEID) == (2, 228)


def test_the_first_buffered_packet_of_a_nocp_far_is_reported_once(rig):
    buffering, _, reports = rig
    buffering.apply(None, with_far(BUFF_NOCP))
    buffering.take([frame(0), frame(1)])
    buffering.take([frame(2)])
    assert reports == [(SEID, [PDR])]
    assert buffering.held(SEID) == (3, 342)


def test_buff_without_nocp_is_not_reported(rig):
    buffering, _, reports = rig
    buffering.apply(None, with_far(Far(id=FAR, apply_action=frozenset({"BUFF"}))))
    buffering.take([frame(0)])
    assert reports == [] and buffering.held(SEID) == (1, 114)


def test_forw_replays_the_buffered_frames_in_order_after_the_maps_have_the_change(rig):
    buffering, recorder, reports = rig
    buffering.apply(None, with_far(BUFF_NOCP))
    buffering.take([frame(n) for n in range(4)])  # the fourth is past the session's limit
    buffering.apply(with_far(BUFF_NOCP), with_far(FORW))
    assert recorder.events[-1] == ("apply", FORW.apply_action), "replayed only once committed"
    stands(buffering)
    assert recorder.events == [("apply", BUFF_NOCP.apply_action), ("apply", FORW.apply_action),
                               *(("replay", frame(n).frame, 5) for n in range(3))]
    assert buffering.counters["replayed"] == 3 and buffering.counters["overflow"] == 1
    assert buffering.held(SEID) == (0, 0)
    buffering.apply(with_far(FORW), with_far(BUFF_NOCP))  # buffering again: reported again
    stands(buffering)
    buffering.take([frame(9)])
    assert reports == [(SEID, [PDR]), (SEID, [PDR])]


def test_a_deleted_session_or_a_dropping_far_discards_its_buffer_counted(rig):
    buffering, recorder, _ = rig
    buffering.apply(None, with_far(BUFF_NOCP))
    buffering.take([frame(0), frame(1)])
    buffering.apply(with_far(BUFF_NOCP), with_far(Far(id=FAR, apply_action=frozenset({"DROP"}))))
    stands(buffering)
    assert buffering.counters["discarded"] == 2
    buffering.apply(with_far(Far(id=FAR, apply_action=frozenset({"DROP"}))), with_far(BUFF_NOCP))
    stands(buffering)
    buffering.take([frame(2)])
    buffering.apply(with_far(BUFF_NOCP), None)
    stands(buffering)
    assert buffering.counters["discarded"] == 3 and buffering.held(SEID) == (0, 0)
    assert not [event for event in recorder.events if event[0] == "replay"]


def test_a_change_undone_before_its_commit_keeps_the_queue(rig):
    buffering, recorder, reports = rig
    buffering.apply(None, with_far(BUFF_NOCP))
    buffering.take([frame(0), frame(1)])
    buffering.apply(with_far(BUFF_NOCP), with_far(FORW))
    buffering.take([frame(2)])  # punted before the maps changed, read after: behind the others
    buffering.apply(with_far(FORW), with_far(BUFF_NOCP))  # the transaction's undo
    stands(buffering)
    assert not [event for event in recorder.events if event[0] == "replay"]
    assert buffering.held(SEID) == (3, 342) and reports == [(SEID, [PDR])], "still buffering, reported once"


def test_the_chain_gives_what_the_upf_reads_of_the_data_paths_applier_and_nothing_unnamed(chain):
    buffering, recorder, _ = chain
    recorder.urr_slots, recorder.stale = 9, ["dpp_upf_downlink (1,): not restored"]
    assert (buffering.urr_slots, buffering.stale, buffering.site) == (9, recorder.stale, GroupRecorder.site)
    assert not hasattr(buffering, "teid_slots"), "the inner applier has none"
    assert not hasattr(buffering, "upf_replay"), "the inner's, but not the applier's: not passed on"


def test_a_transactions_changes_at_once_are_buffered_reported_replayed_and_discarded(chain):
    """A group of PFCP requests (one transaction, netapp.upf.held.SessionChange) reaches the data
    path's applier at once: buffering sees each of its changes as it sees one alone."""
    buffering, recorder, reports = chain
    idle, other, gone = with_far(BUFF_NOCP), with_far(FORW, seid=SEID + 1), with_far(BUFF_NOCP, seid=SEID + 2)
    _in_one_transaction(buffering, [(None, idle), (None, other), (None, gone)])
    assert recorder.events[0] == ("apply_group", [BUFF_NOCP.apply_action, FORW.apply_action, BUFF_NOCP.apply_action])
    buffering.take([frame(0), frame(1), frame(2, seid=SEID + 2)])
    assert reports == [(SEID, [PDR]), (SEID + 2, [PDR])] and buffering.held(SEID) == (2, 228)

    _in_one_transaction(buffering, [(idle, with_far(FORW)), (gone, None), (None, with_far(FORW, seid=SEID + 3))])
    assert [event for event in recorder.events if event[0] == "replay"] == [("replay", frame(n).frame, 5)
                                                                             for n in range(2)]
    assert buffering.counters["replayed"] == 2 and buffering.counters["discarded"] == 1
    assert buffering.held(SEID) == buffering.held(SEID + 2) == (0, 0)


def test_a_transactions_changes_at_once_duplicate(chain, collector):
    buffering, recorder, _ = chain
    _in_one_transaction(buffering, [(None, with_far(copying_to(collector))), (None, with_far(FORW, seid=SEID + 1))])
    assert recorder.events[0][0] == "apply_group"
    buffering.take([frame(1, kind=PuntKind.DUPLICATE)])
    assert collector.recv(4096) == frame(1).ue_packet
    assert buffering.counters["duplicated"] == 1 and buffering.counters["unknown"] == 0


def test_the_start_up_reconcile_of_stored_sessions_buffers_reports_and_duplicates(chain, collector, tmp_path):
    """netapp.upf.runtime's reconcile at start, with entries compiled from the stored rows: frames
    punted afterwards for a stored BUFF+NOCP or DUPL session are theirs, not unknown."""
    buffering, _, reports = chain
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    try:
        upf = Upf(store)
        for stored in (with_far(BUFF_NOCP), with_far(copying_to(collector), seid=SEID + 1), with_far(FORW, seid=9)):
            upf.sessions.put(stored)
        buffering.sessions = upf.sessions
        assert _reconcile(upf, buffering, None, Destinations.anywhere()) == {}
        buffering.take([frame(0), frame(1, kind=PuntKind.DUPLICATE, seid=SEID + 1)])
        assert reports == [(SEID, [PDR])] and buffering.held(SEID) == (1, 114)
        assert collector.recv(4096) == frame(1).ue_packet
        assert buffering.counters["unknown"] == 0
    finally:
        store.close()


class Ring:
    """The ring's reader: frames put in are read by `poll(0)`; its fd is readable while some wait."""

    def __init__(self) -> None:
        self.frames: list = []
        self._read, self._write = os.pipe()
        self.closed = False

    def put(self, frames: list) -> None:
        self.frames += frames
        os.write(self._write, b"x")

    def fileno(self) -> int:
        return self._read

    def poll(self, timeout_ms: int) -> list:
        assert timeout_ms == 0, "read without waiting: waiting is on the fd, unlocked"
        frames, self.frames = self.frames, []
        with contextlib.suppress(BlockingIOError):
            os.set_blocking(self._read, False)
            os.read(self._read, 4096)
        return frames

    def close(self) -> None:
        self.closed = True
        os.close(self._read)
        os.close(self._write)


class RingRecorder(Recorder):
    def __init__(self, ring: Ring) -> None:
        super().__init__()
        self.ring = ring

    def upf_punts(self):
        return self.ring


def test_the_commit_reads_the_ring_to_its_end_and_replays_it_behind_the_queue():
    ring = Ring()
    recorder = RingRecorder(ring)
    buffering = Buffering(recorder, recorder)  # not started: only the commit reads the ring
    buffering._reader = ring
    try:
        buffering.apply(None, with_far(BUFF_NOCP))
        buffering.take([frame(0), frame(1)])
        ring.put([frame(2), frame(3)])  # in the ring when the FAR changes
        buffering.apply(with_far(BUFF_NOCP), with_far(FORW))
        stands(buffering)
        assert [event[1] for event in recorder.events if event[0] == "replay"] == [frame(n).frame for n in range(4)]
        assert buffering.counters["replayed"] == 4 and buffering.counters["unknown"] == 0
    finally:
        buffering.close()


def test_the_reader_thread_reads_as_frames_come_and_stops_at_once_on_close():
    ring = Ring()
    recorder = RingRecorder(ring)
    buffering = Buffering(recorder, recorder).start()
    buffering.apply(None, with_far(BUFF_NOCP))
    ring.put([frame(0)])
    deadline = time.monotonic() + 10
    while buffering.held(SEID) != (1, 114):
        assert time.monotonic() < deadline, "the reader thread did not read the frame"
        time.sleep(0.01)
    closing = threading.Thread(target=buffering.close)
    closing.start()
    closing.join(5)
    assert not closing.is_alive() and ring.closed, "close did not stop the reader thread"


def test_frames_of_no_known_pdr_are_counted_and_dropped(rig):
    buffering, _, reports = rig
    buffering.take([frame(0, seid=99)])
    assert buffering.counters["unknown"] == 1 and reports == []


@pytest.fixture
def collector():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(10)
    yield sock
    sock.close()


def copying_to(collector: socket.socket) -> Far:
    """A FAR that forwards and sends UDP copies to the collector."""
    port = collector.getsockname()[1]
    return copying_by(OuterHeaderCreation(kind="udp-ipv4", address="127.0.0.1", port=port))


def copying_by(creation: OuterHeaderCreation) -> Far:
    """A FAR that forwards and sends copies by the outer header creation."""
    copies = (DuplicatingParameters(destination_interface=Interface.LI_FUNCTION, transport_level_marking=0xB8,
                                    outer_header_creation=creation),)
    return Far(id=FAR, apply_action=frozenset({"FORW", "DUPL"}), duplicating=copies,
               forwarding=ForwardingParameters(destination_interface=Interface.ACCESS))


@pytest.mark.parametrize("tunnel", ["gtpu", "udp"])
def test_dupl_sends_the_ue_packet_in_gtpu_and_in_udp_to_the_collector(rig, collector, tunnel, monkeypatch):
    buffering, _, _ = rig
    if tunnel == "gtpu":  # the GTP-U port is the collector's here (tests/upf/test_restart.py sends to 2152)
        monkeypatch.setattr("netapp.upf.buffering.GTPU_PORT", collector.getsockname()[1])
        far = copying_by(OuterHeaderCreation(kind="gtpu-ipv4", address="127.0.0.1", teid=0x77))
    else:
        far = copying_to(collector)
    buffering.apply(None, with_far(far))
    buffering.take([frame(1, kind=PuntKind.DUPLICATE)])
    expected = gtpu_tpdu(0x77, frame(1).ue_packet) if tunnel == "gtpu" else frame(1).ue_packet
    assert collector.recv(4096) == expected
    assert buffering.counters["duplicated"] == 1
    assert buffering.held(SEID) == (0, 0), "a copy is not buffered"


class EchoingRecorder(RingRecorder):
    """A replay punts its copy, as the data path does when the FAR now duplicates."""

    def upf_replay(self, data: bytes, ifindex: int) -> None:
        super().upf_replay(data, ifindex)
        self.ring.put([Punted(SEID, PDR, PuntKind.DUPLICATE, 4, 14, ifindex, data)])


def test_a_far_that_buffers_and_duplicates_copies_each_packet_as_it_arrives_and_not_when_replayed(collector):
    ring = Ring()
    recorder = EchoingRecorder(ring)
    buffering = Buffering(recorder, recorder)
    buffering._reader = ring  # read by the commit and by `take`, not by a thread
    copies_buffered = copying_to(collector).model_copy(update={"apply_action": frozenset({"BUFF", "DUPL"})})
    try:
        buffering.apply(None, with_far(copies_buffered))
        buffering.take([frame(0), frame(1)])
        assert [collector.recv(4096) for _ in range(2)] == [frame(0).ue_packet, frame(1).ue_packet]
        assert buffering.held(SEID) == (2, 228)
        buffering.apply(with_far(copies_buffered), with_far(copying_to(collector)))
        stands(buffering)
        assert buffering.counters["replayed"] == 2 and ring.frames == []
        buffering.take([frame(2, kind=PuntKind.DUPLICATE)])  # a live packet
        assert collector.recv(4096) == frame(2).ue_packet, "the replays made no copy"
        assert buffering.counters["duplicated"] == 3 and buffering.counters["unknown"] == 0
    finally:
        buffering.close()


def test_a_buffered_packet_of_a_duplicating_far_is_copied_also_when_its_queue_is_discarded(rig, collector):
    buffering, _, _ = rig
    copies_buffered = copying_to(collector).model_copy(update={"apply_action": frozenset({"BUFF", "DUPL"})})
    buffering.apply(None, with_far(copies_buffered))
    buffering.take([frame(0)])
    buffering.apply(with_far(copies_buffered), with_far(Far(id=FAR, apply_action=frozenset({"DROP"}))))
    stands(buffering)
    assert collector.recv(4096) == frame(0).ue_packet
    assert buffering.counters["discarded"] == 1 and buffering.counters["duplicated"] == 1


def test_the_counters_and_what_is_held_go_to_influxdb_and_prometheus(rig):
    buffering, _, _ = rig
    buffering.apply(None, with_far(BUFF_NOCP))
    buffering.take([frame(n) for n in range(4)])  # one past the session's limit
    buffering.take([frame(0, seid=99)])
    source = BufferingPoints(buffering, "edge-1")
    [point] = source.poll(7)
    assert (point.measurement, point.tags, point.time_ns) == ("dpp_upf_buffering", {"node": "edge-1"}, 7)
    assert point.fields == {**dict.fromkeys(UPF_BUFFERING_FIELDS, 0), "buffered": 3, "overflow": 1, "reported": 1,
                            "unknown": 1, "held_packets": 3, "held_bytes": 342}
    assert point.line() == ("dpp_upf_buffering,node=edge-1 buffered=3i,overflow=1i,replayed=0i,replay_failed=0i,"
                            "discarded=0i,reported=1i,duplicated=0i,duplicate_failed=0i,duplicate_refused=0i,unknown=1i,"
                            "held_packets=3i,held_bytes=342i 7")
    buffering.apply(with_far(BUFF_NOCP), with_far(FORW))
    stands(buffering)
    metrics = exposition(source.snapshot(8), load={}).decode()
    assert 'dpp_upf_buffering_replayed_total{node="edge-1"} 3.0' in metrics
    assert 'dpp_upf_buffering_held_packets{node="edge-1"} 0.0' in metrics
    assert "# TYPE dpp_upf_buffering_held_bytes gauge" in metrics


def test_a_gtpu_t_pdu_has_the_teid_and_the_length():
    assert gtpu_tpdu(0x1234, b"abc") == struct.pack("!BBHI", 0x30, 0xFF, 3, 0x1234) + b"abc"


def test_no_copy_goes_outside_upf_peer_networks(rig, collector):
    """A FAR accepted while its copies' peer was allowed, after upf.peer_networks narrowed: nothing
    is sent there, and the refusal is counted."""
    buffering, _, _ = rig
    buffering.allowed = Destinations(["192.0.2.0/24"])
    buffering.apply(None, with_far(copying_to(collector)))
    buffering.take([frame(1, kind=PuntKind.DUPLICATE)])
    assert buffering.counters["duplicate_refused"] == 1 and buffering.counters["duplicated"] == 0
    collector.setblocking(False)
    with pytest.raises(BlockingIOError):
        collector.recv(4096)


def test_a_replay_runs_once_the_transaction_is_over_holding_neither_the_service_s_lock_nor_the_store_s(tmp_path):
    """Through the UPF and its PFCP endpoint: a FAR that buffers, modified to forward; its queue is
    replayed after the COMMIT (the replay runs the program, and sends nothing for a change undone),
    and not under the service's lock or the store's, which every other change of the node waits for."""
    from tests.upf.conftest import Endpoint
    from tests.upf.smf import Smf, apply_action, cause, create_far, establishment_ies, find, gtpu_tunnel, ie, node_id
    from tests.upf.smf import recovery

    service_lock, noted = threading.RLock(), []
    endpoint = Endpoint(tmp_path / "netapp.db", rules_lock=service_lock)

    class Noting(Recorder):
        def upf_replay(self, data: bytes, ifindex: int) -> None:
            with contextlib.closing(sqlite3.connect(tmp_path / "netapp.db")) as reader:  # what is committed
                bodies = [body for (body,) in reader.execute("SELECT body FROM upf_sessions")]
            locks = (service_lock._is_owned(), endpoint.store._lock._is_owned())  # type: ignore[attr-defined]
            noted.append((data, locks, ["192.0.2.20" in body for body in bodies]))

    recorder = Noting()
    buffering = Buffering(recorder, recorder)
    endpoint.applier = buffering  # type: ignore[assignment]
    endpoint.restart()
    smf = Smf(endpoint.server.address)
    try:
        assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == 1
        ies = establishment_ies(0x61)
        ies[7] = create_far(2, core=False, gnb=None, actions=("BUFF",))
        up_seid = find(smf.ask("PFCPSessionEstablishmentReq", ies, seid=0), 57)["Data"]["SEID"].get_val()
        buffering.take([frame(0, seid=up_seid, pdr_id=3)])
        assert buffering.held(up_seid) == (1, 114)
        forwarding = ie(10, [ie(108, {"Val": 2}), apply_action("FORW"), ie(11, [gtpu_tunnel("192.0.2.20", 0x200)])])
        assert cause(smf.ask("PFCPSessionModificationReq", [forwarding], seid=up_seid)) == 1
        assert noted == [(frame(0).frame, (False, False), [True])], "replayed after the commit, those locks free"
    finally:
        smf.close()
        endpoint.close()
        buffering.close()
