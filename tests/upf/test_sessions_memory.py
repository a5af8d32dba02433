"""What sessions held in memory cost Python's cyclic garbage collector: nothing that grows with them.
Sessions are kept as their rows' JSON (netapp.upf.held.SessionTable), so the objects the collector
tracks, and so walks on a full collection, do not grow with the sessions held, and creating and
deleting sessions leaves none behind."""

from __future__ import annotations

import gc
import ipaddress
import itertools
import json
import subprocess
import sys
import weakref

import pytest

from netapp.service.store import Store
from netapp.upf.pfcp.codec import decode
from netapp.upf.pfcp.handlers import Handlers
from netapp.upf.held import SessionTable
from netapp.upf.pfcp.server import PfcpServer, ResponseCache
from netapp.upf.sessions import Upf
from netapp.upf.store import Association
from tests.upf.conftest import N3
from tests.upf.smf import Smf, establishment_ies, ue_of

PEER = ("10.0.0.1", 8805)
SESSIONS = 2000
ROUNDS = 12  # of 100 sessions created and deleted: a leak of one object in four sessions grows 275 after the first
WARM = 600  # sessions before the count: more than the endpoint's bounded caches hold (256 each)
UES = itertools.count(1)  # a UE address of its own for every session of the module


@pytest.fixture
def handlers(tmp_path):
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    upf = Upf(store, n3_ipv4=N3)
    upf.setup_association(Association(node_id="10.0.0.1", address=PEER[0], port=PEER[1], recovery_time_stamp=1))
    try:
        yield Handlers(upf, N3, N3)
    finally:
        store.close()


def _tracked() -> int:
    """Objects the collector tracks, but dead weak references: sqlite3 keeps one to each cursor a
    connection made and drops the dead ones only every 200 cursors, so they come and go in hundreds
    (counted with them, one round's count moved between 54 and 569); a live one still counts."""
    gc.collect()
    return sum(1 for each in gc.get_objects() if not (type(each) is weakref.ref and each() is None))


def _establish(handlers: Handlers, request: bytes, count: int) -> list[int]:
    """`count` sessions through the endpoint's handler, a group of 32 per transaction; their SEIDs."""
    seids = []
    for start in range(0, count, 32):
        changes = [lambda: handlers.establishment(decode(_own_ue(request)), PEER) for _ in range(min(32, count - start))]
        seids += [response.ies.one(57)["seid"] for response in handlers.upf.run_group(changes)]
    return seids


def _own_ue(request: bytes) -> bytes:
    """The request with a UE address no other session has (the UPF refuses one another session holds)."""
    ue = ipaddress.IPv4Address(ue_of(7)).packed
    return request.replace(ue, (ipaddress.IPv4Address("10.128.0.0") + next(UES)).packed)


def test_sessions_held_add_no_objects_for_the_collector_to_walk(handlers):
    request = Smf.build(Smf.__new__(Smf), "PFCPSessionEstablishmentReq", establishment_ies(7), seid=0, seq=1)
    _establish(handlers, request, WARM)  # the bounded caches (IEs, rules, addresses, flows) full
    before = _tracked()
    _establish(handlers, request, SESSIONS)
    grown = _tracked() - before
    assert len(handlers.upf.sessions) == SESSIONS + WARM
    # Held as models, each session would be some 130 tracked objects (260,000 here).
    assert grown < SESSIONS // 10, f"{grown} more tracked objects for {SESSIONS} sessions"


def _made_since(make) -> int:
    """The objects the collector tracks that `make()` added and that the next young collection
    would walk: counted without a collection between (a collection untracks a tuple of strings and
    numbers, which a young one would have walked first)."""
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        make()
        return len(gc.get_objects()) - before
    finally:
        gc.enable()


def test_sessions_held_are_no_containers_for_young_collections_to_walk(handlers):
    table = SessionTable()
    request = Smf.build(Smf.__new__(Smf), "PFCPSessionEstablishmentReq", establishment_ies(7), seid=0, seq=1)
    session = handlers.upf.sessions[_establish(handlers, request, 1)[0]]
    bodies = [session.model_copy(update={"seid": seid}) for seid in range(1, 1001)]
    added = _made_since(lambda: [table.put(each, each.stored_json()) for each in bodies])
    assert len(table) == 1000 and table.body(7) == bodies[6].stored_json() and table.of(session.node_id)[0].seid == 1
    assert added < 100, f"{added} tracked objects made holding 1,000 sessions (a pair each would be 1,000)"


def test_responses_kept_for_retransmissions_are_no_containers_for_young_collections_to_walk():
    cache, peer = ResponseCache(size=2000), ("10.0.0.1", 8805)
    added = _made_since(lambda: [cache.put(peer, seq, b"response %d" % seq) for seq in range(1000)])
    assert len(cache) == 1000 and cache.get(peer, 7) == b"response 7" and cache.get(("10.0.0.2", 8805), 7) is None
    # a key each (the peer's address, port and sequence number): nothing else held is a container
    assert added < 1100, f"{added} tracked objects made keeping 1,000 responses"


def test_responses_kept_expire_in_turn_and_the_oldest_go_past_the_size():
    now = [0.0]
    cache, peer = ResponseCache(size=3, ttl_s=10.0, clock=lambda: now[0]), ("10.0.0.1", 8805)
    for seq in range(4):
        now[0] = seq
        cache.put(peer, seq, b"%d" % seq)
    assert cache.get(peer, 0) is None and cache.get(peer, 1) == b"1" and len(cache) == 3  # the oldest gone
    cache.put(peer, 1, b"again")  # put again: its time starts anew
    now[0] = 12.5
    assert cache.get(peer, 2) is None and cache.get(peer, 3) == b"3" and cache.get(peer, 1) == b"again"
    now[0] = 14.0
    assert cache.get(peer, 3) is None and len(cache) == 0


def test_creating_and_deleting_sessions_leaves_nothing_behind(handlers):
    request = Smf.build(Smf.__new__(Smf), "PFCPSessionEstablishmentReq", establishment_ies(7), seid=0, seq=1)
    for seid in _establish(handlers, request, 64):  # warm: caches, and whatever a first deletion makes once
        handlers.upf.delete(seid)
    before, counts = _tracked(), []
    for _ in range(ROUNDS):
        for seid in _establish(handlers, request, 100):
            handlers.upf.delete(seid)
        counts.append(_tracked() - before)
    assert len(handlers.upf.sessions) == 0 and handlers.upf._teids.held == {}
    # The first round leaves what a first round makes once (some 250 objects); after it a few come and
    # go, where one left per session would be 100 a round.
    growth = max(counts) - counts[0]
    assert growth < 100, f"tracked objects after each round of 100 sessions created and deleted: {counts}"


def test_settling_the_collector_freezes_start_up_and_spaces_young_collections():
    """In a process of its own: settle_collector() changes the whole process's collector."""
    script = (
        "import gc, json\n"
        "from netapp.upf.pfcp.server import GC_YOUNG, settle_collector\n"
        "before = gc.get_freeze_count()\n"
        "settle_collector()\n"
        "print(json.dumps([before, gc.get_freeze_count(), gc.get_threshold()[0], GC_YOUNG]))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    before, frozen, young, wanted = json.loads(result.stdout)
    assert before == 0 and frozen > 10_000, "start-up's objects (the modules) are out of the collector's walk"
    assert young == wanted


class _Kept:
    """An endpoint's transport fed by hand: what it sends is kept."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def sendto(self, data: bytes, peer) -> None:
        self.sent.append(data)

    def get_extra_info(self, name: str) -> None:
        return None


class _NoLoop:
    def call_soon(self, *_) -> None:
        pass  # the test drains the queue itself


def test_no_young_collection_comes_while_a_group_of_requests_is_handled(handlers):
    """A group's objects live until it is answered; a young collection among them would walk them
    all and promote them. With young collections every 100 allocations, two groups of 20
    establishments through the endpoint: none starts while a group is handled, they come between,
    and the collector is as it was after each drain (on, or left off)."""
    server = PfcpServer(handlers.upf, "127.0.0.1", 0)
    endpoint, transport = server.protocol, _Kept()
    endpoint.transport, endpoint._loop = transport, _NoLoop()
    endpoint.open_requests()
    datagrams = [_own_ue(Smf.build(Smf.__new__(Smf), "PFCPSessionEstablishmentReq", establishment_ies(7), seid=0, seq=seq))
                 for seq in range(2, 62)]
    handling, collections = [], {"in a group": 0, "between": 0}
    run_group = handlers.upf.run_group

    def watched(changes):
        handling.append(changes)
        try:
            return run_group(changes)
        finally:
            handling.pop()

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            collections["in a group" if handling else "between"] += 1

    handlers.upf.run_group = watched
    threshold = gc.get_threshold()
    gc.callbacks.append(count)
    gc.set_threshold(100)
    try:
        for group, collecting in zip((datagrams[:20], datagrams[20:40], datagrams[40:]), (True, True, False)):
            (gc.enable if collecting else gc.disable)()
            for data in group:
                endpoint.datagram_received(data, PEER)
            endpoint._drain(whole=True)
            assert gc.isenabled() == collecting
    finally:
        gc.enable()
        gc.callbacks.remove(count)
        gc.set_threshold(*threshold)
    assert endpoint.counters["accepted"] == 60 and len(transport.sent) == 60 and len(handlers.upf.sessions) == 60
    assert collections["in a group"] == 0, f"{collections['in a group']} young collections walked a group"
    assert collections["between"] > 0  # the threshold is low enough: the collector ran, not amid a group
