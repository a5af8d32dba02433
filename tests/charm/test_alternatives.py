"""The `dpp-alternatives` relation data without ops: peers validated, the group built the way the
NetApp's own model accepts it, and the limits mirrored from the NetApp."""

from __future__ import annotations

import alternatives as alt
import pytest
from charm_config import MAX_ALT_GROUPS
from netapp_workload import InterfaceAddress

PEER = {"mac": "02:00:00:00:00:0B", "ip4": "10.0.20.11", "ip6": "2001:db8::b"}


def test_limits_are_the_netapps():
    from netapp.intents import models

    assert alt.MAX_ALT_MEMBERS == models.MAX_ALT_MEMBERS
    assert MAX_ALT_GROUPS == models.MAX_ALT_GROUPS


def test_given_own_address_when_databag_then_every_key_and_empty_for_none():
    assert alt.databag(InterfaceAddress("02:00:00:00:00:0a", "10.0.20.10")) == {
        "mac": "02:00:00:00:00:0a",
        "ip4": "10.0.20.10",
        "ip6": "",
    }
    assert alt.databag(None) == {"mac": "", "ip4": "", "ip6": ""}


def test_given_good_databag_when_parsed_then_normalised():
    peers, rejected = alt.parse_peers([("dpp/1", {**PEER, "ip6": "2001:DB8:0::B", "egress-subnets": "x"})])
    assert rejected == {}
    assert peers["dpp/1"] == alt.PeerAddress(mac="02:00:00:00:00:0b", ip4="10.0.20.11", ip6="2001:db8::b")


@pytest.mark.parametrize(
    "data, reason",
    [
        ({}, "mac: Field required"),
        ({**PEER, "mac": "02-00-00-00-00-0b"}, "not a MAC address"),
        ({**PEER, "mac": "01:00:5e:00:00:01"}, "not a unicast MAC"),
        ({**PEER, "mac": "00:00:00:00:00:00"}, "not a unicast MAC"),
        ({"mac": PEER["mac"], "ip4": "", "ip6": ""}, "ip4 or ip6 is required"),
        ({**PEER, "ip4": "10.0.20"}, "ip4: '10.0.20' is not an IPv4 address"),
        ({**PEER, "ip4": "0.0.0.0"}, "not a unicast address"),
        ({**PEER, "ip6": "ff02::1"}, "not a unicast address"),
        ({**PEER, "ip6": "10.0.20.11"}, "not an IPv6 address"),
    ],
)
def test_given_bad_databag_when_parsed_then_rejected_with_reason(data, reason):
    peers, rejected = alt.parse_peers([("dpp/1", data)])
    assert peers == {}
    assert reason in rejected["dpp/1"]


def test_given_a_unit_twice_when_parsed_then_first_valid_kept():
    other = {**PEER, "ip4": "10.0.20.99"}
    peers, rejected = alt.parse_peers([("dpp/1", {"mac": "bad"}), ("dpp/1", PEER), ("dpp/1", other)])
    assert rejected == {} and peers["dpp/1"].ip4 == "10.0.20.11"


def test_given_unit_names_when_sorted_then_by_application_then_number():
    names = ["dpp-b/10", "dpp-a/3", "dpp-b/2", "odd"]
    assert sorted(names, key=alt.unit_order) == ["dpp-a/3", "dpp-b/2", "dpp-b/10", "odd"]


def test_given_peers_when_group_built_then_the_netapp_accepts_it():
    from netapp.forwarding.models import AlternativeGroup

    peers, _ = alt.parse_peers(
        [("dpp/2", PEER), ("dpp/1", {"mac": "02:00:00:00:00:0c", "ip4": "10.0.20.12"})]
    )
    group, left_out = alt.build_group(63, "ens6", "02:00:00:00:00:0a", peers)
    assert left_out == []
    parsed = AlternativeGroup.model_validate(group)
    assert [str(m.ip4) for m in parsed.members] == ["10.0.20.12", "10.0.20.11"]
    assert {m.interface for m in parsed.members} == {"ens6"}
    assert {m.source_mac for m in parsed.members} == {"02:00:00:00:00:0a"}
    assert all(m.probe for m in parsed.members)  # peers are NetApps: they answer GTP-U echo


def test_given_no_peers_when_group_built_then_none():
    assert alt.build_group(63, "ens6", "02:00:00:00:00:0a", {}) == (None, [])


def test_given_more_peers_than_members_when_group_built_then_capped_in_unit_order():
    seen = [(f"dpp/{n}", {"mac": f"02:00:00:00:01:{n:02x}", "ip4": f"10.0.21.{n}"}) for n in range(12, 0, -1)]
    peers, _ = alt.parse_peers(seen)
    group, left_out = alt.build_group(1, "ens6", "02:00:00:00:00:0a", peers)
    assert len(group["members"]) == alt.MAX_ALT_MEMBERS
    assert group["members"][0]["ip4"] == "10.0.21.1"
    assert left_out == ["dpp/9", "dpp/10", "dpp/11", "dpp/12"]
