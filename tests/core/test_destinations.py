"""The callback policy: which addresses are public, how hosts are read (no odd spelling gets
through), what the allow-list adds, and that every address a name resolves to is checked."""

from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from netapp.core.config import SubscriptionSettings
from netapp.core.destinations import (
    AllowList,
    DestinationRefused,
    Destinations,
    address_kind,
    allow_entry,
    host_address,
)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("169.254.169.254", "link-local"),  # cloud metadata
        ("10.0.0.5", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "non-global"),  # CGNAT, shared address space
        ("198.18.0.1", "private"),  # benchmarking
        ("192.0.2.1", "private"),  # documentation
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "private"),  # "this network"
        ("224.0.1.1", "multicast"),  # ipaddress calls some multicast global
        ("240.0.0.1", "private"),
        ("255.255.255.255", "private"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),  # ULA
        ("fec0::1", "site-local"),  # ipaddress calls it global
        ("2001:db8::1", "private"),  # documentation
        ("ff0e::1", "multicast"),
        ("::ffff:169.254.169.254", "link-local"),  # IPv4-mapped
        ("::ffff:127.0.0.1", "loopback"),
        ("::127.0.0.1", "loopback"),  # IPv4-compatible
        ("64:ff9b::a00:5", "private"),  # NAT64 of 10.0.0.5
        ("2002:7f00:1::1", "loopback"),  # 6to4 of 127.0.0.1
    ],
)
def test_an_address_that_is_not_public_unicast_has_a_kind(address, kind):
    assert address_kind(ipaddress.ip_address(address)) == kind


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "93.184.215.14", "2606:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1"]
)
def test_a_public_unicast_address_has_no_kind(address):
    assert address_kind(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    "host",
    [
        *("2130706433", "0x7f000001", "0x7f.1", "0177.0.0.1", "017700000001"),
        *("127.1", "127.0.1", "0", "0x", "127.0.0.1."),
    ],
)
def test_an_ipv4_address_spelt_other_than_as_four_decimal_numbers_is_malformed(host):
    with pytest.raises(ValueError, match="unusual spelling"):
        host_address(host)


@pytest.mark.parametrize("host", ["a..b", "-a.example", "a b", "a%2e.example", "x" * 64 + ".example", "."])
def test_a_host_that_is_no_dns_name_is_malformed(host):
    with pytest.raises(ValueError, match="not a host name"):
        host_address(host)


def test_addresses_and_names_are_told_apart():
    assert host_address("192.0.2.10") == ipaddress.ip_address("192.0.2.10")
    assert host_address("::ffff:7f00:1") == ipaddress.ip_address("::ffff:127.0.0.1")
    assert host_address("receiver.example.") is None
    assert host_address("xn--bcher-kva.example") is None
    assert host_address("1e100.net") is None  # a number-like label, but not the last
    with pytest.raises(ValueError, match="zone id"):
        host_address("fe80::1%25eth0")


class Answers:
    def __init__(self, *addresses: str):
        self.addresses = [ipaddress.ip_address(address) for address in addresses]
        self.asked = 0

    def __call__(self, host: str, port: int) -> list:
        self.asked += 1
        return self.addresses


def test_every_address_a_name_resolves_to_must_pass_and_the_first_is_the_one_to_connect_to():
    public = Destinations(AllowList(), Answers("93.184.215.14", "2606:4700::1111"))
    assert public.check("receiver.example", 443) == ipaddress.ip_address("93.184.215.14")

    mixed = Destinations(AllowList(), Answers("93.184.215.14", "10.0.0.5"))
    with pytest.raises(DestinationRefused) as refused:
        mixed.check("receiver.example", 443)
    assert str(refused.value) == (
        "receiver.example resolves to 10.0.0.5, a private address; allowed: public addresses only"
    )


def test_an_address_is_never_resolved_and_an_odd_spelling_is_refused_not_resolved():
    answers = Answers("93.184.215.14")
    destinations = Destinations(AllowList(), answers)

    with pytest.raises(DestinationRefused, match="is a loopback address"):
        destinations.check("127.0.0.1", 80)
    with pytest.raises(DestinationRefused, match="unusual spelling"):
        destinations.check("2130706433", 80)
    assert answers.asked == 0


def test_the_allow_list_adds_networks_names_and_subdomains_but_never_unspecified_or_multicast():
    allow = AllowList.of(["127.0.0.0/8", "fd00::/8", "receiver.internal", "*.mgmt.internal", "0.0.0.0/0"])
    check = Destinations(allow, Answers("10.9.9.9")).check

    assert check("127.0.0.2", 80) == ipaddress.ip_address("127.0.0.2")
    assert check("::ffff:127.0.0.1", 80) == ipaddress.ip_address("::ffff:127.0.0.1")  # the IPv4 it reaches
    assert check("fd00::5", 80) == ipaddress.ip_address("fd00::5")
    assert check("RECEIVER.internal.", 80) == ipaddress.ip_address("10.9.9.9")
    assert check("a.mgmt.internal", 80) == ipaddress.ip_address("10.9.9.9")
    for never in ("0.0.0.0", "224.0.0.1"):
        with pytest.raises(DestinationRefused, match="never allowed"):
            check(never, 80)
    narrow = Destinations(AllowList.of(["*.mgmt.internal"]), Answers("10.9.9.9")).check
    with pytest.raises(DestinationRefused, match="mgmt.internal resolves to 10.9.9.9, a private address"):
        narrow("mgmt.internal", 80)  # the wildcard covers the names under it only
    assert str(AllowList.of(["127.0.0.1", "receiver.internal"])) == (
        "public addresses and 127.0.0.1/32, receiver.internal"
    )


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("10.0.0.5/8", "host bits set"),
        ("2130706433", "unusual spelling"),
        ("*.10.0.0.1", "a wildcard takes a domain name"),
        ("not a name", "not a host name"),
    ],
)
def test_an_allow_list_entry_that_is_neither_a_network_nor_a_name_is_refused_in_the_settings(entry, reason):
    with pytest.raises(ValueError, match=reason):
        allow_entry(entry)
    with pytest.raises(ValidationError) as refused:
        SubscriptionSettings(callback_allow=["127.0.0.1", entry])
    assert refused.value.errors()[0]["loc"] == ("callback_allow",) and entry in str(refused.value)


def test_by_default_callbacks_reach_public_addresses_only_and_go_through_no_proxy():
    settings = SubscriptionSettings()

    assert settings.callback_allow == [] and settings.proxy is None
    assert str(AllowList.of(settings.callback_allow)) == "public addresses only"
