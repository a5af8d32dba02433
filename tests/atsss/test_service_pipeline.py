"""ATSSS's service over the NetApp's pinned pipeline (libdpp, dpp.bpf.o, whose ATSSS maps are
created and pinned with it): what a session put through the service becomes in the kernel's maps,
read through a second handle on the pinned instance (another process's view) and compared with
entries built here from the ABI's field layout (tests/atsss/atsss.py); a session keeps the numbers
the data path advanced, changed or not (its words stored in place); a restart of the control plane
reconciles without rewriting (the index read back, its ways kept); the kernel refusing a session (its
bucket of the index full, and the hash) leaves the maps and the
store as they were; a path naming an interface gets its MAC addresses from the node's namespace
(a veth and a neighbour entry there)."""

from __future__ import annotations

from ctypes import c_uint32
from dataclasses import replace
from ipaddress import ip_address
from pathlib import Path as FilePath
from typing import Iterator

import pytest

from netapp.atsss.abi import INDEX4_WAYS, MAX_SESSIONS, Access, Mode, Path, PathFlags, Session, SessionKey
from netapp.atsss.index import SessionIndex, bucket_of
from netapp.atsss.models import AtsssSessionPatch, AtsssSessionSpec
from netapp.atsss.service import Atsss
from netapp.atsss.table import AtsssMaps
from netapp.dataplane.facade import Dataplane
from netapp.service.contract import DataplaneUnavailable, InvalidInput, Principal, Scope
from netapp.service.store import Store
from netapp.testbed.netns import run
from tests.atsss.atsss import PathSpec, path_body, path_value, session_key
from tests.utils.kernel import require_kernel, veth_namespace
from tests.utils.maps import pinned_instance

ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
UE = "10.60.0.7"
CELL = PathSpec("192.0.2.1", "198.51.100.7", 5001, 5002, Access.THREE_GPP,
                bytes.fromhex("02000000aa01"), bytes.fromhex("02000000bb01"))
WIFI = PathSpec("192.0.2.2", "203.0.113.7", 5003, 5004, Access.NON_THREE_GPP,
                bytes.fromhex("02000000aa02"), bytes.fromhex("02000000bb02"))


def session(name: str = "ue7", ue: str = UE, mode: str = "weighted", weights: tuple[int, int] = (3, 1)) -> AtsssSessionSpec:
    """UE's session over CELL and WIFI; another UE's over the same accesses, its own ports (a subflow is one session's)."""
    step = (int(ip_address(ue)) - int(ip_address(UE))) % 30000
    return AtsssSessionSpec.model_validate({
        "name": name, "ue": ue, "mode": mode,
        "paths": [path_body(CELL, weight=weights[0], peer_port=CELL.dport + 2 * step),
                  path_body(WIFI, weight=weights[1], peer_port=WIFI.dport + 2 * step)]})  # fmt: skip


@pytest.fixture
def instance() -> Iterator[str]:
    require_kernel()
    with pinned_instance("atsss") as name:
        node = Dataplane.open(instance=name)  # loads the pipeline and pins it
        try:
            yield name
        finally:
            node.close()


@pytest.fixture
def kernel(instance) -> Iterator[Dataplane]:
    """Another process's view of the pinned maps."""
    view = Dataplane.open(instance=instance)
    try:
        yield view
    finally:
        view.close()


def start(store: Store, instance: str) -> tuple[Atsss, Dataplane]:
    node = Dataplane.open(instance=instance)
    return Atsss.start(store, node.table), node


def held_session(kernel: Dataplane, ue: str = UE) -> Session:
    """The UE's session where the data path finds it (the index, read whole as a new process would)."""
    value = SessionIndex(kernel.table).get(session_key(ue))
    assert value is not None, f"no session of {ue} in the kernel"
    return value


def held_slot(kernel: Dataplane, ue: str = UE) -> int:
    """The slot of dpp_atsss_slots the index leads the UE's packets to."""
    slot = SessionIndex(kernel.table).slot(session_key(ue))
    assert slot, f"{ue}'s session is not in the index"
    return slot


def same_bucket(ue: str, count: int) -> list[str]:
    """`count` other addresses of UE's /16 whose bucket of the index is UE's."""
    bucket, first = bucket_of(session_key(ue)), int(ip_address(ue)) & ~0xFFFF
    others = (str(ip_address(first + n)) for n in range(1, 0xFFFF))
    return [other for other in others if other != ue and bucket_of(session_key(other)) == bucket][:count]


def held_path(kernel: Dataplane, slot: int) -> Path:
    value = kernel.table("dpp_atsss_paths").get(c_uint32(slot))
    assert value is not None
    return value


def test_the_pipeline_pins_atsss_maps_though_its_program_does_not_use_them(instance, kernel):
    pins = FilePath("/sys/fs/bpf/dpp") / instance / "maps"
    assert {"dpp_atsss_sessions", "dpp_atsss_paths", "dpp_atsss_path_stats"} <= {p.name for p in pins.iterdir()}
    assert kernel.table("dpp_atsss_sessions").max_entries == MAX_SESSIONS


def test_a_session_put_through_the_service_is_in_the_pinned_maps_as_the_abi_lays_it_out(instance, store, kernel):
    atsss, node = start(store, instance)
    try:
        stored = atsss.create_session(ADMIN, "ue7", session())
    finally:
        node.close()
    value = held_session(kernel)
    assert (value.mode, value.n_paths, list(value.weight[:2]), list(value.path[:2])) == (Mode.WEIGHTED, 2, [3, 1],
                                                                                          stored.slots)
    assert value.mp_seq == 0 and list(value.current) == [0] * 4
    for slot, spec in zip(stored.slots, (CELL, WIFI)):
        assert bytes(held_path(kernel, slot)) == bytes(path_value(spec)), f"slot {slot}"
    assert len(set(stored.slots)) == 2 and 0 not in stored.slots


def advance(kernel: Dataplane, slot: int, mp_seq: int, dccp_seq: int) -> None:
    """What the data path's packets do to the numbers: the session's MP_SEQ and a path's DCCP sequence,
    and to the path's counters of what it sent (dccp_seq packets of 100 bytes)."""
    value = held_session(kernel)
    value.mp_seq = mp_seq
    kernel.table("dpp_atsss_slots").update([(c_uint32(held_slot(kernel)), value)])
    path = held_path(kernel, slot)
    path.dccp_seq, path.packets, path.bytes = dccp_seq, dccp_seq, 100 * dccp_seq
    kernel.table("dpp_atsss_paths").update([(c_uint32(slot), path)])


def test_unchanged_sessions_keep_their_numbers_and_changed_ones_carry_them_on(instance, store, kernel):
    atsss, node = start(store, instance)
    try:
        slots = atsss.create_session(ADMIN, "ue7", session()).slots
        advance(kernel, slots[0], mp_seq=1000, dccp_seq=77)
        atsss.put_session(ADMIN, "ue7", session())  # the same again
        atsss.create_session(ADMIN, "other", session("other", ue="10.60.0.8"))
        assert held_session(kernel).mp_seq == 1000 and held_path(kernel, slots[0]).dccp_seq == 77

        atsss.patch_session(ADMIN, "ue7", AtsssSessionPatch.model_validate({"paths": [{"index": 0, "up": False,
                                                                                        "rtt_us": 2500}]}))
        path = held_path(kernel, slots[0])
        assert (path.flags & PathFlags.UP, path.rtt_us, path.dccp_seq) == (0, 2500, 77)
        assert (path.packets, path.bytes) == (77, 7700), "what the path sent goes on with it"
        assert held_session(kernel).mp_seq == 1000, "the session itself did not change"

        atsss.patch_session(ADMIN, "ue7", AtsssSessionPatch.model_validate({"paths": [{"index": 1, "weight": 5}]}))
        value = held_session(kernel)
        assert (list(value.weight[:2]), value.mp_seq) == ([3, 5], 1000)
    finally:
        node.close()


def test_a_restart_reconciles_without_rewriting_and_a_delete_empties_the_slots(instance, store, kernel, tmp_path):
    atsss, node = start(store, instance)
    try:
        slots = atsss.create_session(ADMIN, "ue7", session()).slots
    finally:
        node.close()
    advance(kernel, slots[1], mp_seq=42, dccp_seq=9)
    indexed = held_slot(kernel)
    again = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")  # a new control plane, the maps pinned
    atsss, node = start(again, instance)
    try:
        assert held_session(kernel).mp_seq == 42 and held_path(kernel, slots[1]).dccp_seq == 9
        assert held_slot(kernel) == indexed, "the index read back, its way and slot kept"
        atsss.delete_session(ADMIN, "ue7")
        assert SessionIndex(kernel.table).get(session_key(UE)) is None
        assert all(bytes(held_path(kernel, slot)) == bytes(Path()) for slot in slots)
    finally:
        node.close()
        again.close()


def test_the_kernel_refusing_a_session_leaves_the_maps_and_the_store_as_they_were(instance, store, kernel,
                                                                                  slots_given_again):
    atsss, node = start(store, instance)
    late = "10.60.0.9"
    neighbours = same_bucket(late, INDEX4_WAYS)
    try:
        kept = atsss.create_session(ADMIN, "ue7", session())
        for n, ue in enumerate(neighbours):  # late's bucket of the index full: late goes to the hash
            atsss.create_session(ADMIN, f"n{n}", session(f"n{n}", ue=ue, mode="round_robin"))
        table = kernel.table("dpp_atsss_sessions")
        # the hash full: the kernel says E2BIG. Addresses of one IPv6 bucket (their words xor alike): the
        # index read again after the refusal moves the first of them into that bucket's ways (index.py, 5.)
        filler = [SessionKey(family=6, addr=(0x20010db8, 0, n, n)) for n in range(MAX_SESSIONS)]
        table.update([(key, Session()) for key in filler])
        before = {slot: bytes(held_path(kernel, slot)) for slot in range(1, 20)}
        with pytest.raises(DataplaneUnavailable):
            atsss.create_session(ADMIN, "late", session("late", ue=late))
        assert {slot: bytes(held_path(kernel, slot)) for slot in range(1, 20)} == before, "its paths emptied again"
        assert sorted(s.name for s in atsss.list_sessions(ADMIN)) == [*(f"n{n}" for n in range(INDEX4_WAYS)), "ue7"]
        assert held_session(kernel).path[:2] == kept.slots
        SessionIndex(kernel.table).delete(filler)  # from the hash, or the ways they were moved into
        for n in range(INDEX4_WAYS):
            atsss.delete_session(ADMIN, f"n{n}")
        assert atsss.create_session(ADMIN, "late", session("late", ue=late)).slots == [3, 4]
    finally:
        node.close()


def test_a_path_naming_an_interface_gets_its_macs_from_the_nodes_namespace(instance, store, kernel):
    with veth_namespace("atsss", "acc0", "acc1") as netns:
        run(["ip", "-n", netns, "link", "set", "acc0", "address", "02:00:00:00:cc:01"])
        run(["ip", "-n", netns, "neigh", "add", CELL.peer, "lladdr", "02:00:00:00:dd:01", "dev", "acc0",
             "nud", "permanent"])
        node = Dataplane.open(instance=instance)
        try:
            atsss = Atsss(store, AtsssMaps(node.table), netns=netns)
            cell = path_body(CELL, source_mac=None, next_hop_mac=None, interface="acc0")
            unknown = path_body(WIFI, next_hop_mac=None, interface="acc0")  # no neighbour entry of its peer
            with pytest.raises(InvalidInput) as refused:
                atsss.create_session(ADMIN, "ue7", AtsssSessionSpec.model_validate(
                    {"name": "ue7", "ue": UE, "mode": "round_robin", "paths": [cell, unknown]}))
            assert refused.value.field == "paths[1].interface" and WIFI.peer in refused.value.detail
            assert atsss.list_sessions(ADMIN) == []
            [slot] = atsss.create_session(ADMIN, "ue7", AtsssSessionSpec.model_validate(
                {"name": "ue7", "ue": UE, "mode": "round_robin", "paths": [cell]})).slots
        finally:
            node.close()
        expected = path_value(replace(CELL, smac=bytes.fromhex("02000000cc01"), dmac=bytes.fromhex("02000000dd01")))
        assert bytes(held_path(kernel, slot)) == bytes(expected)
