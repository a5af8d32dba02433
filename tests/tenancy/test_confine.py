"""Confining a tenant's match to its grants (pure): inside, narrowed, refused; grants that meet."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings, strategies as st

from netapp.intents.errors import IntentError
from netapp.intents.models import Match
from netapp.tenancy.confine import confine, grants_intersect
from netapp.tenancy.models import TenantSpec, TrafficGrant

VNI_1093 = TrafficGrant(overlay="vxlan", vni=1093)
UE_POOL = TrafficGrant(src="10.45.0.0/16")
TEIDS = TrafficGrant(teids={"first": 0x1000, "last": 0x1FFF})


def test_a_match_inside_a_grant_is_installed_as_it_is():
    match = Match(overlay="vxlan", vni=1093, teid=7, protocol="udp", dst_port=5004)
    assert confine(match, [VNI_1093, UE_POOL], "a") == (match, None)


def test_a_catch_all_is_narrowed_to_the_tenants_only_grant_and_says_so():
    match, narrowed = confine(Match(), [VNI_1093], "a")
    assert (match.overlay, match.vni) == ("vxlan", 1093)
    assert narrowed == "narrowed to the grant vxlan vni 1093 (set overlay vxlan, vni 1093)"


def test_a_wider_prefix_is_narrowed_to_the_granted_one():
    match, narrowed = confine(Match(src="10.0.0.0/8", protocol="tcp"), [UE_POOL], "a")
    assert match.src == ipaddress.ip_network("10.45.0.0/16") and match.protocol == "tcp"
    assert "src 10.45.0.0/16" in narrowed


def test_a_match_spanning_two_grants_is_refused_naming_both():
    with pytest.raises(IntentError) as refused:
        confine(Match(), [VNI_1093, UE_POOL], "a")
    assert refused.value.field == "match"
    assert "spans 2 of the grants of tenant 'a' (vxlan vni 1093; src 10.45.0.0/16)" in refused.value.message


def test_a_match_outside_every_grant_is_refused_naming_the_field():
    with pytest.raises(IntentError) as refused:
        confine(Match(overlay="vxlan", vni=5), [VNI_1093], "a")
    assert refused.value.field == "match.vni"
    assert "vni 5 is not the granted 1093" in refused.value.message


def test_a_teid_range_cannot_be_narrowed_to_and_the_error_says_what_to_do():
    with pytest.raises(IntentError) as refused:
        confine(Match(), [TEIDS], "a")
    assert refused.value.field == "match.teid" and "name one in match.teid" in refused.value.message
    assert confine(Match(teid=0x1234), [TEIDS], "a")[1] is None
    with pytest.raises(IntentError, match="outside the granted teids 0x1000..0x1fff"):
        confine(Match(teid=0x2000), [TEIDS], "a")


def test_a_tenant_without_grants_is_told_who_grants_them():
    with pytest.raises(IntentError, match=r"owns no traffic yet: .*PUT /api/v1/tenants/a"):
        confine(Match(teid=1), [], "a")


def test_narrowing_to_a_family_the_match_excludes_is_disjoint():
    with pytest.raises(IntentError, match="outside the traffic of tenant"):
        confine(Match(protocol="icmpv6"), [UE_POOL], "a")


def test_a_grant_needs_a_field_and_site_excludes_traffic():
    with pytest.raises(ValueError, match="a grant needs at least one field"):
        TrafficGrant()
    with pytest.raises(ValueError, match="a site tenant owns all traffic"):
        TenantSpec(site=True, traffic=[VNI_1093])


@pytest.mark.parametrize(
    "a, b, meet",
    [
        (VNI_1093, UE_POOL, True),  # vni 1093 packets from the pool are in both
        (VNI_1093, TrafficGrant(overlay="vxlan", vni=1094), False),
        (TrafficGrant(src="10.0.0.0/8"), UE_POOL, True),
        (TrafficGrant(src="10.46.0.0/16"), UE_POOL, False),
        (TrafficGrant(src="10.0.0.0/8"), TrafficGrant(dst="2001:db8::/32"), False),  # one family per packet
        (TEIDS, TrafficGrant(teids={"first": 0x1FFF, "last": 0x3000}), True),
        (TEIDS, TrafficGrant(teids={"first": 0x2000, "last": 0x3000}), False),
        (TrafficGrant(interface="n3"), TrafficGrant(interface="n6", vlan=5), False),
    ],
)
def test_grants_meet_when_some_packet_is_in_both(a, b, meet):
    assert grants_intersect(a, b) is meet and grants_intersect(b, a) is meet


# --- the confined match never leaves the grant: checked on sampled packets ------------------------

PREFIXES = ["10.0.0.0/8", "10.45.0.0/16", "10.45.1.0/24", "10.46.0.0/16", "10.45.1.7/32"]
ADDRESSES = ["10.45.1.7", "10.45.2.1", "10.46.0.1", "192.0.2.1"]


@st.composite
def grants(draw) -> TrafficGrant:
    fields = {}
    if draw(st.booleans()):
        fields.update(overlay="vxlan", vni=draw(st.sampled_from([1, 2])))
    if draw(st.booleans()):
        first = draw(st.integers(1, 4))
        fields["teids"] = {"first": first, "last": draw(st.integers(first, 4))}
    if draw(st.booleans()) or not fields:
        fields["src"] = draw(st.sampled_from(PREFIXES))
    return TrafficGrant.model_validate(fields)


@st.composite
def matches(draw) -> Match:
    fields = {}
    if draw(st.booleans()):
        fields.update(overlay="vxlan", vni=draw(st.sampled_from([1, 2])))
    if draw(st.booleans()):
        fields["teid"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        fields["src"] = draw(st.sampled_from(PREFIXES))
    return Match.model_validate(fields)


def in_grant(packet: dict, grant: TrafficGrant) -> bool:
    return (
        (grant.vni is None or packet["vni"] == grant.vni)
        and (grant.teids is None or packet["teid"] in grant.teids)
        and (grant.src is None or ipaddress.ip_address(packet["src"]) in grant.src)
    )


def in_match(packet: dict, match: Match) -> bool:
    return (
        (match.vni is None or packet["vni"] == match.vni)
        and (match.teid is None or packet["teid"] == match.teid)
        and (match.src is None or ipaddress.ip_address(packet["src"]) in match.src)
    )


PACKETS = [
    {"vni": vni, "teid": teid, "src": src} for vni in (1, 2, 3) for teid in (1, 2, 3, 4, 5) for src in ADDRESSES
]


@settings(max_examples=300, deadline=None)
@given(st.lists(grants(), min_size=1, max_size=3), matches())
def test_what_is_installed_matches_only_packets_the_tenant_owns(owned, match):
    try:
        installed, narrowed = confine(match, owned, "a")
    except IntentError:
        return
    for packet in PACKETS:
        if in_match(packet, installed):
            assert any(in_grant(packet, grant) for grant in owned), (packet, installed)
            assert in_match(packet, match), "narrowing only ever removes packets"
    if narrowed is None:
        assert installed == match
