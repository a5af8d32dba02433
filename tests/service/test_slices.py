"""A slice spec as intents: ids, matches, priority, actions spread over CPUs, overflow; rejections
that name the spec field."""

from __future__ import annotations

from typing import Any

import pytest

from netapp.intents.errors import IntentError
from netapp.service.slices import prefix_tag, slice_intents, slice_priority
from tests.utils.service import slice_spec

UE = prefix_tag("10.60.0.0/16")


def members(**lists: Any) -> dict[str, Any]:
    return {"vnis": [], "teids": [], "ue_prefixes": [], "dscp": [], **lists}


def summary(spec_fields: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(id, match, action) of each intent, matches as the intent serialises them."""
    return [
        (i.id, i.match.model_dump(mode="json", exclude_none=True), i.action.model_dump())
        for i in slice_intents(slice_spec("s", **spec_fields))
    ]


STEER_0, STEER_1 = {"type": "steer", "cpu": 0}, {"type": "steer", "cpu": 1}
PASS = {"type": "pass"}

EXPANSIONS = [
    (
        "a VNI is VXLAN with that VNI",
        {"members": members(vnis=[1093]), "cpus": [0]},
        [("s-vni-1093", {"overlay": "vxlan", "vni": 1093}, STEER_0)],
    ),
    (
        "a TEID, its id in 8 hex digits",
        {"members": members(teids=[0x8894D0D4]), "cpus": [1]},
        [("s-teid-8894d0d4", {"teid": 0x8894D0D4}, STEER_1)],
    ),
    (
        "a UE prefix is uplink by source and downlink by destination, host bits cleared",
        {"members": members(ue_prefixes=["10.60.1.2/16"]), "cpus": [1]},
        [
            (f"s-ul-{UE}", {"src": "10.60.0.0/16"}, STEER_1),
            (f"s-dl-{UE}", {"dst": "10.60.0.0/16"}, STEER_1),
        ],
    ),
    (
        "a DSCP",
        {"members": members(dscp=[46]), "cpus": []},
        [("s-dscp-46", {"dscp": 46}, PASS)],
    ),
    (
        "members take the CPUs in turn, both directions of a UE on one CPU",
        {"members": members(vnis=[1, 2], ue_prefixes=["10.60.0.0/16"], dscp=[10]), "cpus": [1, 0]},
        [
            ("s-vni-1", {"overlay": "vxlan", "vni": 1}, STEER_1),
            ("s-vni-2", {"overlay": "vxlan", "vni": 2}, STEER_0),
            (f"s-ul-{UE}", {"src": "10.60.0.0/16"}, STEER_1),
            (f"s-dl-{UE}", {"dst": "10.60.0.0/16"}, STEER_1),
            ("s-dscp-10", {"dscp": 10}, STEER_0),
        ],
    ),
    ("no members, no intents", {"members": members()}, []),
]


@pytest.mark.parametrize("fields, expected", [c[1:] for c in EXPANSIONS], ids=[c[0] for c in EXPANSIONS])
def test_given_members_then_these_intents(fields, expected):
    assert summary(fields) == expected


@pytest.mark.parametrize("level, priority", [(1, 1127), (10, 1118), (127, 1001)])
def test_a_lower_level_is_a_higher_priority_above_the_default(level, priority):
    assert slice_priority(level) == priority
    assert {i.priority for i in slice_intents(slice_spec(priority_level=level))} == {priority}


OVERFLOW = [
    # (description, cpus, alternative, traffic class, the intents' alternative)
    ("steered, no alternative: the site default", [1], None, "priority", None),
    ("steered with an alternative: it takes the overflow", [1], 7, "priority", 7),
    ("passed with an alternative: best effort, so it overflows", [], 7, "best-effort", 7),
    ("passed, no alternative", [], None, "priority", None),
]


@pytest.mark.parametrize(
    "cpus, alternative, traffic_class, intent_alternative",
    [c[1:] for c in OVERFLOW],
    ids=[c[0] for c in OVERFLOW],
)
def test_the_alternative_takes_the_overflow(cpus, alternative, traffic_class, intent_alternative):
    intents = slice_intents(slice_spec(cpus=cpus, alternative=alternative))
    assert {(i.traffic_class, i.alternative) for i in intents} == {(traffic_class, intent_alternative)}


def test_the_expansion_is_deterministic_and_labelled():
    first, second = slice_intents(slice_spec()), slice_intents(slice_spec())
    assert first == second
    assert first[0].label == "slice embb (SST 1, SD 00A1B2): VNI 1093"


def test_a_resize_keeps_the_ids_of_members_that_stay():
    before = {i.id for i in slice_intents(slice_spec(members=members(vnis=[1, 2], dscp=[46])))}
    after = {i.id for i in slice_intents(slice_spec(members=members(vnis=[2, 3], dscp=[46])))}
    assert before & after == {"embb-vni-2", "embb-dscp-46"}


REJECTIONS = [
    ("a VNI above 24 bits", {"members": members(vnis=[1, 1 << 24])}, "members.vnis[1]"),
    ("a negative TEID", {"members": members(teids=[-1])}, "members.teids[0]"),
    ("a DSCP above 63", {"members": members(dscp=[64])}, "members.dscp[0]"),
    ("a listed VNI again", {"members": members(vnis=[5, 6, 5])}, "members.vnis[2]"),
    (
        "a prefix that is not one",
        {"members": members(ue_prefixes=["10.0.0.0/8", "ue-1"])},
        "members.ue_prefixes[1]",
    ),
    (
        "the same prefix written twice",
        {"members": members(ue_prefixes=["10.0.0.0/8", "10.1.2.3/8"])},
        "members.ue_prefixes[1]",
    ),
    ("a CPU twice", {"cpus": [1, 1]}, "cpus[1]"),
    ("a CPU out of range", {"cpus": [128]}, "cpus[0]"),
]


@pytest.mark.parametrize("fields, field", [c[1:] for c in REJECTIONS], ids=[c[0] for c in REJECTIONS])
def test_given_a_bad_member_then_its_field_is_named(fields, field):
    with pytest.raises(IntentError) as rejected:
        slice_intents(slice_spec(**fields))
    assert rejected.value.field == field


def test_the_longest_slice_id_still_gives_valid_intent_ids():
    spec = slice_spec(
        "s" * 48, members=members(vnis=[(1 << 24) - 1], teids=[1], ue_prefixes=["::/0"], dscp=[63])
    )
    assert all(len(i.id) <= 64 for i in slice_intents(spec))
