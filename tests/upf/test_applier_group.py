"""The pairs of a transaction in one write per table (BpfApplier.apply_group, used by the UPF's
transactions, netapp.upf.held.SessionChange): the maps as applying each pair in turn leaves them;
pairs that touch one entry or URR slot are applied in turn; a group refused half-way is undone whole."""

from __future__ import annotations

from collections import Counter

import pytest

from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.upf.abi import Output, Role
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.compiler import Site
from netapp.upf.held import SessionChange
from netapp.upf.models import RuleError, Session
from tests.upf.test_applier import CrampedDpp, _maps, _other
from tests.upf.test_datapath import N3_IP, TEID, session


class CountingDpp(FakeDpp):
    """A fake that counts its batch writes, by table."""

    def __init__(self, **kwargs) -> None:  # noqa: ANN003
        super().__init__(**kwargs)
        self.writes: Counter[str] = Counter()

    def table_update(self, name, keys, values, flags=0):  # noqa: ANN001, ANN201
        self.writes[name] += 1
        super().table_update(name, keys, values, flags)

    def table_delete(self, name, keys):  # noqa: ANN001, ANN201
        self.writes[name] += 1
        super().table_delete(name, keys)


def _applier(fake: FakeDpp) -> BpfApplier:
    site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP, output=Output.PASS)
    return BpfApplier(Dataplane(fake).table, site, iface_entries({5: (Role.N3, 0), 6: (Role.N6, 1)}, N3_IP, None))


def _with_slot(session: Session, slot: int) -> Session:
    return session.model_copy(update={"urr_slots": {1: slot}})


def _group() -> tuple[list[Session], list[tuple]]:
    """Sessions in the maps before, and a group: two established, one deleted, one modified."""
    held = [_with_slot(session(seid=1), 1), _with_slot(_other(2, TEID + 1, "10.45.0.3", "2001:db8:2::3"), 2)]
    moved = _other(2, TEID + 1, "10.45.0.4", "2001:db8:2::4")
    pairs = [(None, _with_slot(_other(3, TEID + 2, "10.45.0.5", "2001:db8:2::5"), 3)), (held[0], None),
             (held[1], _with_slot(moved, 2)), (None, _with_slot(_other(4, TEID + 3, "10.45.0.6", "2001:db8:2::6"), 4))]
    return held, pairs


def test_a_group_leaves_the_maps_as_its_pairs_in_turn_in_one_batch_per_table():
    (grouped, one_by_one), appliers = (CountingDpp(), CountingDpp()), []
    held, pairs = _group()
    for fake in (grouped, one_by_one):
        appliers.append(_applier(fake))
        for each in held:
            appliers[-1].apply(None, each)
        fake.writes.clear()
    assert appliers[0].apply_group(pairs) is True
    for old, new in pairs:
        appliers[1].apply(old, new)
    assert _maps(grouped) == _maps(one_by_one)
    assert grouped.tables["dpp_upf_usage"] == one_by_one.tables["dpp_upf_usage"]
    finals = [{urr: bytes(counts) for urr, counts in applier.final_usage(1).items()} for applier in appliers]
    assert finals[0] == finals[1] and list(finals[0]) == [1]  # the deleted session's URR
    # a write and a delete per table (usage: zeroed when given, and when freed); dpp_upf_dl4's ways
    # staged, published and retired (netapp.upf.ways)
    assert grouped.writes.pop("dpp_upf_dl4") == 3
    assert max(grouped.writes.values()) == 2 and sum(grouped.writes.values()) < sum(one_by_one.writes.values())


@pytest.mark.parametrize("overlap", ["one session twice", "a TEID freed and taken", "a URR slot freed and given"])
def test_pairs_that_meet_are_not_grouped_and_nothing_is_written(overlap):
    fake = CountingDpp()
    applier = _applier(fake)
    first = _with_slot(session(seid=1), 1)
    applier.apply(None, first)
    fake.writes.clear()
    later = {
        "one session twice": (first, _with_slot(_other(1, TEID, "10.45.0.9", "2001:db8:2::9"), 1)),
        "a TEID freed and taken": (None, _with_slot(_other(2, TEID, "10.45.0.9", "2001:db8:2::9"), 2)),
        "a URR slot freed and given": (None, _with_slot(_other(2, TEID + 1, "10.45.0.9", "2001:db8:2::9"), 1)),
    }[overlap]
    assert applier.apply_group([(first, None), later]) is False
    assert not fake.writes


@pytest.mark.parametrize("shared", ["a TEID", "a UE address"])
def test_sessions_established_together_with_one_entry_are_not_grouped(shared):
    """Two new sessions holding one key of a table (none held before): their joined table is
    shorter than theirs together."""
    fake = CountingDpp()
    applier = _applier(fake)
    fake.writes.clear()  # the interfaces, written at start
    one = _with_slot(session(seid=1), 1)
    two = _with_slot({"a TEID": _other(2, TEID, "10.45.0.9", "2001:db8:2::9"),
                      "a UE address": _other(2, TEID + 1, one.pdrs[2].pdi.ue_ip.ipv4, "2001:db8:2::9")}[shared], 2)
    assert applier.apply_group([(None, one), (None, two)]) is False
    assert not fake.writes


@pytest.mark.parametrize("meeting", [False, True])
def test_the_transaction_groups_its_pairs_unless_they_meet_and_undoes_them(meeting):
    held, pairs = _group()
    if meeting:
        pairs.append((pairs[0][1], None))  # a session established and deleted: applied in turn
    fake, in_turn = CountingDpp(), CountingDpp()
    applier, reference = _applier(fake), _applier(in_turn)
    for each in held:
        applier.apply(None, each)
        reference.apply(None, each)
    before = _maps(fake)
    fake.writes.clear()
    change = SessionChange(applier)
    change.add(pairs, lambda: None)
    change.apply_to_maps()
    for old, new in pairs:
        reference.apply(old, new)
    assert _maps(fake) == _maps(in_turn)
    assert (fake.writes.pop("dpp_upf_dl4") > 3 or max(fake.writes.values()) > 2) == meeting
    change.roll_back()  # every pair undone
    assert _maps(fake) == before


def test_a_group_refused_half_way_is_undone_whole():
    fake = CrampedDpp()  # room for one more downlink entry: the group's first session fits, its second does not
    applier = _applier(fake)
    applier.apply(None, _with_slot(session(seid=1), 1))
    before = _maps(fake)
    change = SessionChange(applier)
    change.add([(None, _with_slot(_other(2, TEID + 1, "10.45.0.3", "2001:db8:2::3"), 2)),
                (None, _with_slot(_other(3, TEID + 2, "10.45.0.4", "2001:db8:2::4"), 3))], lambda: None)
    with pytest.raises(RuleError):
        change.apply_to_maps()
    assert _maps(fake) == before
