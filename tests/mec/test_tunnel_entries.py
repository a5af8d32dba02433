"""dpp_tunnels entries counted by the rules that name them (netapp.mec.tunnel_entries), in the kernel's
map: an entry goes after its last rule (in batches), so rules created and deleted with ever new
destinations never fill the map's 4,096 entries; one shared by two rules stays while either is
installed; a restart frees what no rule names and keeps what one does; a write into the full map
frees what no rule names first; an entry is deleted only after its rule left the maps and the
kernel's readers were waited for (the calls recorded by a wrapper around the real adapter).

Changes go the service's way (netapp.service.transaction): the delta's entries written, then the
delta applied by the facade, on a real instance (anonymous, or pinned for the restart).

Needs root and libdpp (tests/utils/kernel.py: skipped outside CI, a failure under CI)."""

from __future__ import annotations

from typing import Any, Iterator, Optional

import pytest

from netapp.dataplane.binding import load_libdpp
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.handle import DppHandle
from netapp.intents.compiler import rule_tunnels
from netapp.intents.index import RuleIndex
from netapp.intents.models import Intent
from netapp.mec.tunnel_abi import MAX_TUNNELS
from netapp.mec.tunnel_entries import FREE_BATCH
from netapp.mec.tunnels import TunnelEntry, tunnel_entry
from tests.utils.kernel import require_kernel
from tests.utils.maps import pinned_instance

CYCLES = 5_000


def tunnel_intent(intent_id: str, n: int, port: int = 5000) -> Intent:
    """Re-tunnel UDP to `port` into GTP-U to the n-th peer (10.0.0.0/8, a new one for each n)."""
    peer = f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"
    return Intent.model_validate({"id": intent_id, "match": {"protocol": "udp", "dst_port": port},
                                  "action": {"type": "tunnel", "encapsulate": {"peer": peer}}})


def entry_of(intent: Intent) -> TunnelEntry:
    return tunnel_entry(intent.action, {})  # type: ignore[arg-type]


def change(dp: Dataplane, index: RuleIndex, add: Optional[Intent] = None, remove: Optional[str] = None) -> None:
    """One change as the service's transaction makes it: the entries first, then the rules."""
    tracked = index.track()
    if remove is not None:
        tracked.remove(remove)
    if add is not None:
        tracked.add(index.compile(add))
    delta = tracked.delta()
    for entry in rule_tunnels(delta.upserts).values():
        dp.add_tunnel(entry)
    dp.apply_changes(delta)


def held(dp: Dataplane) -> set[int]:
    """The ids dpp_tunnels holds, read from the kernel's map."""
    return {int(key) for key, _ in dp.table("dpp_tunnels").items()}


@pytest.fixture
def dp() -> Iterator[Dataplane]:
    require_kernel()
    with Dataplane.open() as opened:
        yield opened


def test_rules_with_ever_new_destinations_never_fill_the_map(dp):
    assert dp.map_size("dpp_tunnels") == MAX_TUNNELS < CYCLES
    index = RuleIndex({})
    for n in range(CYCLES):
        intent = tunnel_intent(f"t{n}", n)
        change(dp, index, add=intent)
        if n % 1000 == 0:
            stale = held(dp) - {entry_of(intent).entry_id}
            assert len(stale) == dp.tunnel_entries.pending() < FREE_BATCH, f"cycle {n}: a batch at most waits"
        change(dp, index, remove=f"t{n}")
    assert len(held(dp)) == dp.tunnel_entries.pending() < FREE_BATCH


def test_a_shared_entry_goes_with_the_last_rule_that_names_it(dp):
    dp.tunnel_entries.batch = 1  # each entry freed at the end of the change that left it unnamed
    index = RuleIndex({})
    first, second = tunnel_intent("a", 7, port=5000), tunnel_intent("b", 7, port=5001)
    shared = entry_of(first).entry_id
    change(dp, index, add=first)
    change(dp, index, add=second)
    assert held(dp) == {shared} and dp.tunnel_entries.references(shared) == 2
    change(dp, index, remove="a")
    assert held(dp) == {shared}, "b still names it"
    moved = tunnel_intent("b", 8, port=5001)  # b's destination changes: its old entry had no other rule
    change(dp, index, remove="b", add=moved)
    assert held(dp) == {entry_of(moved).entry_id}
    change(dp, index, remove="b")
    assert held(dp) == set()


def test_a_restart_frees_the_entries_no_rule_names_and_keeps_the_others():
    require_kernel()
    kept, stale = tunnel_intent("kept", 1), tunnel_intent("stale", 2, port=5001)
    with pinned_instance("tunref") as instance:
        with Dataplane.open(instance=instance) as first:
            change(first, RuleIndex({}), add=kept)
            first.add_tunnel(entry_of(stale))  # written for a change that never came
        with Dataplane.open(instance=instance) as again:
            assert held(again) == {entry_of(kept).entry_id, entry_of(stale).entry_id}
            index = RuleIndex({})
            index.add(index.compile(kept))
            again.apply(index.ruleset())  # the start's reconcile
            assert held(again) == {entry_of(kept).entry_id}
            assert again.tunnel_entries.references(entry_of(kept).entry_id) == 1


class Recording:
    """The real adapter, each call that the order of a removal depends on recorded in `calls`."""

    RECORDED = ("rules_delete", "shapes_publish", "table_wait_readers", "table_delete")

    def __init__(self, handle: DppHandle):
        self._handle = handle
        self.calls: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._handle, name)
        if name not in self.RECORDED:
            return call

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args[0] if name == "table_delete" else None))
            return call(*args, **kwargs)

        return recorded


def test_an_entry_is_deleted_after_its_rule_left_the_maps_and_the_readers_were_waited_for():
    require_kernel()
    recording = Recording(DppHandle.open(load_libdpp()))
    with Dataplane(recording) as dp:
        dp.tunnel_entries.batch = 1
        index, intent = RuleIndex({}), tunnel_intent("t", 1)
        change(dp, index, add=intent)
        recording.calls.clear()
        change(dp, index, remove="t")
        names = [name for name, _ in recording.calls]
        assert names[-2:] == ["table_wait_readers", "table_delete"], recording.calls
        assert recording.calls[-1][1] == "dpp_tunnels"
        assert "rules_delete" in names[:-2] and "shapes_publish" in names[:-2], recording.calls
        assert held(dp) == set()

        for n in range(FREE_BATCH - 1):  # with the default batch, unnamed entries gather, unwaited
            dp.tunnel_entries.batch = FREE_BATCH
            change(dp, index, add=tunnel_intent(f"u{n}", 100 + n))
            change(dp, index, remove=f"u{n}")
        assert ("table_wait_readers", None) not in recording.calls[len(names):]
        assert len(held(dp)) == FREE_BATCH - 1
        change(dp, index, add=tunnel_intent("last", 999))
        change(dp, index, remove="last")  # the batch is full: one wait, then all of them go
        assert held(dp) == set()
        assert [name for name, _ in recording.calls[len(names):]].count("table_wait_readers") == 1


def test_a_write_into_the_full_map_frees_the_entries_no_rule_names_and_then_writes(dp):
    dp.tunnel_entries.batch = MAX_TUNNELS + 1  # no batch ever fills: only the full map's refusal frees
    index = RuleIndex({})
    kept = tunnel_intent("kept", 0, port=6000)
    change(dp, index, add=kept)
    for n in range(1, MAX_TUNNELS):
        change(dp, index, add=tunnel_intent(f"t{n}", n))
        change(dp, index, remove=f"t{n}")
    assert len(held(dp)) == MAX_TUNNELS, "full: one entry named, the others by no rule"

    last = tunnel_intent("last", MAX_TUNNELS)
    change(dp, index, add=last)

    assert held(dp) == {entry_of(kept).entry_id, entry_of(last).entry_id}
    assert dp.tunnel_entries.pending() == 0
