"""Overlapping intents of different shapes: the packets both match (against the reference
classifier), the winner and why (against the order api/intents.md documents), in words, and the
index's search for them (against every pair, whichever way it finds them)."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netapp.intents import index as index_module
from netapp.intents import shape_keys
from netapp.intents.compiler import FieldValues, compile_intent
from netapp.intents.index import RuleIndex
from netapp.intents.models import Intent
from netapp.intents.overlap import ShapeRanks, decide, describe_values, shared_values
from tests.utils import refclassify as ref
from tests.utils import refparser as rp
from tests.utils.intents import INTERFACES, native_match

NAMES = {ifindex: name for name, ifindex in INTERFACES.items()}


def rule(intent_id: str, match: dict[str, Any], priority: int = 100):
    return compile_intent(
        Intent.model_validate({"id": intent_id, "match": match, "action": {"type": "drop"}, "priority": priority}),
        INTERFACES,
    )


def values(match: dict[str, Any]) -> FieldValues:
    return rule("i", match).values


# --- the packets both match ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "shared"),
    [
        ({"dst": "10.0.0.0/16"}, {"dst": "10.0.1.0/24"}, {"dst": "10.0.1.0/24"}),
        ({"dst": "10.0.1.0/24"}, {"dst": "10.0.0.0/16"}, {"dst": "10.0.1.0/24"}),
        (
            {"src": "10.0.0.0/24"},
            {"protocol": "udp", "dst_port": 5000},
            {"src": "10.0.0.0/24", "protocol": "udp", "dst_port": 5000},
        ),
        ({"teid": 5}, {"qfi": 9}, {"teid": 5, "qfi": 9}),
        ({"overlay": "gre"}, {"overlay": "gre", "vni": 7}, {"overlay": "gre", "vni": 7}),
        ({}, {"vlan": 7}, {"vlan": 7}),
        ({"protocol": 17}, {"protocol": "udp", "dscp": 46}, {"protocol": "udp", "dscp": 46}),
    ],
)
def test_given_compatible_matches_then_the_shared_match_takes_every_field_and_the_longer_prefix(a, b, shared):
    assert shared_values(values(a), values(b)) == values(shared)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"dst": "10.0.0.0/24"}, {"dst": "10.0.1.0/24"}),
        ({"dst": "10.0.0.0/8"}, {"dst": "2001:db8::/32"}),
        ({"src": "10.0.0.0/8"}, {"dst": "2001:db8::/32"}),  # one packet has one family
        ({"src": "0.0.0.0/0"}, {"dst": "::/0"}),
        ({"protocol": "udp", "dst_port": 1}, {"protocol": "tcp"}),
        ({"protocol": "udp", "dst_port": 1}, {"protocol": "udp", "dst_port": 2}),
        ({"overlay": "vxlan"}, {"overlay": "gre", "vni": 1}),
        ({"interface": "eth0"}, {"interface": "eth1", "vlan": 3}),
    ],
)
def test_given_matches_no_packet_can_have_both_then_none(a, b):
    assert shared_values(values(a), values(b)) is None


# A small domain, so that matches and packets meet often.
_DSTS = ["10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.2.0.0/16", "0.0.0.0/0", "2001:db8::/32"]
_SRCS = ["192.168.0.0/16", "192.168.1.0/24", "2001:db8:1::/48"]
_matches = st.fixed_dictionaries(
    {},
    optional={
        "vlan": st.sampled_from([7, 8]),
        "overlay": st.sampled_from(["vxlan", "gre"]),
        "vni": st.sampled_from([1, 2]),
        "teid": st.sampled_from([5, 6]),
        "qfi": st.sampled_from([1, 2]),
        "protocol": st.sampled_from(["udp", "tcp"]),
        "dst_port": st.sampled_from([1000, 2000]),
        "dscp": st.sampled_from([1, 2]),
        "dst": st.sampled_from(_DSTS),
        "src": st.sampled_from(_SRCS),
    },
).map(lambda match: _valid(match))


def _valid(match: dict[str, Any]) -> dict[str, Any]:
    """Make a drawn match one the model accepts: a VNI needs an overlay, a port a protocol, two
    prefixes one family."""
    if "vni" in match:
        match.setdefault("overlay", "vxlan")
    if "dst_port" in match:
        match.setdefault("protocol", "udp")
    if "src" in match and "dst" in match:
        if ipaddress.ip_network(match["src"]).version != ipaddress.ip_network(match["dst"]).version:
            del match["src"]
    return match


_ADDRESSES = {4: ["10.1.2.3", "10.1.3.3", "10.2.0.1", "11.0.0.1", "192.168.1.1", "192.168.2.1"],
              6: ["2001:db8::1", "2001:db8:1::1", "2001:db9::1"]}


@st.composite
def packet_keys(draw: Any) -> dict[str, Any]:
    """A parsed packet (refparser's key) from the same small domain."""
    family = draw(st.sampled_from([4, 6]))

    def address() -> bytes:
        return ipaddress.ip_address(draw(st.sampled_from(_ADDRESSES[family]))).packed.ljust(16, b"\0")

    flags = draw(st.sampled_from([0, rp.KEY_VNI, rp.KEY_GTP, rp.KEY_GTP | rp.KEY_GTP_QFI, rp.KEY_FRAGMENT]))
    return {
        "ifindex": 0,
        "vlan": draw(st.sampled_from([0, 7, 8])),
        "overlay": draw(st.sampled_from([rp.OVERLAY_NONE, rp.OVERLAY_VXLAN, rp.OVERLAY_GRE])),
        "vni": draw(st.sampled_from([1, 2])),
        "teid": draw(st.sampled_from([5, 6])),
        "qfi": draw(st.sampled_from([1, 2])),
        "flags": flags | draw(st.sampled_from([0, rp.KEY_VNI])),
        "family": family,
        "proto": draw(st.sampled_from([6, 17])),
        "dscp": draw(st.sampled_from([1, 2])),
        "sport": 9,
        "dport": draw(st.sampled_from([1000, 2000])),
        "src": address(),
        "dst": address(),
    }


@settings(max_examples=400, deadline=None)
@given(_matches, _matches, st.lists(packet_keys(), min_size=1, max_size=8))
def test_a_packet_matches_the_shared_match_exactly_when_it_matches_both(a, b, keys):
    shared = shared_values(values(a), values(b))
    for key in keys:
        both = ref.matches(a, key) and ref.matches(b, key)
        assert both == (shared is not None and ref.matches(native_match(shared), key)), (a, b, shared, key)


# --- who wins ------------------------------------------------------------------------------------


def order_of(*rules):
    index = RuleIndex(INTERFACES)
    for each in rules:
        index.add(each)
    return ShapeRanks.of(index.shape_order())


@pytest.mark.parametrize(
    ("a", "b", "winner", "reason"),
    [
        (("wide", {"dst": "10.0.0.0/24"}, 200), ("flow", {"teid": 5}, 100), "wide", "priority 200 over 100"),
        (
            ("wide", {"dst": "10.0.0.0/24"}, 100),
            ("flow", {"protocol": "udp", "dst_port": 5000}, 100),
            "flow",
            "equal priority 100: the winner compares more conditions (3 vs 2)",
        ),
        (
            ("src", {"src": "192.168.0.0/24"}, 100),
            ("dst", {"dst": "10.0.0.0/8"}, 100),
            "src",
            "equal priority 100: the winner's prefixes are longer (24 vs 8 bits)",
        ),
        (
            ("vlan", {"vlan": 7}, 100),
            ("dscp", {"dscp": 46}, 100),
            None,
            "equal priority 100: the shapes are equally specific, so the order between them is fixed but "
            "unspecified",
        ),
    ],
)
def test_the_winner_is_the_higher_priority_then_the_shape_searched_first_and_the_reason_says_why(
    a, b, winner, reason
):
    first, second = rule(*a), rule(*b)
    chosen, why = decide(first, second, order_of(first, second))

    assert why.startswith(reason)
    if winner is not None:
        assert chosen.intent_id == winner
        assert decide(second, first, order_of(second, first))[0].intent_id == winner
    if why.startswith("equal"):
        assert why.endswith("give them different priorities to choose the winner")


def test_at_equal_priority_a_shape_holding_a_higher_priority_wins_and_the_reason_says_so():
    by_teid, other_teid = rule("teid", {"teid": 5}), rule("other-teid", {"teid": 6}, priority=500)
    by_tunnel = rule("tunnel", {"overlay": "vxlan", "vni": 1, "teid": 5})

    chosen, why = decide(by_tunnel, by_teid, order_of(by_teid, by_tunnel, other_teid))

    assert chosen.intent_id == "teid"
    assert "searched first, as it holds a higher priority (500 vs 100" in why


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_matches, st.sampled_from([100, 200])), min_size=2, max_size=8))
def test_every_reported_winner_is_one_the_documented_order_allows(specs):
    intents = [{"id": f"i{n}", "match": match, "priority": priority, "action": {"type": "drop"}}
               for n, (match, priority) in enumerate(specs)]
    index = RuleIndex(INTERFACES)
    for intent in intents:
        index.add(index.compile(Intent.model_validate(intent)))
    installed = ref.installed(intents)
    top: dict[Any, int] = {}
    for intent in installed:
        shape = ref.shape_of(intent["match"])
        top[shape] = max(top.get(shape, 0), ref.priority(intent))
    by_id = {intent["id"]: intent for intent in installed}

    def order(intent_id: str) -> tuple:
        intent = by_id[intent_id]
        shape = ref.shape_of(intent["match"])
        return (-ref.priority(intent), -top[shape], -len(shape.conditions), -shape.prefix_bits)

    for intent_id in by_id:
        for found in index.overlaps(intent_id, limit=100).overlaps:
            pair = (found.rule.intent_id, found.other.intent_id)
            best = min(order(name) for name in pair)
            assert order(found.winner.intent_id) == best, (pair, found.reason)


# --- in words ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("match", "words"),
    [
        (
            {"interface": "eth1", "src": "10.0.0.0/24", "protocol": "udp", "dst_port": 5000},
            "udp packets from 10.0.0.0/24 to port 5000 on eth1",
        ),
        ({}, "every packet"),
        ({"dst": "0.0.0.0/0", "protocol": 47}, "IPv4 protocol 47 packets"),
        ({"dst": "2001:db8::1", "dscp": 46}, "packets to 2001:db8::1 with DSCP 46"),
        ({"overlay": "gre", "vni": 9, "vlan": 3}, "packets in VLAN 3 in gre key 9"),
        (
            {"overlay": "vxlan", "vni": 1093, "teid": 77, "qfi": 9},
            "packets in vxlan VNI 1093 in GTP-U TEID 0x0000004d QFI 9",
        ),
        (
            {"qfi": 1, "src": "10.9.0.0/16", "src_port": 53, "protocol": "udp"},
            "udp packets from 10.9.0.0/16 port 53 in GTP-U QFI 1",
        ),
    ],
)
def test_a_match_in_words(match, words):
    assert describe_values(values(match), NAMES) == words


def test_an_interface_the_table_does_not_name_is_given_by_ifindex():
    assert describe_values(values({"interface": "eth1"}), {}) == "packets on ifindex 3"


# --- the index's search ----------------------------------------------------------------------------


def every_overlap(index: RuleIndex, intent_id: str) -> set[str]:
    """The installed rules of other shapes that share packets with this one: every pair looked at."""
    mine = index.get(intent_id)
    assert mine is not None
    return {
        other.intent_id
        for other in index.installed_rules()
        if other.shape != mine.shape and shared_values(mine.values, other.values) is not None
    }


@pytest.fixture(params=["default", "tallies", "postings", "scans"])
def search_paths(request, monkeypatch):
    """Make the search take each of its ways: as configured; no probes, and tallies (or postings)
    even for small shapes; scans only."""
    if request.param in ("tallies", "postings"):
        monkeypatch.setattr(shape_keys, "SMALL_SHAPE", 0)
        monkeypatch.setattr(shape_keys, "MAX_PROBES", 0)
        monkeypatch.setattr(shape_keys, "_FEW_VALUES", 1 << 30 if request.param == "tallies" else 0)
    elif request.param == "scans":
        monkeypatch.setattr(shape_keys, "SMALL_SHAPE", 1 << 30)
        monkeypatch.setattr(shape_keys, "MAX_PROBES", 0)
        monkeypatch.setattr(shape_keys, "MAX_EXPANSION", 0)
    return request.param


_steps = st.lists(st.tuples(st.booleans(), st.integers(0, 11), _matches, st.sampled_from([100, 200])), max_size=30)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_steps, limit=st.integers(1, 4))
def test_the_search_finds_every_overlap_and_counts_what_it_does_not_list(search_paths, steps, limit):
    """Adds and removes in any order (postings built early must follow them), a search after each."""
    index = RuleIndex(INTERFACES, max_shapes=64)
    for add, number, match, priority in steps:
        intent_id = f"i{number}"
        if not add or intent_id in index:
            if intent_id in index:
                index.remove(intent_id)
            continue
        index.add(rule(intent_id, match, priority))
        for name in index.rule_ids():
            check_search(index, name, limit)


def check_search(index: RuleIndex, intent_id: str, limit: int) -> None:
    search = index.overlaps(intent_id, limit=limit)
    if not index.is_installed(intent_id):
        assert search == index_module.OverlapSearch()
        return
    expected = every_overlap(index, intent_id)
    listed = [found.other.intent_id for found in search.overlaps]
    assert len(listed) == len(set(listed)) and set(listed) <= expected
    assert search.unchecked == 0
    assert len(listed) == min(limit, len(expected)) and len(listed) + search.more == len(expected)
    for found in search.overlaps:
        assert found.rule.intent_id == intent_id and index.is_installed(found.other.intent_id)
        assert found.shared == shared_values(found.rule.values, found.other.values)


def test_a_posting_follows_the_rules_that_leave_and_come_back(monkeypatch):
    monkeypatch.setattr(shape_keys, "SMALL_SHAPE", 0)
    monkeypatch.setattr(shape_keys, "_FEW_VALUES", 0)
    index = RuleIndex(INTERFACES)
    for n in range(4):
        index.add(rule(f"port-{n}", {"protocol": "udp", "dst_port": n, "dscp": n % 2}))
    index.add(rule("any-dscp", {"protocol": "udp", "dst_port": 1}))  # looks the ports up by dst_port

    def found() -> list[str]:
        return [overlap.other.intent_id for overlap in index.overlaps("any-dscp").overlaps]

    assert found() == ["port-1"]
    index.remove("port-1")
    assert found() == []
    index.add(rule("again", {"protocol": "udp", "dst_port": 1, "dscp": 5}))
    index.add(rule("twice", {"protocol": "udp", "dst_port": 1, "dscp": 6}))
    index.remove("again")
    assert found() == ["twice"]


def test_a_search_stops_at_its_budget_and_says_how_many_it_left_unchecked(monkeypatch):
    monkeypatch.setattr(shape_keys, "SMALL_SHAPE", 1 << 30)  # scan, so that every key costs
    index = RuleIndex(INTERFACES)
    for n in range(100):
        index.add(rule(f"far-{n}", {"dst": f"10.{n}.0.0/16", "protocol": "tcp"}))
    index.add(rule("near", {"dst": "10.7.0.0/16", "protocol": "udp", "dscp": 1}))
    index.add(rule("new", {"dst": "10.99.0.0/16", "dscp": 1}))  # one of the last 'far' rules overlaps it

    cut = index.overlaps("new", budget=50)
    whole = index.overlaps("new")

    assert [found.other.intent_id for found in whole.overlaps] == ["far-99"] and not whole.unchecked
    assert (cut.overlaps, cut.more, cut.unchecked) == ((), 0, 51)
    assert index.overlaps("near").overlaps == ()


def test_a_shape_that_shares_no_field_with_the_rule_is_counted_without_looking_at_its_keys():
    index = RuleIndex(INTERFACES)
    for n in range(1000):
        index.add(rule(f"flow-{n}", {"teid": n}))
    index.add(rule("wide", {"dst": "10.0.0.0/24"}, priority=200))

    search = index.overlaps("wide", budget=0)

    assert len(search.overlaps) == 10 and search.more == 990 and search.unchecked == 0
    assert {found.winner.intent_id for found in search.overlaps} == {"wide"}


def test_a_more_specific_rule_probes_one_key_per_shape(monkeypatch):
    index = RuleIndex(INTERFACES)
    for n in range(1000):
        index.add(rule(f"port-{n}", {"protocol": "udp", "dst_port": n}))
    index.add(rule("flow", {"protocol": "udp", "dst_port": 7, "dst": "10.0.0.1"}))
    monkeypatch.setattr(shape_keys.ShapeKeys, "_narrowed", lambda *_: pytest.fail("not probed"))

    search = index.overlaps("flow", budget=1)

    assert [found.other.intent_id for found in search.overlaps] == ["port-7"] and not search.more


def test_a_field_whose_keys_hold_few_values_is_counted_not_scanned():
    index = RuleIndex(INTERFACES)
    for n in range(1000):
        index.add(rule(f"flow-{n}", {"overlay": "vxlan", "vni": 7, "teid": n}))
    index.add(rule("vni-7", {"overlay": "vxlan", "vni": 7, "dscp": 1}))
    index.add(rule("vni-8", {"overlay": "vxlan", "vni": 8, "dscp": 2}))

    every = index.overlaps("vni-7", budget=0)
    none = index.overlaps("vni-8", budget=0)

    assert (len(every.overlaps), every.more, every.unchecked) == (10, 990, 0)
    assert none == index_module.OverlapSearch()


def test_a_shorter_prefix_looks_up_the_longer_prefixes_it_holds():
    index = RuleIndex(INTERFACES)
    for n in range(256):
        index.add(rule(f"net-{n}", {"dst": f"10.{n}.{n}.0/24"}))
    index.add(rule("wide", {"dst": "10.3.0.0/16", "dscp": 1}))
    index.add(rule("v6", {"dst": "2001:db8::/32", "dscp": 1}))

    assert [found.other.intent_id for found in index.overlaps("wide", budget=0).overlaps] == ["net-3"]
    assert index.overlaps("v6").overlaps == ()


def test_a_rule_left_out_by_a_collision_overlaps_nothing():
    index = RuleIndex(INTERFACES)
    index.add(rule("teid", {"teid": 5}))
    index.add(rule("first", {"dscp": 1}, priority=200))
    index.add(rule("second", {"dscp": 1}, priority=100))

    assert index.overlaps("second").overlaps == ()
    assert [found.other.intent_id for found in index.overlaps("teid").overlaps] == ["first"]

