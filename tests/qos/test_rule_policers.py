"""The rules' policers as the facade writes them (netapp.qos.rules over FakeDpp's tables, recording
the writes; the kernel's side is tests/qos/test_intent_police.py): ids of the rules' half only, the
policer and the slot's ids before the rule, an intent's own policer emptied when it goes, a slice's
kept while one of its rules remains, and everything put back when the rules cannot be written."""

from __future__ import annotations

import pytest

from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.intents.compiler import SharedPolice
from netapp.intents.index import RuleIndex
from netapp.intents.models import parse_intent
from netapp.qos.abi import Algo
from netapp.qos.ids import rule_ids, upf_ids
from netapp.qos.slices import with_slice_police
from netapp.qos.spec import PolicerSpec
from tests.utils.fakes import RecordingDpp

SLICE = SharedPolice("slice alice/gold", PolicerSpec(rate=10**7, burst=12_500, algo=Algo.SLIDING_WINDOW))


def rule(index: RuleIndex, name: str, port: int, rate: int | None = None, sliced: bool = False):
    action = {"type": "pass", **({"police": {"rate_bps": rate}} if rate else {})}
    intent = parse_intent({"id": name, "match": {"protocol": "udp", "dst_port": port}, "action": action})
    return with_slice_police(index.compile(intent, f"alice/{name}"), SLICE if sliced else None)


def live(fake: RecordingDpp) -> dict[int, tuple[int, int]]:
    """The policers in use, by id: (rate, algorithm)."""
    return {policer_id: (value.rate, value.algo) for policer_id, value in fake.entries("dpp_policers").items()
            if value.algo != Algo.NONE}


def step(dp: Dataplane, index: RuleIndex, add=(), remove=()) -> None:
    change = index.track()
    for rule_id in remove:
        change.remove(rule_id)
    for each in add:
        change.add(each)
    dp.apply_changes(change.delta())


def test_policers_come_with_their_rules_and_go_when_no_rule_names_them():
    fake = RecordingDpp()
    dp, index = Dataplane(fake), RuleIndex({})
    step(dp, index, add=[rule(index, "capped", 1000, rate=10**6), rule(index, "a", 2000, sliced=True),
                         rule(index, "b", 3000, sliced=True), rule(index, "plain", 4000)])
    own, shared = dp.rule_policers.of_rule("alice/capped")[0], dp.rule_policers.of_rule("alice/a")[1]
    assert live(fake) == {own: (10**6, Algo.TOKEN_BUCKET), shared: (10**7, Algo.SLIDING_WINDOW)}
    assert own in rule_ids(65536) and shared in rule_ids(65536) and own not in upf_ids(65536)
    assert dp.rule_policers.of_rule("alice/b") == (0, shared) and dp.rule_policers.of_rule("alice/plain") == (0, 0)
    slots = dp.installed_intents
    names = {slot: (value.policer, value.shared) for slot, value in fake.entries("dpp_rule_policers").items()}
    assert names == {slots["alice/capped"]: (own, 0), slots["alice/a"]: (0, shared), slots["alice/b"]: (0, shared)}

    step(dp, index, remove=["alice/capped", "alice/a"])
    assert live(fake) == {shared: (10**7, Algo.SLIDING_WINDOW)}, "b still names the slice's"
    step(dp, index, remove=["alice/b"])
    assert live(fake) == {} and dp.rule_policers.owned() == {}


def test_a_change_whose_rules_cannot_be_written_leaves_the_policers_as_they_were():
    fake = RecordingDpp()
    dp, index = Dataplane(fake), RuleIndex({})
    step(dp, index, add=[rule(index, "capped", 1000, rate=10**6)])
    before, owned = live(fake), dp.rule_policers.owned()
    fake.fail_upsert_after = 1  # the batch fails after its first rule
    change = index.track()
    change.remove("alice/capped")
    change.add(rule(index, "capped", 1000, rate=2 * 10**6))
    change.add(rule(index, "new", 2000, rate=3 * 10**6))
    with pytest.raises(DataplaneError):
        dp.apply_changes(change.delta())
    assert live(fake) == before and dp.rule_policers.owned() == owned
