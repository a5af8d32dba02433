"""The collector over the real service and the XDP program in the kernel (root, libdpp): packets
run through BPF_PROG_TEST_RUN show up as exact per-intent, per-verdict and per-reason counts, and
replacing the pinned program (a reload) restarts the rates instead of reporting negative ones."""

from __future__ import annotations

import secrets
from typing import Iterator

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.dataplane import binding
from netapp.service.service import NetAppService
from netapp.telemetry.collector import Collector
from netapp.telemetry.poll import INTENT, REASON, VERDICT
from tests.utils.kernel import require_kernel
from tests.utils.service import ALICE, grant_site, intent, settings_for

BURST = 37


@pytest.fixture
def service(tmp_path) -> Iterator[NetAppService]:
    require_kernel()
    name = f"tel-{secrets.token_hex(3)}"
    service = NetAppService(settings_for(tmp_path, instance=name, max_rules=4096))
    service.start()
    grant_site(service, ALICE.tenant)
    try:
        yield service
    finally:
        service.close()
        handle = binding.DppHandle.open(binding.load_libdpp(), name)
        handle.unpin()
        handle.close()


def udp_frame(dport: int) -> bytes:
    frame = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.0.0.1", dst="10.0.0.2")
    return bytes(frame / UDP(sport=40000, dport=dport) / (b"x" * 32))


def field(poll, measurement: str, tag: str, value: str, name: str):
    (point,) = [p for p in poll.points() if p.measurement == measurement and p.tags.get(tag) == value]
    return point.fields.get(name)


def test_a_known_burst_is_counted_exactly_per_intent_verdict_and_reason(service):
    service.create_intent(ALICE, intent("drop-me", 6000, action={"type": "drop"}))
    service.create_intent(ALICE, intent("idle", 6001, action={"type": "pass"}))
    collector = Collector(service, node="edge-1")
    before = collector.poll_once()

    for _ in range(BURST):
        service.dataplane.test_run(udp_frame(6000))
    service.dataplane.test_run(udp_frame(6000)[:20])  # truncated inside IPv4
    after = collector.poll_once()

    assert field(after, INTENT, "intent", "drop-me", "packets") == BURST
    assert field(after, INTENT, "intent", "drop-me", "bytes") == BURST * len(udp_frame(6000))
    assert field(after, INTENT, "intent", "idle", "packets") == 0
    drops = field(after, VERDICT, "verdict", "DROP", "packets") - field(
        before, VERDICT, "verdict", "DROP", "packets"
    )
    assert drops == BURST
    truncated = field(after, REASON, "reason", "trunc_ipv4", "packets")
    assert truncated - field(before, REASON, "reason", "trunc_ipv4", "packets") == 1
    assert field(after, INTENT, "intent", "drop-me", "packets_rate") > 0


class Current:
    """The counters of whichever service runs now (a restart replaces it)."""

    def __init__(self, service: NetAppService):
        self.service = service

    def counters(self):
        return self.service.counters()


def test_a_program_reload_resets_the_rates(service, tmp_path):
    service.create_intent(ALICE, intent("drop-me", 6000, action={"type": "drop"}))
    source = Current(service)
    collector = Collector(source, node="edge-1")
    for _ in range(5):
        service.dataplane.test_run(udp_frame(6000))
    collector.poll_once()
    instance = service.settings.instance
    service.close()
    handle = binding.DppHandle.open(binding.load_libdpp(), instance)
    handle.unpin()  # the next start loads a new program with new, zeroed maps
    handle.close()
    source.service = NetAppService(settings_for(tmp_path, instance=instance, max_rules=4096))
    source.service.start()
    try:
        poll = collector.poll_once()
    finally:
        source.service.close()

    assert poll.reset
    assert field(poll, INTENT, "intent", "drop-me", "packets") == 0
    assert field(poll, INTENT, "intent", "drop-me", "packets_rate") is None
