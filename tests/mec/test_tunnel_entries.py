"""dpp_tunnels entries counted by the rules that name them (netapp.mec.tunnel_entries), in the kernel's
map: an entry goes at the end of the change that took out its last rule, so rules created and
deleted with ever new destinations never fill the map's 4,096 entries and no entry no rule names
stays behind a change; one shared by two rules stays while either is installed; a restart frees
what no rule names and keeps what one does; an entry is deleted only after its rule left the maps
and the kernel's readers were waited for, once per change however many go (the calls recorded by a
wrapper around the real adapter); a write into the full map frees first what a failed free left
(the failure injected by that wrapper: the kernel's wait does not fail on demand). A refused change
leaves none of the entries it wrote, freed after a wait before its error is raised: one whose rules
the maps refuse (the upsert's refusal injected by the wrapper), one whose second entry's id holds
another tunnel (a digest collision, written into the map by the test), a document refused before its
rules (its defaults' write refused by the wrapper).

Changes go the service's way (netapp.service.transaction): the delta's entries written, then the
delta applied by the facade (a refused one by the transaction's own RuleChange), on a real instance
(anonymous, or pinned for the restart).

Needs root and libdpp (tests/utils/kernel.py: skipped outside CI, a failure under CI)."""

from __future__ import annotations

import errno
from typing import Any, Iterator, Optional

import pytest

from netapp.dataplane.binding import load_libdpp
from netapp.dataplane.errors import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.handle import DppHandle
from netapp.intents.compiler import compile_document, rule_tunnels
from netapp.intents.index import RuleIndex
from netapp.intents.models import Intent, parse_document
from netapp.mec.tunnel_abi import MAX_TUNNELS
from netapp.mec.tunnels import TunnelEntry, tunnel_entry
from netapp.service.contract import DataplaneUnavailable, ServiceError
from netapp.service.transaction import RuleChange
from tests.utils.kernel import require_kernel
from tests.utils.maps import pinned_instance

CYCLES, PER_CHANGE = 80, 64  # 5,120 destinations, each named by one rule for one change


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
    dp.add_tunnels(rule_tunnels(delta.upserts).values())
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
    assert dp.map_size("dpp_tunnels") == MAX_TUNNELS < CYCLES * PER_CHANGE
    index = RuleIndex({})
    for n in range(CYCLES):  # each change installs PER_CHANGE new rules and takes out the last change's
        tracked = index.track()
        for k in range(PER_CHANGE):
            if n:
                tracked.remove(f"t{n - 1}-{k}")
            tracked.add(index.compile(tunnel_intent(f"t{n}-{k}", n * PER_CHANGE + k, port=5000 + k)))
        delta = tracked.delta()
        dp.add_tunnels(rule_tunnels(delta.upserts).values())
        dp.apply_changes(delta)
        installed = {entry_of(tunnel_intent("x", n * PER_CHANGE + k)).entry_id for k in range(PER_CHANGE)}
        assert held(dp) == installed, f"change {n}: only the installed rules' entries"
    assert dp.tunnel_entries.pending() == 0


def test_a_shared_entry_goes_with_the_last_rule_that_names_it(dp):
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
    """The real adapter, each call that the order of a write or a removal depends on recorded in
    `calls` (with the map's name for a table's); a call named in `refused` fails with that errno, as a
    refused syscall would (DataplaneError; a batch's with none of it done), before it is made (an
    empty batch makes no call: it is not refused)."""

    RECORDED = ("rules_upsert", "rules_delete", "shapes_publish", "config_set",
                "table_update", "table_wait_readers", "table_delete")

    def __init__(self, handle: DppHandle):
        self._handle = handle
        self.calls: list[tuple[str, Any]] = []
        self.refused: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._handle, name)
        if name not in self.RECORDED:
            return call

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args[0] if name.startswith("table_") and args else None))
            empty_batch = name.startswith("rules_") and not args[0]  # the handle makes no call
            if name in self.refused and not empty_batch:
                error = DataplaneError(self.refused[name], name)
                error.done = 0  # type: ignore[attr-defined]
                raise error
            return call(*args, **kwargs)

        return recorded


def waits(recording: Recording, since: int = 0) -> int:
    return [name for name, _ in recording.calls[since:]].count("table_wait_readers")


def test_an_entry_is_deleted_after_its_rule_left_the_maps_and_the_readers_were_waited_for():
    require_kernel()
    recording = Recording(DppHandle.open(load_libdpp()))
    with Dataplane(recording) as dp:
        index, intent = RuleIndex({}), tunnel_intent("t", 1)
        change(dp, index, add=intent)
        assert waits(recording) == 0, "a change that removes no reference waits for nothing"
        recording.calls.clear()
        change(dp, index, remove="t")
        names = [name for name, _ in recording.calls]
        assert names[-2:] == ["table_wait_readers", "table_delete"], recording.calls
        assert recording.calls[-1][1] == "dpp_tunnels"
        assert "rules_delete" in names[:-2] and "shapes_publish" in names[:-2], recording.calls
        assert held(dp) == set()


def test_no_entry_no_rule_names_remains_after_a_change_and_one_wait_frees_them_all():
    require_kernel()
    recording = Recording(DppHandle.open(load_libdpp()))
    with Dataplane(recording) as dp:
        index = RuleIndex({})
        for n in range(10):
            change(dp, index, add=tunnel_intent(f"u{n}", 100 + n, port=5000 + n))
        kept = tunnel_intent("kept", 200, port=6000)
        change(dp, index, add=kept)
        tracked, before = index.track(), len(recording.calls)
        for n in range(10):
            tracked.remove(f"u{n}")
        dp.apply_changes(tracked.delta())  # one change takes out ten rules, each the last of its entry
        assert held(dp) == {entry_of(kept).entry_id} and dp.tunnel_entries.pending() == 0
        assert waits(recording, before) == 1, "one wait for the change, not one per entry"


def test_a_write_into_the_full_map_frees_what_a_failed_free_left_and_then_writes():
    require_kernel()
    recording = Recording(DppHandle.open(load_libdpp()))
    with Dataplane(recording) as dp:
        index = RuleIndex({})
        kept = tunnel_intent("kept", 0, port=6000)
        change(dp, index, add=kept)
        for n in range(1, MAX_TUNNELS):  # written for changes that never came
            dp.add_tunnel(entry_of(tunnel_intent(f"t{n}", n)))
        recording.refused["table_wait_readers"] = errno.EINTR
        dp.tunnel_entries.free()  # the end of a change whose free fails: they stay, unnamed
        assert len(held(dp)) == MAX_TUNNELS == dp.tunnel_entries.pending() + 1, "full, one entry named"
        del recording.refused["table_wait_readers"]

        last = tunnel_intent("last", MAX_TUNNELS)
        change(dp, index, add=last)

        assert held(dp) == {entry_of(kept).entry_id, entry_of(last).entry_id}
        assert dp.tunnel_entries.pending() == 0


# --- a refused change: the entries written for it go before its error is raised ------------------


def refused_change(dp: Dataplane, index: RuleIndex, intents: list[Intent]) -> ServiceError:
    """A change adding `intents` made by the service's own code (netapp.service.transaction.RuleChange:
    the entries, then the rules) that the data plane refuses; its error, the index rolled back as the
    transaction does. The maps are as before: nothing was left to undo, or to reconcile."""
    stale: list[str] = []
    made = RuleChange(index.track(), dp, reject=lambda *_: None, on_stale=stale.append, on_commit=lambda: None)
    for intent in intents:
        made.add(index.compile(intent))
    with pytest.raises(ServiceError) as refused:
        made.apply_to_maps()
    made.roll_back()
    assert stale == []
    return refused.value


def freed_after_a_wait(recording: Recording, since: int) -> bool:
    """Whether an entry of dpp_tunnels was written since `since` and the last calls are the wait for
    the kernel's readers, then the deletion from dpp_tunnels."""
    calls = recording.calls[since:]
    return ("table_update", "dpp_tunnels") in calls and calls[-2:] == [("table_wait_readers", None),
                                                                       ("table_delete", "dpp_tunnels")]


@pytest.fixture
def recorded() -> Iterator[tuple[Dataplane, Recording, RuleIndex, int]]:
    """An instance over the recording adapter holding one tunnel rule, and that rule's entry."""
    require_kernel()
    recording = Recording(DppHandle.open(load_libdpp()))
    with Dataplane(recording) as dp:
        index, kept = RuleIndex({}), tunnel_intent("kept", 0, port=6000)
        change(dp, index, add=kept)
        yield dp, recording, index, entry_of(kept).entry_id


def test_a_change_whose_rules_the_maps_refuse_leaves_no_entry_it_wrote(recorded):
    dp, recording, index, kept = recorded
    refused, since = [tunnel_intent("a", 1, port=5000), tunnel_intent("b", 2, port=5001)], len(recording.calls)
    recording.refused["rules_upsert"] = errno.ENOMEM
    error = refused_change(dp, index, refused)
    assert isinstance(error, DataplaneUnavailable) and "rules_upsert" in str(error)
    assert held(dp) == {kept} and dp.tunnel_entries.pending() == 0, "the refused change's entries are gone"
    assert freed_after_a_wait(recording, since), recording.calls[since:]


def test_a_change_one_of_whose_entries_is_refused_leaves_none_it_wrote(recorded):
    dp, recording, index, kept = recorded
    first, second = tunnel_intent("a", 1, port=5000), tunnel_intent("b", 2, port=5001)
    # Another tunnel under the id of the second's entry, as two tunnels with one digest would be.
    squatter = entry_of(second).entry_id
    dp.table("dpp_tunnels").update([(squatter, entry_of(tunnel_intent("x", 3)).value())])
    since = len(recording.calls)
    error = refused_change(dp, index, [first, second])
    assert isinstance(error, DataplaneUnavailable) and "holds another tunnel" in str(error)
    assert held(dp) == {kept, squatter} and dp.tunnel_entries.pending() == 0, "the first entry is gone"
    assert freed_after_a_wait(recording, since), recording.calls[since:]


def test_a_document_refused_before_its_rules_leaves_no_entry_it_wrote(recorded):
    dp, recording, index, kept = recorded
    document = {"intents": [tunnel_intent("a", 1, port=5000).model_dump(mode="json", exclude_none=True)]}
    since = len(recording.calls)
    recording.refused["config_set"] = errno.EPERM  # the site's defaults, written after the entries
    with pytest.raises(DataplaneError, match="config_set"):
        dp.apply_compiled(compile_document(parse_document(document), {}))
    assert held(dp) == {kept} and dp.tunnel_entries.pending() == 0
    assert freed_after_a_wait(recording, since), recording.calls[since:]
