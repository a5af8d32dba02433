"""An ATSSS session's change whose COMMIT the store refuses (a disk full, an I/O error: the store's
commit made to fail here) leaves ATSSS's maps exactly as they were, through the REST API (the real
uvicorn server) over the NetApp's pinned pipeline (dpp.bpf.o, its maps read here key by key): a
create, a PUT moving a path to a new subflow, a PATCH of the weights (what the AI loop sends), a
delete, a PUT giving a redundant session other ports, a PUT moving a session to another UE and one
making a session redundant. The session the API says does not exist is not in the data path, the
one it still holds is, on its UE (the index's entry and the UE filter's bit), with the numbers and
counts its packets had moved (the downlink's MP_SEQ and DCCP numbers, what each path received, its
loss estimate), and a redundant session leads to its group of ports again, a group the change gave
emptied; the service keeps what the store keeps. Packets that pass between the change's read of
the maps and its write are not undone: no number they took is given again, nothing they counted
uncounted."""

from __future__ import annotations

import errno
from ctypes import c_uint32
from typing import Any, Callable, Iterator

import httpx
import pytest

from netapp.atsss import store as stored
from netapp.atsss.abi import Access, Session
from netapp.atsss.flow_states import undone_on_failure
from netapp.atsss.index import SessionIndex
from netapp.atsss.routes import get_atsss
from netapp.atsss.service import Atsss
from netapp.atsss.table import AtsssMaps
from netapp.dataplane.errors import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.service import store as store_module
from netapp.service.store import Store, StoreError
from tests.api import conftest as api
from tests.api.problems import assert_problem
from tests.atsss.atsss import PathSpec, decode, ethernet, path_body, session_key, ue_packet
from tests.atsss.test_flows import CELL, WIFI, node  # noqa: F401 - node: the fixture, this module's own instance
from tests.atsss.uplink import uplink_frame
from tests.utils.service import ADMIN

admin, api_app, client_for, server, service, tenant_a, tokens_path = (
    api.admin, api.api_app, api.client_for, api.server, api.service, api.tenant_a, api.tokens_path)

SESSIONS = "/api/v1/atsss/sessions"
XDP_PASS, XDP_TX = "PASS", "TX"  # the pipeline's verdicts as Dataplane.test_run names them
UE = "10.60.0.5"
MOVED_UE = "10.60.0.6"  # where a PUT moves the session
GRANTS = [{"dst": "10.60.0.0/24"}, *({"interface": f"acc{n}", "dst": "10.60.0.0/24"} for n in range(3))]
WIFI2 = PathSpec("192.0.2.3", "203.0.113.9", 5005, 5006, Access.NON_THREE_GPP,
                 bytes.fromhex("02000000aa03"), bytes.fromhex("02000000bb03"))
# The maps a session's change writes, read whole (arrays: their entries not zero).
MAPS = ("dpp_atsss_paths", "dpp_atsss_path_stats", "dpp_atsss_path_rx", "dpp_atsss_uplink", "dpp_atsss_ues",
        "dpp_atsss_gate")


def body(name: str = "ue5", ue: str = UE, mode: str = "weighted", paths: tuple[PathSpec, ...] = (CELL, WIFI),
         weights: tuple[int, ...] = (3, 1), interfaces: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": name, "ue": ue, "mode": mode,
            "paths": [path_body(spec, weight=weight, **({"interface": interfaces[n]} if interfaces else {}))
                      for n, (spec, weight) in enumerate(zip(paths, weights))]}


def held(dp: Dataplane) -> dict[str, Any]:
    """Every entry of ATSSS's maps a session's change writes, as raw bytes: the sessions as the data
    path finds them by UE address (through the index, read afresh; their MP_SEQ counters aside, which
    an undo moves on past what packets may have taken meanwhile), the paths, what they received
    and their loss estimates by slot, the uplink entries, the UE filter, the gate, and the groups of
    redundant ports with each position's ifindex."""
    entries: dict[str, Any] = {"sessions": {bytes(key): without_mp_seq(value)
                                            for key, value in SessionIndex(dp.table).items()}}
    for name in MAPS:
        entries[name] = {raw(key): raw(value) for key, value in dp.table(name).items() if any(raw(value))}
    entries["dpp_atsss_tx"] = {group: {position: ifindex for position, (ifindex, _) in ports.items()}
                               for group, ports in AtsssMaps(dp.table).groups_ports().items()}
    return entries


def raw(value: Any) -> bytes:
    """A map's key or value as bytes: an integer's own (bytes(n) would be n zero bytes), a struct's."""
    return value.to_bytes(8, "little") if isinstance(value, int) else bytes(value)


def without_mp_seq(value: Session) -> bytes:
    copy = Session.from_buffer_copy(value)
    copy.mp_seq = 0
    return bytes(copy)


def traffic(dp: Dataplane, paths: tuple[PathSpec, ...] = (CELL, WIFI), frames: int = 5) -> None:
    """What the UE's packets move in the maps: downlink frames (the session's MP_SEQ and scheduler
    state, each path's DCCP number and what it sent), an uplink Data on each path (what it received,
    its estimate's numbers)."""
    for _ in range(frames):
        assert dp.test_run(ethernet(ue_packet(UE))).verdict == XDP_TX
    for seq, spec in enumerate(paths, start=7):
        assert dp.test_run(uplink_frame(spec, ue_packet("198.51.100.80", b"up", src=UE), seq=seq)).verdict == XDP_PASS


@pytest.fixture
def atsss(api_app, admin, node_ns, node) -> Iterator[Atsss]:
    """The API's ATSSS service over the node's maps (and its copy programs), in the namespace
    of the node's addresses; tenant-a granted its UEs and access interfaces."""
    atsss = Atsss(api_app.state.tenants.store, AtsssMaps(node.table), netns=node_ns,
                  program_fd=node.program_fd)
    api_app.dependency_overrides[get_atsss] = lambda: atsss
    assert admin.put("/api/v1/tenants/tenant-a", json={"traffic": GRANTS}).status_code in (200, 201)
    try:
        yield atsss
    finally:
        api_app.dependency_overrides.pop(get_atsss, None)
        for session in atsss.list_sessions(ADMIN):
            atsss.delete_session(ADMIN, f"{session.tenant}/{session.name}")


def refuse_commit(transaction: store_module.Transaction) -> None:
    raise StoreError("commit: database or disk is full")


def refused(request: Callable[[], httpx.Response], monkeypatch: pytest.MonkeyPatch) -> None:
    """`request()` made while the store refuses every COMMIT: a 500 problem."""
    with monkeypatch.context() as failing:
        failing.setattr(store_module.Transaction, "commit", refuse_commit)
        response = request()
    assert_problem(response, 500)


def test_a_create_the_store_does_not_commit_leaves_no_session_in_the_data_path(atsss, node, tenant_a,
                                                                               monkeypatch, slots_given_again):
    before = held(node)

    refused(lambda: tenant_a.post(SESSIONS, json=body()), monkeypatch)

    assert held(node) == before
    assert node.test_run(ethernet(ue_packet(UE))).verdict == XDP_PASS, "the UE's downlink as without ATSSS"
    assert_problem(tenant_a.get(f"{SESSIONS}/ue5"), 404)
    assert tenant_a.post(SESSIONS, json=body()).json()["slots"] == [1, 2], "its slots were not kept"


def test_a_put_moving_a_path_the_store_does_not_commit_leaves_the_session_and_its_numbers(atsss, node, tenant_a,
                                                                                          monkeypatch):
    """The PUT empties WIFI's slot for WIFI2's new one: put back with WIFI's DCCP number and counts."""
    assert tenant_a.post(SESSIONS, json=body()).status_code == 201
    traffic(node)
    before = held(node)

    refused(lambda: tenant_a.put(f"{SESSIONS}/ue5", json=body(mode="round_robin", paths=(CELL, WIFI2))),
            monkeypatch)

    assert held(node) == before
    assert decode(node.test_run(ethernet(ue_packet(UE))).data).mp_seq >= 5, "an MP_SEQ number given again"
    assert tenant_a.get(f"{SESSIONS}/ue5").json()["revision"] == 1


def test_a_patch_of_the_weights_the_store_does_not_commit_leaves_the_sessions_weights(atsss, node, tenant_a,
                                                                                     monkeypatch):
    """What the AI loop sends (netapp.ai.client): the maps keep the stored weights 3:1."""
    assert tenant_a.post(SESSIONS, json=body()).status_code == 201
    traffic(node)
    before = held(node)

    refused(lambda: tenant_a.patch(f"{SESSIONS}/ue5", json={"paths": [{"index": 0, "weight": 1},
                                                                      {"index": 1, "weight": 5}]}), monkeypatch)

    assert held(node) == before


def test_a_delete_the_store_does_not_commit_leaves_the_session_with_its_numbers(atsss, node, tenant_a,
                                                                               monkeypatch):
    assert tenant_a.post(SESSIONS, json=body()).status_code == 201
    traffic(node)
    before = held(node)

    refused(lambda: tenant_a.delete(f"{SESSIONS}/ue5"), monkeypatch)

    assert held(node) == before
    assert decode(node.test_run(ethernet(ue_packet(UE))).data).mp_seq >= 5, "an MP_SEQ number given again"
    assert tenant_a.get(f"{SESSIONS}/ue5").status_code == 200


def test_a_redundant_put_of_other_ports_the_store_does_not_commit_leads_to_its_group_again(atsss, node, tenant_a,
                                                                                          monkeypatch):
    """The PUT gives ports acc1, acc2 a new group and empties acc0, acc1's: written again, the
    session leading to it, the new group emptied."""
    assert tenant_a.post(SESSIONS, json=body(mode="redundant", interfaces=("acc0", "acc1"))).status_code == 201
    before = held(node)
    assert len(before["dpp_atsss_tx"]) == 1

    refused(lambda: tenant_a.put(f"{SESSIONS}/ue5", json=body(mode="redundant", interfaces=("acc1", "acc2"))),
            monkeypatch)

    assert held(node) == before


def kept(atsss: Atsss) -> tuple[Any, ...]:
    """What the service keeps of its sessions beside the maps: the stored sessions (every tenant's),
    which UE each holds, the sessions told unserved and the groups of ports it has given."""
    sessions = atsss.list_sessions(ADMIN)
    holders = {str(session.ue): stored.session_of_ue(atsss.store, str(session.ue)) for session in sessions}
    return ([session.model_dump() for session in sessions], holders, dict(atsss.unserved),
            dict(atsss._groups.assigned))


def test_a_put_moving_the_session_to_another_ue_the_store_does_not_commit_leaves_it_on_its_ue(
        atsss, node, tenant_a, monkeypatch):
    """The PUT takes UE 10.60.0.5's entry out of the index and gives 10.60.0.6 one: put back, the
    old UE's session found with its numbers, the new UE's downlink as without ATSSS."""
    assert tenant_a.post(SESSIONS, json=body()).status_code == 201
    traffic(node)
    before, service_before = held(node), kept(atsss)

    refused(lambda: tenant_a.put(f"{SESSIONS}/ue5", json=body(ue=MOVED_UE)), monkeypatch)

    assert held(node) == before
    assert kept(atsss) == service_before
    index = SessionIndex(node.table)
    assert index.get(session_key(UE)) is not None and index.get(session_key(MOVED_UE)) is None
    assert stored.session_of_ue(atsss.store, MOVED_UE) is None
    assert decode(node.test_run(ethernet(ue_packet(UE))).data).mp_seq >= 5, "an MP_SEQ number given again"
    assert node.test_run(ethernet(ue_packet(MOVED_UE))).verdict == XDP_PASS, "the new UE's downlink as without ATSSS"
    assert tenant_a.put(f"{SESSIONS}/ue5", json=body(ue=MOVED_UE)).status_code == 200  # committed, it moves
    assert node.test_run(ethernet(ue_packet(MOVED_UE))).verdict == XDP_TX


def test_a_put_making_the_session_redundant_the_store_does_not_commit_gives_no_group_and_no_copies(
        atsss, node, tenant_a, monkeypatch):
    """The PUT gives acc0, acc1 a group of ports and the session its copies: the group emptied
    again and untold, the session weighted with no group, as the store still has it."""
    assert tenant_a.post(SESSIONS, json=body(interfaces=("acc0", "acc1"))).status_code == 201
    traffic(node)
    before, service_before = held(node), kept(atsss)
    assert before["dpp_atsss_tx"] == {} and service_before[3] == {}

    refused(lambda: tenant_a.put(f"{SESSIONS}/ue5", json=body(mode="redundant", interfaces=("acc0", "acc1"))),
            monkeypatch)

    assert held(node) == before
    assert kept(atsss) == service_before
    assert tenant_a.get(f"{SESSIONS}/ue5").json()["mode"] == "weighted"
    assert node.test_run(ethernet(ue_packet(UE))).verdict == XDP_TX, "the downlink weighted, as before"
    redundant = tenant_a.put(f"{SESSIONS}/ue5", json=body(mode="redundant", interfaces=("acc0", "acc1")))
    assert redundant.status_code == 200 and len(held(node)["dpp_atsss_tx"]) == 1  # committed, it has a group


def packets_after_the_read(monkeypatch: pytest.MonkeyPatch, dp: Dataplane, frames: int = 0,
                           uplink: bytes = b"") -> list[int]:
    """The change's read of the maps for its undo (AtsssMaps.moved) followed by `frames` downlink
    frames of the UE and the `uplink` frame, before its write: the DCCP numbers its last path read
    then holds, appended to the list returned."""
    read = AtsssMaps.moved
    numbers: list[int] = []

    def moved(maps: AtsssMaps, ues, slots):
        found = read(maps, ues, slots)
        for _ in range(frames):
            assert dp.test_run(ethernet(ue_packet(UE))).verdict == XDP_TX
        if uplink:
            assert dp.test_run(uplink).verdict == XDP_PASS
        numbers.extend(path.dccp_seq for path in maps.paths(sorted(found.paths))[-1:] if path is not None)
        return found

    monkeypatch.setattr(AtsssMaps, "moved", moved)
    return numbers


def test_a_refused_delete_gives_no_mp_seq_number_taken_meanwhile_again(atsss, node, tenant_a, monkeypatch):
    assert tenant_a.post(SESSIONS, json=body()).status_code == 201
    traffic(node)  # MP_SEQ 0..4
    packets_after_the_read(monkeypatch, node, frames=3)  # MP_SEQ 5..7, between the read and the delete

    refused(lambda: tenant_a.delete(f"{SESSIONS}/ue5"), monkeypatch)

    assert decode(node.test_run(ethernet(ue_packet(UE))).data).mp_seq >= 8, "an MP_SEQ number given again"


def test_a_refused_put_gives_no_dccp_number_of_the_path_it_emptied_again(atsss, node, tenant_a, monkeypatch):
    """Round robin: two of the four frames between the read and the PUT go out of WIFI."""
    wifi = tenant_a.post(SESSIONS, json=body(mode="round_robin")).json()["slots"][1]
    traffic(node, frames=4)
    numbers = packets_after_the_read(monkeypatch, node, frames=4)

    refused(lambda: tenant_a.put(f"{SESSIONS}/ue5", json=body(mode="round_robin", paths=(CELL, WIFI2))),
            monkeypatch)

    after = AtsssMaps(node.table).paths([wifi])[0].dccp_seq
    assert after >= numbers[0], f"WIFI's DCCP numbers {after}..{numbers[0] - 1} given again"


def test_a_refused_put_uncounts_nothing_the_path_it_emptied_received(atsss, node, tenant_a, monkeypatch):
    wifi = tenant_a.post(SESSIONS, json=body(mode="round_robin")).json()["slots"][1]
    traffic(node, frames=4)
    maps = AtsssMaps(node.table)
    received = maps.stats([wifi])[0].rx_packets
    packets_after_the_read(monkeypatch, node, uplink=uplink_frame(WIFI, ue_packet("198.51.100.80", b"up", src=UE),
                                                                    seq=50))

    refused(lambda: tenant_a.put(f"{SESSIONS}/ue5", json=body(mode="round_robin", paths=(CELL, WIFI2))),
            monkeypatch)

    assert maps.stats([wifi])[0].rx_packets == received + 1, "a packet received counted, then uncounted"
    assert node.table("dpp_atsss_path_rx").lookup([c_uint32(wifi)])[0].gsr == 50, "its DCCP number unlearnt"


def test_an_undo_failing_leaves_the_others_run_and_the_commits_failure_told(tmp_path, monkeypatch, caplog):
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    monkeypatch.setattr(store_module.Transaction, "commit", refuse_commit)
    undone: list[str] = []

    def refused_undo() -> None:
        undone.append("sessions")
        raise DataplaneError(errno.EBUSY, "update")

    try:
        with pytest.raises(StoreError, match="disk is full"):
            with undone_on_failure(store) as undos:
                undos.extend([lambda: undone.append("rules"), refused_undo])
    finally:
        store.close()

    assert undone == ["sessions", "rules"], "an undo not run"
    assert "could not be undone" in caplog.text


def test_a_redundant_put_whose_stale_group_the_maps_do_not_empty_is_kept(atsss, node, tenant_a, monkeypatch):
    """The sessions synced to their new group: the change stands, the old group left for the next."""
    assert tenant_a.post(SESSIONS, json=body(mode="redundant", interfaces=("acc0", "acc1"))).status_code == 201

    def refuse(maps: AtsssMaps, groups: list[int]) -> None:
        raise DataplaneError(errno.EBUSY, "update")

    with monkeypatch.context() as failing:
        failing.setattr(AtsssMaps, "groups_clear", refuse)
        put = tenant_a.put(f"{SESSIONS}/ue5", json=body(mode="redundant", interfaces=("acc1", "acc2")))

    assert put.status_code == 200
    assert tenant_a.get(f"{SESSIONS}/ue5").json()["revision"] == 2
    assert list(atsss._groups.assigned) == [("acc1", "acc2")]
    assert len(held(node)["dpp_atsss_tx"]) == 2, "the stale group emptied after all"


class ReleaseSeen:
    """A service's lock, that records what `seen()` returns each time it is released."""

    def __init__(self, lock, seen: Callable[[], Any]):
        self._lock, self._seen, self.released = lock, seen, []

    def __enter__(self) -> None:
        self._lock.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.released.append(self._seen())
        self._lock.__exit__(*exc)


def test_a_delete_tells_its_session_served_before_releasing_the_lock(atsss, node, tenant_a):
    """Another change's undo, once the lock is released, puts back the unserved sessions it found."""
    assert tenant_a.post(SESSIONS, json=body()).status_code == 201
    atsss.unserved["tenant-a/ue5"] = "paths.0.interface: gone"  # as a reconcile finding it gone tells it
    atsss._lock = lock = ReleaseSeen(atsss._lock, lambda: "tenant-a/ue5" in atsss.unserved)

    assert tenant_a.delete(f"{SESSIONS}/ue5").status_code == 204

    assert lock.released[-1] is False, "the session told unserved after the lock was released"
