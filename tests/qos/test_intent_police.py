"""Intents' and slices' policers on the real data plane (root, libdpp, the service over a pinned
instance, packets through the pipeline with BPF_PROG_TEST_RUN on the kernel's clock): an intent's
police option drops above its rate, counted by its policer and by reason qos_policed; a slice's MBR
is one policer that counts every packet of all its rules; two tenants' rules never share a policer
and each tenant reads its own only; a restart keeps the policers' configuration. (The decisions at
synthetic times are tests/qos/test_rule_police.py's.)"""

from __future__ import annotations

import time
from typing import Iterator

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.service.contract import SliceSpec
from tests.utils.service import ADMIN, ALICE, BOB, intent, pinned_instance, slice_spec
from tests.utils.service import started_on as started

RATE, BURST, FRAME = 8_000, 3_000, 1_000  # bit/s (1000 bytes a second), bytes, bytes a frame
POLICE = {"rate_bps": RATE, "burst_bytes": BURST, "algorithm": "token_bucket"}


@pytest.fixture
def instance() -> Iterator[str]:
    yield from pinned_instance("qos")


def udp_frame(dport: int = 1000, dscp: int = 0, size: int = FRAME) -> bytes:
    head = Ether() / IP(src="10.0.0.1", dst="10.0.0.2", tos=dscp << 2) / UDP(sport=9, dport=dport)
    return bytes(head / (b"x" * (size - len(head))))


def capped(intent_id: str, port: int):
    return intent(intent_id, port, action={"type": "pass", "police": POLICE})


def dscp_slice(slice_id: str, dscp: list[int], mbr_kbps: int = RATE // 1000) -> SliceSpec:
    return slice_spec(slice_id, cpus=[], mbr_kbps=mbr_kbps, members={"dscp": dscp})


def records_of(service, who) -> dict[str, object]:
    return {record.intent_id or f"slice {record.slice_id}": record for record in service.list_rule_policers(who)}


def most_that_may_pass(elapsed_s: float) -> int:
    """The bucket's burst (full at the first packet) and what the rate refills meanwhile."""
    return BURST + int(RATE / 8 * elapsed_s) + 1


def test_an_intent_with_police_drops_above_its_rate_counted_by_its_policer_and_reason(tmp_path, instance):
    service = started(tmp_path, instance)
    service.create_intent(ALICE, capped("capped", 1000))
    start = time.monotonic()
    verdicts = [service.dataplane.test_run(udp_frame()).verdict for _ in range(10)]
    elapsed = time.monotonic() - start
    (record,) = service.list_rule_policers(ALICE)
    counters = record.counters
    assert (record.intent_id, record.rate_bps, record.burst_bytes, record.algorithm) == (
        "capped", RATE, BURST, "token_bucket")
    assert verdicts.count("PASS") * FRAME == counters.passed_bytes <= most_that_may_pass(elapsed)
    assert verdicts.count("DROP") == counters.dropped_packets >= 1
    assert service.dataplane.reason_stats()["qos_policed"][0] == counters.dropped_packets
    assert service.dataplane.rule_stats()["alice/capped"][0] == 10, "the rule counts every packet it matched"
    service.close()


def test_a_slices_policer_counts_every_packet_of_all_its_rules(tmp_path, instance):
    service = started(tmp_path, instance)
    service.put_slice(ALICE, dscp_slice("gold", [10, 12]))
    verdicts = [service.dataplane.test_run(udp_frame(dscp=dscp)).verdict for dscp in (10, 12) * 5]
    records = records_of(service, ALICE)
    assert list(records) == ["slice gold"], "one policer for the slice's two rules"
    counters = records["slice gold"].counters
    assert counters.passed_packets + counters.dropped_packets == 10
    assert verdicts.count("DROP") == counters.dropped_packets >= 1
    stats = service.dataplane.rule_stats()
    assert stats["alice/gold-dscp-10"][0] == stats["alice/gold-dscp-12"][0] == 5
    service.close()


def test_two_tenants_never_share_a_policer_and_each_reads_its_own(tmp_path, instance):
    service = started(tmp_path, instance)
    for who, port, dscp in ((ALICE, 1000, 10), (BOB, 2000, 20)):
        service.create_intent(who, capped("capped", port))  # the same ids, the same configuration
        service.put_slice(who, dscp_slice("gold", [dscp]))
    alice, bob = records_of(service, ALICE), records_of(service, BOB)
    assert set(alice) == set(bob) == {"capped", "slice gold"}
    assert {record.tenant for record in alice.values()} == {"alice"}
    assert {record.tenant for record in bob.values()} == {"bob"}
    ids = [record.id for record in [*alice.values(), *bob.values()]]
    assert len(set(ids)) == 4
    assert sorted(record.id for record in service.list_rule_policers(ADMIN)) == sorted(ids)
    for _ in range(6):
        service.dataplane.test_run(udp_frame(dport=1000))
    alice, bob = records_of(service, ALICE), records_of(service, BOB)
    assert alice["capped"].counters.passed_packets + alice["capped"].counters.dropped_packets == 6
    assert bob["capped"].counters.passed_packets + bob["capped"].counters.dropped_packets == 0
    service.close()


def test_a_restart_keeps_the_policers_configuration(tmp_path, instance):
    """The intent's policer keeps its id, state and counters (its stored configuration is the same);
    the slice's takes the settings now in force, written afresh."""
    service = started(tmp_path, instance, qos={"default_algorithm": "sliding_window", "default_burst_ms": 500})
    service.put_slice(ALICE, dscp_slice("gold", [10], mbr_kbps=24))
    service.create_intent(ALICE, capped("gone", 2000))  # takes an id before capped's: once it is deleted,
    service.create_intent(ALICE, intent("capped", 1000, action={"type": "pass", "police": {"rate_bps": 16_000}}))
    service.delete_intent(ALICE, "gone")  # the ids a restart would give first are not capped's
    for _ in range(4):
        service.dataplane.test_run(udp_frame(dport=1000))
    before = records_of(service, ALICE)
    service.close()
    assert {name: (r.rate_bps, r.burst_bytes, r.algorithm) for name, r in before.items()} == {
        "capped": (16_000, 3_000, "sliding_window"), "slice gold": (24_000, 3_000, "sliding_window")}

    again = started(tmp_path, instance)  # the settings' defaults now differ: the stored intent says its own
    after = records_of(again, ALICE)
    for _ in range(10):
        again.dataplane.test_run(udp_frame(dport=1000))
    policed = records_of(again, ALICE)["capped"].counters
    again.close()
    assert (after["capped"].id, after["capped"].rate_bps, after["capped"].burst_bytes, after["capped"].algorithm) == (
        before["capped"].id, 16_000, 3_000, "sliding_window")
    assert after["capped"].counters == before["capped"].counters, "kept through the restart"
    assert (after["slice gold"].rate_bps, after["slice gold"].burst_bytes, after["slice gold"].algorithm) == (
        24_000, 3_000, "token_bucket"), "a slice's policer takes the settings in force"
    assert policed.passed_packets + policed.dropped_packets == 14 and policed.dropped_packets >= 1
