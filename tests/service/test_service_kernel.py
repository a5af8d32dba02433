"""The service on the real data plane (root, libdpp): a restart reconciles the pinned maps with the
store, killing the service (kill -9) does not stop forwarding and restarting it does not either,
and parallel clients leave store and maps identical."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.core.config import InterfaceSetting
from netapp.dataplane import binding
from netapp.dataplane.binding import rule_key, rule_value
from netapp.intents.compiler import compile_intent
from netapp.steering.models import CpuSpec
from netapp.service.contract import IntentRecord
from netapp.service.service import NetAppService
from netapp.service.store import Store
from netapp.testbed import netns
from netapp.testbed.traffic import Sender
from tests.utils.kernel import require_kernel
from tests.utils.maps import assert_maps_hold_the_store, second_handle
from tests.utils.service import ADMIN, ALICE, BOB, intent, pinned_instance, slice_spec
from tests.utils.service import started_on as started

REPO = Path(__file__).resolve().parents[2]
PAYLOAD = b"x" * 32


@pytest.fixture
def instance() -> Iterator[str]:
    yield from pinned_instance("svc")


def test_given_a_restart_then_stale_map_entries_go_missing_ones_come_and_counters_stay(tmp_path, instance):
    service = started(tmp_path, instance)
    for name, port in (("a", 1000), ("b", 2000), ("c", 3000)):
        service.create_intent(ALICE, intent(name, port, action={"type": "pass"}))
    service.put_slice(ALICE, slice_spec("embb", cpus=[]))
    frame = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=9, dport=1000))
    service.dataplane.test_run(frame)
    assert service.dataplane.rule_stats()["alice/a"][0] == 1
    service.close()
    # While the service is down, the store loses b and gains d; the maps gain a rule nobody wants.
    store = Store.open(tmp_path / "netapp.db")
    with store.transaction():
        store.delete_intent("alice", "b")
        now = datetime.now(timezone.utc)
        store.insert_intent(
            IntentRecord(intent=intent("d", 4000), tenant="alice", created_at=now, updated_at=now)
        )
    store.close()
    stray = compile_intent(intent("stray", 9000), {}, "ghost/stray")
    handle = second_handle(instance)
    handle.rules_upsert([rule_key(stray)], [rule_value(stray, slot=99)])
    handle.close()

    again = started(tmp_path, instance)

    assert_maps_hold_the_store(again, instance)
    assert again.dataplane.rule_stats()["alice/a"][0] == 1  # the same slot, its count kept
    assert again.health().ready
    again.close()


def test_parallel_clients_leave_store_and_maps_identical(tmp_path, instance):
    service = started(tmp_path, instance)
    errors: list[BaseException] = []

    def client(n: int) -> None:
        who = ALICE if n % 2 else BOB
        try:
            for k in range(25):
                name = f"c{n}-{k}"
                service.create_intent(who, intent(name, 10_000 + n * 100 + k))
                if k % 2:
                    service.delete_intent(who, name)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(service.store.all_intents()) == 8 * 13
    assert_maps_hold_the_store(service, instance)
    service.close()


# --- kill -9 ----------------------------------------------------------------------------------------

SERVICE_PROCESS = """
import json, sys, time
from netapp.core.config import Settings
from netapp.service.contract import Principal, Scope
from netapp.intents.models import Intent
from netapp.service.service import NetAppService

service = NetAppService(Settings())
service.start()
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
TenantService(lambda: service.store).put_tenant(Principal("ops", frozenset({Scope.ADMIN})), "alice", TenantSpec(site=True))
who = Principal("alice", frozenset({Scope.INTENTS_WRITE}))
intent = {"id": "video", "match": {"protocol": "udp", "dst_port": 5004}, "action": {"type": "pass"}}
service.create_intent(who, Intent.model_validate(intent))
status = service.dataplane_status(Principal("ops", frozenset({Scope.ADMIN})))
print(json.dumps({"program_id": status["program_id"], "interfaces": status["interfaces"]}), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("priority", [None, 7])
def test_the_cpumap_thread_of_each_entry_gets_the_configured_priority(tmp_path, instance, priority):
    expected = ("other", 0) if priority is None else ("fifo", priority)
    service = started(tmp_path, instance, cpumap_priority=priority)
    try:
        service.put_cpu(ADMIN, CpuSpec(cpu=0))
        first = cpumap_thread(service)
        # Another queue size is a new entry, so a new thread: it must be raised again.
        service.put_cpu(ADMIN, CpuSpec(cpu=0, queue_size=4096))
        second = cpumap_thread(service)
    finally:
        service.close()
    assert second["pid"] != first["pid"]
    for thread in (first, second):
        assert (thread["policy"], thread["priority"]) == expected, thread

    restarted = started(tmp_path, instance, cpumap_priority=priority)  # the reconcile rewrites the entry
    try:
        thread = cpumap_thread(restarted)
        assert (thread["policy"], thread["priority"]) == expected, thread
    finally:
        restarted.close()


def test_meter_window_ms_sets_each_cpus_budget_also_on_an_instance_pinned_before(tmp_path, instance):
    service = started(tmp_path, instance)
    try:
        service.put_cpu(ADMIN, CpuSpec(cpu=0, capacity_pps=300))
        assert service.dataplane.cpu_state(0)["window_budget"] == 1  # the library's 1 ms: at least 1
    finally:
        service.close()
    for window_ms, budget in ((50, 15), (20, 6)):
        restarted = started(tmp_path, instance, meter_window_ms=window_ms)
        try:
            assert restarted.dataplane.config()["meter_window_ns"] == window_ms * 1_000_000
            assert restarted.dataplane.cpu_state(0)["window_budget"] == budget  # 300 pkt/s x window
        finally:
            restarted.close()


def test_a_deleted_cpu_leaves_the_maps_its_steers_fall_back_and_a_restart_keeps_it_out(tmp_path, instance):
    frame = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=9, dport=5004) / PAYLOAD)
    service = started(tmp_path, instance)
    try:
        service.put_cpu(ADMIN, CpuSpec(cpu=0, capacity_pps=1000))
        service.create_intent(ALICE, intent("video", 5004, action={"type": "steer", "cpu": 0}))
        steered = service.dataplane.test_run(frame)
        assert (steered.verdict, unavailable(service)) == ("REDIRECT", 0)  # to CPU 0's CPUMAP queue

        service.delete_cpu(ADMIN, 0)

        assert service.list_cpus(ADMIN) == []
        assert service.dataplane.cpu_state(0) == {
            "enabled": 0, "overloaded": 0, "capacity_pps": 0, "window_budget": 0
        }
        assert service.dataplane.test_run(frame).verdict == "PASS"  # the default verdict: no alternative
        assert unavailable(service) == 1
    finally:
        service.close()

    restarted = started(tmp_path, instance)
    try:
        assert restarted.list_cpus(ADMIN) == [] and restarted.dataplane.cpu_state(0)["enabled"] == 0
        assert restarted.dataplane.test_run(frame).verdict == "PASS"
        assert unavailable(restarted) == 2  # the pinned counters carry over
    finally:
        restarted.close()


def unavailable(service: NetAppService) -> int:
    """Packets counted under the reason cpu_unavailable."""
    return service.dataplane.reason_stats()["cpu_unavailable"][0]


def cpumap_thread(service: NetAppService) -> dict:
    """The CPU's thread as the status reports it, checked against the kernel's word at once: once
    the entry is written again, the kernel stops this thread a grace period later."""
    (view,) = service.list_cpus(ADMIN)
    thread = view["thread"]
    assert thread is not None and "problem" not in thread, view
    pid = thread["pid"]
    name = (Path("/proc") / str(pid) / "comm").read_text().strip()
    assert name.startswith("cpumap/0/map:"), name
    policy = "fifo" if os.sched_getscheduler(pid) == os.SCHED_FIFO else "other"
    assert (policy, os.sched_getparam(pid).sched_priority) == (thread["policy"], thread["priority"]), thread
    return thread


@pytest.fixture
def namespace() -> Iterator[str]:
    """A namespace with a veth pair: v0 (the NetApp's) and v1 (where frames come from)."""
    require_kernel()
    name = f"svc-{secrets.token_hex(3)}"
    netns.add_namespace(name)
    try:
        netns.add_veth(name, "v0", name, "v1")
        netns.configure(name, "v0", "02:00:00:00:99:01", "10.99.0.1/24")
        netns.configure(name, "v1", "02:00:00:00:99:02", "10.99.0.2/24")
        yield name
    finally:
        netns.delete_namespace(name)


def video_packets(handle: binding.DppHandle) -> int:
    (rule,) = [rule for _, rule in handle.rules_dump()]
    return handle.stats_rules(rule.slot, 1)[0][0]


def send_video(namespace: str, count: int) -> None:
    frame = bytes(
        Ether(src="02:00:00:00:99:02", dst="02:00:00:00:99:01")
        / IP(src="10.99.0.2", dst="10.99.0.1")
        / UDP(sport=40000, dport=5004)
        / PAYLOAD
    )
    sender = Sender(namespace, "v1")
    try:
        sender.send([frame], rounds=count)
    finally:
        sender.close()


def wait_for_packets(instance: str, expected: int, timeout: float = 30.0) -> int:
    """The video intent's packets once `expected` are counted (generous: returns as soon as they are)
    or the timeout passed."""
    deadline = time.monotonic() + timeout
    while True:
        handle = second_handle(instance)
        try:
            seen = video_packets(handle)
        finally:
            handle.close()
        if seen >= expected or time.monotonic() > deadline:
            return seen
        time.sleep(0.02)


def xdp_program_of(namespace: str, ifname: str) -> int:
    (link,) = json.loads(netns.run(["ip", "-j", "link", "show", ifname], netns=namespace))
    return link.get("xdp", {}).get("prog", {}).get("id", 0)


def test_given_the_service_killed_then_forwarding_goes_on_and_a_restart_takes_over(
    tmp_path, instance, namespace
):
    interfaces = [InterfaceSetting(name="v0", mode="native", netns=namespace)]
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "NETAPP_STATE_DIR": str(tmp_path),
        "NETAPP_INSTANCE": instance,
        "NETAPP_MAX_RULES": "4096",
        "NETAPP_AUTH_DISABLED": "true",
        "NETAPP_INTERFACES": json.dumps([setting.model_dump() for setting in interfaces]),
    }
    process = subprocess.Popen(
        [sys.executable, "-c", SERVICE_PROCESS], env=environment, stdout=subprocess.PIPE, text=True
    )
    try:
        ready = json.loads(process.stdout.readline())
        assert ready["interfaces"][0]["attached"]
        send_video(namespace, 5)
        assert wait_for_packets(instance, 5) == 5
    finally:
        process.kill()  # SIGKILL: no cleanup of any kind
        process.wait()
        process.stdout.close()

    assert xdp_program_of(namespace, "v0") == ready["program_id"]
    send_video(namespace, 5)
    assert wait_for_packets(instance, 10) == 10  # classified and counted with no control plane

    again = started(tmp_path, instance, interfaces=interfaces)
    try:
        assert again.health().ready and again.health().checks["interface v0"] == "ok"
        assert again.dataplane_status(ALICE)["program_id"] == ready["program_id"]  # reused, not reloaded
        assert xdp_program_of(namespace, "v0") == ready["program_id"]
        send_video(namespace, 5)
        assert wait_for_packets(instance, 15) == 15
        assert again.stats(ALICE)["intents"] == [
            {"tenant": "alice", "id": "video", "packets": 15, "bytes": 15 * 74}
        ]
    finally:
        again.close()
