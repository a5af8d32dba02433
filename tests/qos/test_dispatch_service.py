"""The service writes the dispatcher's maps as its settings say when it starts, a reload puts the new
worker program in the queues, and a restart with the dispatcher off undoes them (root, libdpp, a pinned instance in a namespace of its own)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Iterator

import pytest

from netapp.core import netns as entering
from netapp.dataplane import binding
from netapp.dataplane.facade import interface_index
from netapp.qos.rss_abi import MAX_RSS_IFACES
from netapp.service.service import NetAppService
from netapp.testbed import netns
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
