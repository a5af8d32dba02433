"""The path slots the node gives ATSSS sessions (netapp.atsss.store.free_slots over atsss_free_slots,
store migration 13): a new session's first two the lowest free pair (2s - 1, 2s: netapp.atsss.
admission.paired_slots), the others the lowest free ones, those a delete or a shorter replace frees given again,
none given twice across a create/delete/replace mix, restarts (a store opened again, a new service)
and concurrent creates of two services over one store; the free slots of a store written before the
table are filled in from its held ones. The store only (no data plane): the slots are the store's."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from netapp.atsss.abi import MAX_PATHS
from netapp.atsss.models import AtsssSessionSpec
from netapp.atsss.schema import ATSSS_FREE_PAIRS, ATSSS_FREE_SLOTS
from netapp.atsss.service import Atsss
from netapp.atsss.store import FREE_PAIR, free_pair
from netapp.service.contract import DataplaneFull, Principal, Scope
from netapp.service.schema import MIGRATIONS, SCHEMA_VERSION
from netapp.service.store import Store
from tests.atsss.test_sessions import store_at_version

ADMIN = Principal("operator", frozenset({Scope.ADMIN}))


def spec(number: int, paths: int = 2) -> AtsssSessionSpec:
    """Session `number`'s definition: its own UE and subflows (`paths` of them)."""
    return AtsssSessionSpec.model_validate({
        "name": f"s{number}", "ue": f"10.60.{number >> 8}.{number & 255}", "mode": "round_robin",
        "paths": [{"access": "3GPP" if i == 0 else "non-3GPP", "local": "192.0.2.1",
                   "peer": f"198.51.{100 + i}.{number & 255}", "local_port": 5000 + (number >> 8), "peer_port": 6000,
                   "source_mac": "02:00:00:00:aa:01", "next_hop_mac": "02:00:00:00:bb:01"} for i in range(paths)]})


def held_slots(store: Store) -> list[int]:
    return [slot for (slot,) in store.execute("SELECT slot FROM atsss_path_slots ORDER BY slot")]


def free_rows(store: Store) -> set[int]:
    return {slot for (slot,) in store.execute("SELECT slot FROM atsss_free_slots")}


def assert_consistent(store: Store) -> None:
    """No slot held twice, and the free rows are the gaps below the highest slot held or freed."""
    held = held_slots(store)
    assert len(held) == len(set(held)), f"a slot given twice: {held}"
    free = free_rows(store)
    top = max([*held, *free], default=0)
    assert free == set(range(1, top + 1)) - set(held)


def test_a_deleted_session_s_slots_are_given_again_lowest_first(tmp_path):
    store = Store.open(tmp_path / "netapp.db")
    try:
        atsss = Atsss(store)
        assert [atsss.create_session(ADMIN, f"s{n}", spec(n)).slots for n in (1, 2, 3)] == [[1, 2], [3, 4], [5, 6]]
        atsss.delete_session(ADMIN, "s2")
        assert atsss.create_session(ADMIN, "s4", spec(4, paths=3)).slots == [3, 4, 7], "the freed ones, then a new one"
        atsss.put_session(ADMIN, "s1", spec(1, paths=1))  # slot 2 freed
        assert atsss.create_session(ADMIN, "s5", spec(5, paths=2)).slots == [9, 10], "no pair below is free"
        assert atsss.create_session(ADMIN, "s6", spec(6, paths=1)).slots == [11], "a pair's first"
        assert atsss.put_session(ADMIN, "s6", spec(6, paths=2))[0].slots == [11, 2], "a change: the lowest free"
        assert_consistent(store)
    finally:
        store.close()


def test_a_restarted_service_gives_the_freed_slots_again_and_never_a_held_one(tmp_path):
    store = Store.open(tmp_path / "netapp.db")
    atsss = Atsss(store)
    for n in range(1, 6):
        atsss.create_session(ADMIN, f"s{n}", spec(n))
    atsss.delete_session(ADMIN, "s2")
    atsss.delete_session(ADMIN, "s5")  # the highest: 9 and 10 free above the held ones
    store.close()
    store = Store.open(tmp_path / "netapp.db")
    try:
        atsss = Atsss(store)
        assert [atsss.create_session(ADMIN, f"s{n}", spec(n, paths=3)).slots for n in (6, 7)] == [[3, 4, 9], [11, 12, 10]]
        assert_consistent(store)
    finally:
        store.close()


def test_the_free_slots_of_a_store_written_before_migration_13_are_its_held_ones_gaps(tmp_path):
    assert MIGRATIONS[13] == ATSSS_FREE_SLOTS and SCHEMA_VERSION >= 14
    raw = store_at_version(tmp_path / "netapp.db", 13)
    raw.executemany("INSERT INTO atsss_path_slots (slot, tenant, name, position) VALUES (?, 'operator', ?, ?)",
                    [(slot, f"old{slot}", 0) for slot in (1, 2, 5, 6, 9)])  # rows alone: only their slots count
    raw.commit()
    raw.close()
    store = Store.open(tmp_path / "netapp.db")
    try:
        assert free_rows(store) == {3, 4, 7, 8}
        atsss = Atsss(store)
        assert [atsss.create_session(ADMIN, f"s{n}", spec(n)).slots for n in (1, 2, 3)] == [[3, 4], [7, 8], [11, 12]]
        assert_consistent(store)
    finally:
        store.close()


def test_an_empty_store_s_migration_frees_nothing_and_the_first_slot_is_1(tmp_path):
    store_at_version(tmp_path / "netapp.db", 13).close()
    store = Store.open(tmp_path / "netapp.db")
    try:
        assert free_rows(store) == set()
        assert Atsss(store).create_session(ADMIN, "s1", spec(1)).slots == [1, 2]
    finally:
        store.close()


def plan_of_free_pair(store: Store) -> list[str]:
    return [row[3] for row in store.execute(f"EXPLAIN QUERY PLAN {FREE_PAIR}", ("[]", 0))]


def test_a_free_pair_is_found_by_the_odd_rows_index_not_by_reading_the_even_rows(tmp_path):
    """One-path sessions leave even free rows that no pair starts at: free_pair reads none of them."""
    store = Store.open(tmp_path / "netapp.db")
    try:
        with store.transaction():
            store.executemany("INSERT INTO atsss_free_slots (slot) VALUES (?)", [(2 * n,) for n in range(1, 2000)])
            store.execute("INSERT INTO atsss_path_slots (slot, tenant, name, position) VALUES (4001, 'operator', 'x', 0)")
        plan = plan_of_free_pair(store)
        assert any("atsss_free_odd_slots" in step for step in plan if step.startswith("SCAN f")), plan
        assert "SCAN f" not in plan, "every free row read for the first odd one"
        assert free_pair(store) == 2002, "none of the even rows starts a pair: the first above the highest"
    finally:
        store.close()


def test_a_store_of_the_version_before_gets_the_odd_rows_index(tmp_path):
    assert MIGRATIONS[16] == ATSSS_FREE_PAIRS and SCHEMA_VERSION >= 17
    store_at_version(tmp_path / "netapp.db", 16).close()
    store = Store.open(tmp_path / "netapp.db")
    try:
        assert store.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'atsss_free_odd_slots'"
                             ).fetchone() is not None
        assert any("atsss_free_odd_slots" in step for step in plan_of_free_pair(store))
    finally:
        store.close()


def test_the_last_slots_are_given_and_then_the_node_is_full(tmp_path):
    store = Store.open(tmp_path / "netapp.db")
    try:
        with store.transaction():  # a path in the slot below the last two, and no free rows below it
            store.execute("INSERT INTO atsss_path_slots (slot, tenant, name, position) VALUES (?, 'operator', 'x', 0)",
                          (MAX_PATHS - 3,))
        atsss = Atsss(store)
        assert atsss.create_session(ADMIN, "s1", spec(1)).slots == [MAX_PATHS - 2, MAX_PATHS - 1]
        try:
            atsss.create_session(ADMIN, "s2", spec(2, paths=1))
        except DataplaneFull as full:
            assert full.field == "paths"
        else:
            raise AssertionError("slot MAX_PATHS given: the maps have none")
    finally:
        store.close()


# A step of the mix: ("create", paths), ("delete", which), ("resize", which, paths), ("restart",).
STEPS = st.one_of(
    st.tuples(st.just("create"), st.integers(1, 4)),
    st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("resize"), st.integers(0, 50), st.integers(1, 4)),
    st.tuples(st.just("restart")),
)


def paired_free(held: set[int], count: int) -> list[int]:
    """A new session's slots: the lowest pair 2s - 1, 2s of which no slot is held, then the lowest free."""
    first = next(slot for slot in range(1, MAX_PATHS, 2) if slot not in held and slot + 1 not in held)
    pair = [first, first + 1][:count]
    return pair + lowest_free(held | set(pair), count - len(pair))


def lowest_free(held: set[int], count: int) -> list[int]:
    found, slot = [], 1
    while len(found) < count:
        if slot not in held:
            found.append(slot)
        slot += 1
    return found


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEPS, min_size=1, max_size=30))
def test_a_create_delete_replace_mix_with_restarts_gives_a_pair_then_the_lowest_free_slots_and_none_twice(
        steps: list[Any]):
    with tempfile.TemporaryDirectory() as state:
        path = Path(state) / "netapp.db"
        store = Store.open(path, synchronous="NORMAL")
        try:
            atsss, sessions, number = Atsss(store), {}, 0  # sessions: name -> slots, as the model holds them
            for step in steps:
                held = {slot for slots in sessions.values() for slot in slots}
                if step[0] == "create":
                    number += 1
                    sessions[f"s{number}"] = atsss.create_session(ADMIN, f"s{number}", spec(number, step[1])).slots
                    assert sessions[f"s{number}"] == paired_free(held, step[1])
                elif step[0] in ("delete", "resize") and sessions:
                    name = sorted(sessions)[step[1] % len(sessions)]
                    if step[0] == "delete":
                        atsss.delete_session(ADMIN, name)
                        del sessions[name]
                    else:
                        kept = sessions[name][: step[2]]
                        slots = atsss.put_session(ADMIN, name, spec(int(name[1:]), step[2]))[0].slots
                        assert slots == kept + lowest_free(held, step[2] - len(kept)), "kept by position, then the lowest"
                        sessions[name] = slots
                elif step[0] == "restart":
                    store.close()
                    store = Store.open(path, synchronous="NORMAL")
                    atsss = Atsss(store)
                assert {session.name: session.slots for session in atsss.list_sessions(ADMIN)} == sessions
                assert_consistent(store)
        finally:
            store.close()


def test_concurrent_creates_and_deletes_of_two_services_over_one_store_never_share_a_slot(tmp_path):
    """Two services (as the API's per-request one beside the node's) in four threads: the store's
    transaction serialises them, and a slot is taken within it."""
    store = Store.open(tmp_path / "netapp.db")
    services = [Atsss(store), Atsss(store)]
    failures: list[BaseException] = []

    def churn(worker: int) -> None:
        try:
            atsss = services[worker % 2]
            for n in range(worker * 100, worker * 100 + 25):
                atsss.create_session(ADMIN, f"s{n}", spec(n, paths=1 + n % 3))
                if n % 3 == 0:
                    atsss.delete_session(ADMIN, f"s{n}")
        except BaseException as exc:  # told by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=churn, args=(worker,)) for worker in range(1, 5)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures, failures
        sessions = Atsss(store).list_sessions(ADMIN)
        assert len(sessions) == sum(n % 3 != 0 for worker in range(1, 5) for n in range(worker * 100, worker * 100 + 25))
        assert sorted(slot for session in sessions for slot in session.slots) == held_slots(store)
        assert_consistent(store)
    finally:
        store.close()
