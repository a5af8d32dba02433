"""The service writes the dispatcher's maps as its settings say when it starts, a reload puts the new
worker program in the queues, and a restart with the dispatcher off undoes them; what each worker was
given reaches the telemetry (root, libdpp, a pinned instance in a namespace of its own)."""

from __future__ import annotations

import os
import secrets
from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest

from prometheus_client.parser import text_string_to_metric_families

from netapp.core import netns as entering
from netapp.dataplane import binding
from netapp.dataplane.facade import interface_index
from netapp.qos.dispatch import worker_of
from netapp.qos.rss_abi import MAX_RSS_IFACES
from netapp.service.service import NetAppService
from netapp.telemetry.collector import Collector
from netapp.telemetry.poll import RSS_WORKER, PointFilter
from netapp.telemetry.prometheus import exposition
from netapp.testbed import netns
from tests.dataplane.test_rss import t_pdu
from tests.utils.kernel import require_kernel
from tests.utils.service import ADMIN, settings_for

WORKERS = [0, 1]


@pytest.fixture
def site() -> Iterator[tuple[str, str]]:
    """(namespace with the veth pair v0-v1, a pinned instance name); both gone whatever happened."""
    require_kernel()
    if (os.cpu_count() or 1) < len(WORKERS):
        pytest.skip(f"needs {len(WORKERS)} CPUs")
    name, instance = f"rss-{secrets.token_hex(3)}", f"rss-{secrets.token_hex(3)}"
    netns.add_namespace(name)
    try:
        netns.add_veth(name, "v0", name, "v1")
        yield name, instance
    finally:
        netns.delete_namespace(name)
        handle = binding.DppHandle.open(binding.load_libdpp(), instance)
        handle.unpin()
        handle.close()


def started(tmp_path: Path, namespace: str, instance: str, **settings) -> NetAppService:
    service = NetAppService(settings_for(tmp_path, instance=instance, netns=namespace,
                                         interfaces=[{"name": "v0"}], **settings))
    service.start()
    return service


def dispatch_maps(service: NetAppService) -> tuple[dict[int, int], list[int]]:
    """(ifindex -> workers of the dispatcher interfaces, the CPUs with a worker queue)."""
    dp = service.dataplane
    ifaces = {v.ifindex: v.workers for _, v in dp.table("dpp_rss_ifaces").items() if v.workers}
    return ifaces, sorted(cpu for cpu, _ in dp.table("dpp_rss_cpu_map").items())


def worker_program(service: NetAppService) -> int:
    (program,) = [p["id"] for p in service.dataplane.status()["programs"] if p["name"] == "dpp_rss_worker"]
    return program


def queue_programs(service: NetAppService) -> set[int]:
    return {queue.bpf_prog for _, queue in service.dataplane.table("dpp_rss_cpu_map").items()}


def test_given_dispatch_settings_when_started_then_the_maps_dispatch_and_a_restart_without_them_stops(
    tmp_path, site
):
    namespace, instance = site
    with entering.entered(namespace):
        v0 = interface_index("v0")
    service = started(tmp_path, namespace, instance, dispatch={"interfaces": ["v0"], "workers": WORKERS})
    try:
        assert service.health().checks["dispatch"] == "ok"
        assert dispatch_maps(service) == ({v0: len(WORKERS)}, WORKERS)
        workers = service.dataplane.table("dpp_rss_workers")
        assert [workers.get(slot).cpu for slot in range(len(WORKERS))] == WORKERS
        assert queue_programs(service) == {worker_program(service)}
        old = worker_program(service)
        service.reload_dataplane(ADMIN)
        assert queue_programs(service) == {worker_program(service)} != {old}  # the new one runs there
    finally:
        service.close()
    service = started(tmp_path, namespace, instance)
    try:
        assert dispatch_maps(service) == ({}, [])
        assert service.dataplane.table("dpp_rss_ifaces").get(v0 % MAX_RSS_IFACES).ifindex == 0
    finally:
        service.close()


def test_given_dispatched_t_pdus_when_polled_then_each_worker_s_packets_reach_the_telemetry(tmp_path, site):
    """The service's counters carry dpp_rss_stats (what each worker CPU was given), the collector makes
    them dpp_rss_worker points and /metrics' exposition shows them: real T-PDUs through the loaded
    program (BPF_PROG_TEST_RUN counts the redirect it does not carry out), each worker's count the
    hash's model's."""
    namespace, instance = site
    service = started(tmp_path, namespace, instance, dispatch={"interfaces": ["v0"], "workers": WORKERS})
    try:
        teids, size = range(0x1000, 0x1000 + 40), len(t_pdu(0x1000))
        with entering.entered(namespace):
            v0 = interface_index("v0")
            for teid in teids:
                assert service.dataplane.test_run(t_pdu(teid), v0).verdict == "REDIRECT"
        expected = Counter(worker_of(teid, 9, WORKERS) for teid in teids)
        assert set(expected) == set(WORKERS), "the TEIDs reach every worker"
        poll = Collector(service, node="edge-1").poll_once()
        points = {p.tags["cpu"]: p.fields for p in poll.points(PointFilter()) if p.measurement == RSS_WORKER}
        assert {cpu: (fields["packets"], fields["bytes"]) for cpu, fields in points.items()} == {
            str(cpu): (count, count * size) for cpu, count in expected.items()}
        exposed = {sample.labels["cpu"]: sample.value
                   for family in text_string_to_metric_families(exposition(poll.points(PointFilter()), load={}).decode())
                   for sample in family.samples if sample.name == "dpp_rss_worker_packets_total"}
        assert exposed == {str(cpu): count for cpu, count in expected.items()}
    finally:
        service.close()
