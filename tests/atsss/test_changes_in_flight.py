"""A session changed while its packets flow: the downlink run without pause on one CPU (the
benchmark harness puts the original packet back before every repetition, bench/bpf/harness.bpf.c)
while the service, on another thread, PATCHes the session many times (a path's weight, its RTT, a
path down and up again, the mode between weighted round-robin and round-robin). The control plane
never writes the words the packets move (DCCP and MP_SEQ numbers, what a path sent), so afterwards
the session's MP_SEQ counter is the number of packets sent (each number given once: a write that
carried a counter over from a read before some packet would have set it back, and that packet's
number been given again), each path's DCCP counter the number of packets it sent, and the paths'
counts add up to every packet, their bytes to every byte. The verdict does not depend on timing:
on this code it holds whatever the interleaving; with the old read, carry over and write it fails
whenever a packet falls between a read and its write, which the many changes of one run make
certain (checked 5 runs out of 5). Two changes of one session at once (tests/utils/interleave.py)
both land, in the store and in the maps."""

from __future__ import annotations

import ctypes
import ipaddress
import os
import shutil
import subprocess
import threading
from typing import Any, Iterator

import pytest

from bench.harness import Harness, Walk, build_harness
from bench.libbpf import test_run as prog_test_run
from netapp.atsss import store as stored
from netapp.atsss.models import AtsssSessionPatch, AtsssSessionSpec
from netapp.atsss.service import Atsss, path_key
from netapp.atsss.abi import Session, SessionKey
from netapp.atsss.table import SESSION_WRITER, AtsssMaps
from netapp.dataplane.facade import Dataplane
from netapp.service.contract import Principal, Scope
from netapp.service.store import Store
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
from tests.atsss.atsss import XDP_TX, AtsssProgram, delete_every_session, ethernet, ue_packet
from tests.utils.dataplane import two_cpus
from tests.utils.interleave import SecondChange, calling_back
from tests.utils.kernel import pin_dir, require_kernel
from tests.utils.maps import pinned_instance
from tests.utils.object_tables import ObjectTables

ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
CAROL = Principal("carol", frozenset({Scope.READ, Scope.INTENTS_WRITE}))
UE = "10.60.0.5"
UE_AT = 14 + 16  # the inner IPv4 destination: the walk writes the UE's address there
PAYLOAD_AT = 14 + 20 + 8
CHUNK = 100_000  # repetitions of one run of the packet thread
# The changes, in turn: each a PATCH body (path 0 stays up, so every packet has a path).
CHANGES = [
    {"paths": [{"index": 1, "weight": 1}]},
    {"paths": [{"index": 0, "rtt_us": 900}]},
    {"paths": [{"index": 1, "up": False}]},
    {"mode": "round_robin"},
    {"paths": [{"index": 1, "up": True, "rtt_us": 1500}]},
    {"paths": [{"index": 1, "weight": 3}]},
    {"mode": "weighted", "paths": [{"index": 0, "rtt_us": 0}]},
]
ROUNDS = 30  # of CHANGES: 210 PATCHes


def path(n: int, **overrides: Any) -> dict[str, Any]:
    return {"access": "3GPP" if n % 2 else "non-3GPP", "local": f"192.0.2.{n}", "peer": f"198.51.100.{n}",
            "local_port": 5000 + n, "peer_port": 6000 + n, "source_mac": f"02:00:00:00:aa:0{n}",
            "next_hop_mac": f"02:00:00:00:bb:0{n}", **overrides}


@pytest.fixture(scope="module")
def harness():
    with Harness(build_harness()) as h:
        yield h
        h.release_target()


@pytest.fixture
def service(atsss: AtsssProgram, tmp_path, node_ns) -> Iterator[Atsss]:
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    TenantService(lambda: store).put_tenant(ADMIN, "carol",
                                            TenantSpec.model_validate({"traffic": [{"dst": "10.60.0.0/24"}]}))
    service = Atsss(store, AtsssMaps(ObjectTables(atsss.obj).table), netns=node_ns)
    try:
        yield service
    finally:
        delete_every_session(service, ADMIN)
        store.close()


class Flow(threading.Thread):
    """The downlink of one UE packet, `chunk` repetitions a run, on one CPU until stopped; `sent`
    counts the repetitions of the runs done, `started` is set once the first run is done."""

    def __init__(self, prog_fd: int, frame: bytes, cpu: int, chunk: int = CHUNK):
        super().__init__()
        self.prog_fd, self.frame, self.cpu, self.chunk = prog_fd, frame, cpu, chunk
        self.sent, self.verdicts = 0, set()
        self.started, self.stop = threading.Event(), threading.Event()

    def run(self) -> None:
        os.sched_setaffinity(0, {self.cpu})
        try:
            while not self.stop.is_set():
                self.verdicts.add(prog_test_run(self.prog_fd, self.frame, self.chunk, out_size=len(self.frame) + 256).retval)
                self.sent += self.chunk
                self.started.set()
        finally:
            self.started.set()


def changes_while_packets_flow(service: Atsss, maps: AtsssMaps, prog_fd: int, harness: Harness) -> None:
    """ROUNDS of CHANGES PATCHed while `prog_fd` (a downlink program over the maps of `maps`) runs the
    UE's packet on one CPU; then the numbers and counts must be exact."""
    cpu = two_cpus()[0]
    spec = AtsssSessionSpec.model_validate({"name": "ue5", "ue": UE, "mode": "weighted",
                                            "paths": [path(1, weight=3), path(2)]})
    slots = service.create_session(CAROL, "ue5", spec).slots
    packet = ue_packet(UE, bytes(64))
    frame = ethernet(packet)
    harness.set_walk(Walk(1, teid_base=0, src_base=int.from_bytes(bytes(map(int, UE.split("."))), "big"),
                          teid_off=PAYLOAD_AT, src_off=UE_AT))
    harness.set_target(prog_fd)
    harness.set_packet(frame)
    flow = Flow(harness.walk_head_fd, frame, cpu)
    flow.start()
    try:
        assert flow.started.wait(timeout=30)
        for _ in range(ROUNDS):
            for change in CHANGES:
                service.patch_session(CAROL, "ue5", AtsssSessionPatch.model_validate(change))
    finally:
        flow.stop.set()
        flow.join()
    assert flow.verdicts == {XDP_TX}
    session = maps.session(ipaddress.ip_address(UE))
    paths = maps.paths(slots)
    assert session is not None and min(p.packets for p in paths) > 0, "both paths carried packets"
    # each number given once: the counters are the packets that took one; each packet counted
    assert {"mp_seq": session.mp_seq, "dccp_seq": [p.dccp_seq for p in paths],
            "packets": sum(p.packets for p in paths), "bytes": sum(p.bytes for p in paths)} == {
        "mp_seq": flow.sent, "dccp_seq": [p.packets for p in paths],
        "packets": flow.sent, "bytes": flow.sent * len(packet)}


def test_changes_while_packets_flow_give_no_number_twice_and_lose_no_count(atsss, service, harness):
    changes_while_packets_flow(service, service._maps, atsss.prog, harness)


@pytest.fixture
def older_instance() -> Iterator[str]:
    """A pinned pipeline as an older build left it: no session writer (its pin removed, the program
    gone with it)."""
    require_kernel()
    with pinned_instance("atsss-old") as name:
        Dataplane.open(instance=name).close()
        (pin_dir(name) / "progs" / SESSION_WRITER).unlink()
        yield name


def test_an_instance_pinned_without_the_writer_gets_this_build_s_and_its_changes_lose_nothing(
        older_instance, harness, tmp_path, node_ns):
    node = Dataplane.open(instance=older_instance)
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    try:
        assert SESSION_WRITER not in [prog["name"] for prog in node.status()["programs"]]
        TenantService(lambda: store).put_tenant(ADMIN, "carol",
                                                TenantSpec.model_validate({"traffic": [{"dst": "10.60.0.0/24"}]}))
        service = Atsss(store, AtsssMaps(node.table), netns=node_ns)
        changes_while_packets_flow(service, service._maps, node.program_fd("dpp_atsss_stage"), harness)
        assert SESSION_WRITER in [prog["name"] for prog in node.status()["programs"]]
        delete_every_session(service, ADMIN)
    finally:
        store.close()
        node.close()
    assert (pin_dir(older_instance) / "progs" / SESSION_WRITER).exists(), "pinned for the next process"


def test_an_instance_whose_sessions_are_laid_out_otherwise_is_warned_of_once(older_instance, caplog):
    """Where this build's writer cannot run on the instance's session map (another value size here,
    which the reopen's BTF check does not see in a map without BTF), the instance and what to do are
    told once: session changes are then written whole."""
    bpftool = shutil.which("bpftool")
    if bpftool is None:
        pytest.skip("bpftool is needed to pin a map of another layout")
    pin = pin_dir(older_instance) / "maps" / "dpp_atsss_sessions"
    pin.unlink()
    subprocess.run([bpftool, "map", "create", str(pin), "type", "hash", "key", str(ctypes.sizeof(SessionKey)),
                    "value", str(ctypes.sizeof(Session) + 8), "entries", "16", "name", "dpp_atsss_sessions"],
                   check=True, capture_output=True)
    node = Dataplane.open(instance=older_instance)
    try:
        table = node.table("dpp_atsss_slots")
        assert [table.program_fd(SESSION_WRITER), table.program_fd(SESSION_WRITER)] == [None, None]
    finally:
        node.close()
    told = [record.getMessage() for record in caplog.records if f"has no program {SESSION_WRITER}" in record.getMessage()]
    assert len(told) == 1 and f"instance '{older_instance}'" in told[0] and "dpp_atsss_sessions" in told[0], told
    assert "unpin the instance and load it again" in told[0]


def test_a_path_reported_down_or_up_moves_its_bit_of_the_sessions_mask_with_its_flag(atsss, service):
    """REDUNDANT's marking reads the session's mask of the paths up, not the paths: a PATCH of a
    path's up flag stores both, the path's flag and the session's bit, the session's numbers kept.
    The mask is kept in every mode (a redundant session needs interfaces for its copies; the mask's
    upkeep is the same)."""
    spec = AtsssSessionSpec.model_validate({"name": "ue5", "ue": UE, "mode": "round_robin",
                                            "paths": [path(1), path(2), path(3)]})
    slots = service.create_session(CAROL, "ue5", spec).slots
    assert atsss.session(UE).up == 0b111
    before = atsss.session(UE).mp_seq
    service.patch_session(CAROL, "ue5", AtsssSessionPatch.model_validate({"paths": [{"index": 1, "up": False}]}))
    assert (atsss.session(UE).up, [atsss.path(slot).flags & 1 for slot in slots]) == (0b101, [1, 0, 1])
    service.patch_session(CAROL, "ue5", AtsssSessionPatch.model_validate({"paths": [{"index": 1, "up": True},
                                                                                   {"index": 2, "up": False}]}))
    assert (atsss.session(UE).up, [atsss.path(slot).flags & 1 for slot in slots]) == (0b011, [1, 1, 0])
    assert atsss.session(UE).mp_seq == before


def test_a_put_that_only_reorders_the_paths_keeps_each_path_s_slot_and_its_numbers_go_on(atsss, service):
    """A path is the same path by its subflow and access, wherever the body puts it: a PUT that
    reverses the paths' order gives no path a new slot, so each path's DCCP numbers and counts go on
    from where they were (a path given a new slot would start from 0), and the session's positions
    lead to the slots in the new order."""
    paths = [path(1), path(2), path(3)]
    spec = {"name": "ue5", "ue": UE, "mode": "round_robin", "paths": paths}
    slots = service.create_session(CAROL, "ue5", AtsssSessionSpec.model_validate(spec)).slots
    frame = ethernet(ue_packet(UE, bytes(64)))
    for _ in range(7):  # 3, 2 and 2 packets on the paths
        assert atsss.run(frame)[0] == XDP_TX
    before = {slot: (atsss.path(slot).dccp_seq, atsss.path(slot).packets) for slot in slots}
    assert sorted(before.values()) == [(2, 2), (2, 2), (3, 3)]
    service.note_losses({path_key(service.get_session(CAROL, "ue5"), 0): 0.25})  # the first path's, measured
    reordered = service.put_session(CAROL, "ue5", AtsssSessionSpec.model_validate({**spec, "paths": paths[::-1]}))[0]
    assert reordered.slots == slots[::-1]
    assert service.measured_losses(reordered) == [None, None, 0.25], "its measured loss goes with the path"
    assert list(atsss.session(UE).path[:3]) == slots[::-1]
    assert {slot: (atsss.path(slot).dccp_seq, atsss.path(slot).packets) for slot in slots} == before
    for _ in range(3):  # one more on each path
        assert atsss.run(frame)[0] == XDP_TX
    assert {slot: (atsss.path(slot).dccp_seq, atsss.path(slot).packets) for slot in slots} == {
        slot: (seq + 1, packets + 1) for slot, (seq, packets) in before.items()}
    assert atsss.session(UE).mp_seq == 10


def test_two_patches_of_other_paths_made_at_once_both_land_in_the_store_and_the_maps(atsss, service, monkeypatch):
    """One PATCH reports path 0 down while another, begun at the first's read of the session,
    weighs path 1 (a monitoring module and the AI loop): the session read, changed and written under
    one lock, the second reads what the first wrote. Read outside the lock, both would read the
    session before either wrote, and the later write would put the other's path back as it was."""
    spec = AtsssSessionSpec.model_validate({"name": "ue5", "ue": UE, "mode": "weighted",
                                            "paths": [path(1, weight=1), path(2, weight=1)]})
    slots = service.create_session(CAROL, "ue5", spec).slots
    weigh = AtsssSessionPatch.model_validate({"paths": [{"index": 1, "weight": 3}]})
    second = SecondChange(service._lock, lambda: service.patch_session(CAROL, "ue5", weigh))
    service._lock = second
    monkeypatch.setattr(stored, "stored_session", calling_back(stored.stored_session, second.at_read))

    service.patch_session(CAROL, "ue5", AtsssSessionPatch.model_validate({"paths": [{"index": 0, "up": False}]}))
    second.join()

    session = service.get_session(CAROL, "ue5")
    assert [(one.up, one.weight) for one in session.paths] == [(False, 1), (True, 3)]
    assert session.revision == 3
    assert (atsss.session(UE).up, list(atsss.session(UE).weight[:2])) == (0b10, [1, 3])
    assert [atsss.path(slot).flags & 1 for slot in slots] == [0, 1]
