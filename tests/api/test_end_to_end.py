"""End to end: a real uvicorn, the real NetApp service, its SQLite store, and the XDP program with
pinned maps in the kernel. What a REST client does must show in what the program does to packets,
seen through a second handle on the pinned instance (as another process would see it).

Needs root and libdpp (tests/utils/kernel.py: skipped outside CI, a failure under CI)."""

from __future__ import annotations

import os
import re
from ctypes import c_uint32
from typing import Iterator

import httpx
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from typer.testing import CliRunner

from bench.libbpf import map_update
from netapp.api.main import create_app
from netapp.cli.main import app as cli_app
from netapp.core.config import InterfaceSetting, Settings
from netapp.dataplane import binding
from netapp.dataplane.facade import Dataplane
from netapp.qos.abi import ClockTimer
from netapp.testbed import netns
from tests.api.conftest import token_of
from tests.api.problems import assert_problem
from tests.api.server import ServerThread
from tests.qos.test_clock_word import pipeline_word_fd, wait_for_ticks, word_reader
from tests.utils.intents import native_intent, paper_message
from tests.utils.maps import pipeline_map_fd
from tests.utils.service import grant_site, pinned_instance

INTENTS = "/api/v1/intents"
STEER_CPU = 0  # every machine has CPU 0
VETH = "dppe2e0"


@pytest.fixture(scope="module")
def instance() -> Iterator[str]:
    """A pinned instance of this module only; its pins and links go whatever happened."""
    yield from pinned_instance("api")


@pytest.fixture(scope="module")
def namespace(instance) -> Iterator[str]:
    """A namespace with a veth pair whose one end the service attaches to (generic XDP)."""
    name = f"e2e-{instance}"
    netns.add_namespace(name)
    try:
        netns.add_veth(name, VETH, name, "dppe2e1")
        for ifname in (VETH, "dppe2e1"):
            netns.run(["ip", "link", "set", ifname, "up"], netns=name)
        yield name
    finally:
        netns.delete_namespace(name)


@pytest.fixture(scope="module")
def real(instance, namespace, tokens_path, tmp_path_factory):
    """(server, service): the REST API over a started NetAppService."""
    from netapp.service.service import NetAppService

    settings = Settings(
        state_dir=tmp_path_factory.mktemp("state"),
        instance=instance,
        max_rules=4096,
        tokens_file=tokens_path,
        interfaces=[InterfaceSetting(name=VETH, mode="generic", netns=namespace)],
    )
    service = NetAppService(settings)
    service.start()
    grant_site(service, "tenant-a", "tenant-b")
    try:
        with ServerThread(create_app(settings, service)) as server:
            yield server, service
    finally:
        service.close()


@pytest.fixture(scope="module")
def observer(real, instance) -> Iterator[binding.DppHandle]:
    """Another handle on the pinned instance: what the kernel holds, not what the service says."""
    handle = binding.DppHandle.open(binding.load_libdpp(), instance)
    yield handle
    handle.close()


def client(real, name: str) -> httpx.Client:
    server, _ = real
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {token_of(name)}"}, timeout=30
    )


def verdict_of(observer: binding.DppHandle, dport: int) -> str:
    frame = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.0.0.1", dst="10.0.0.2")
    result, _ = observer.test_run(bytes(frame / UDP(sport=40000, dport=dport) / (b"x" * 32)))
    return binding.Verdict(result.verdict).name


def rule_count(observer: binding.DppHandle) -> int:
    return len(observer.rules_dump())


def test_given_the_real_service_then_it_is_ready_and_attached(real):
    with client(real, "tenant-a") as api:
        ready = api.get("/readyz")
        status = api.get("/api/v1/dataplane").json()

    assert ready.status_code == 200 and ready.json()["ready"] is True
    assert [(i["name"], i["attached"]) for i in status["interfaces"]] == [(VETH, True)]


def test_given_an_intent_created_over_rest_then_the_program_steers_its_packets_until_it_is_deleted(
    real, observer
):
    with client(real, "admin") as admin, client(real, "tenant-a") as api:
        assert admin.put(f"/api/v1/dataplane/cpus/{STEER_CPU}", json={"cpu": STEER_CPU}).status_code == 200
        body = native_intent(
            "e2e-steer",
            match={"protocol": "udp", "dst_port": 5104},
            action={"type": "steer", "cpu": STEER_CPU},
        )
        assert api.post(INTENTS, json=body).status_code == 201

        assert verdict_of(observer, 5104) == "REDIRECT"
        assert verdict_of(observer, 5105) == "PASS"
        stats = api.get("/api/v1/stats").json()
        assert {"tenant": "tenant-a", "id": "e2e-steer", "packets": 1, "bytes": 74} in stats["intents"]

        assert api.delete(f"{INTENTS}/e2e-steer").status_code == 204
        assert verdict_of(observer, 5104) == "PASS"


def test_given_a_replace_over_rest_then_the_program_follows_it(real, observer):
    with client(real, "tenant-a") as api:
        body = native_intent(
            "e2e-replace", match={"protocol": "udp", "dst_port": 5204}, action={"type": "pass"}
        )
        assert api.post(INTENTS, json=body).status_code == 201
        assert verdict_of(observer, 5204) == "PASS"

        dropped = api.put(f"{INTENTS}/e2e-replace", json={**body, "action": {"type": "drop"}})

        assert dropped.status_code == 200 and dropped.json()["revision"] == 2
        assert verdict_of(observer, 5204) == "DROP"
        api.delete(f"{INTENTS}/e2e-replace")


def test_given_a_dry_run_then_the_rules_are_reported_and_the_maps_are_untouched(real, observer):
    before = rule_count(observer)
    with client(real, "tenant-a") as api:
        body = native_intent("e2e-dry", match={"protocol": "udp", "dst_port": 5304}, action={"type": "drop"})
        report = api.post(INTENTS, params={"dry_run": True}, json=body)

    assert report.status_code == 200 and report.json()["applied"] is False
    assert [rule["action"] for rule in report.json()["rules"]] == ["drop"]
    assert rule_count(observer) == before
    assert verdict_of(observer, 5304) == "PASS"


def test_given_colliding_intents_then_the_second_is_a_409_and_the_maps_keep_the_first(real, observer):
    with client(real, "tenant-a") as api:
        first = native_intent(
            "e2e-first", match={"protocol": "udp", "dst_port": 5404}, action={"type": "drop"}
        )
        second = {**first, "id": "e2e-second", "action": {"type": "pass"}}
        assert api.post(INTENTS, json=first).status_code == 201
        before = rule_count(observer)

        assert_problem(api.post(INTENTS, json=second), 409)

        assert rule_count(observer) == before
        assert verdict_of(observer, 5404) == "DROP"
        api.delete(f"{INTENTS}/e2e-first")


def test_given_an_idempotent_retry_then_one_rule_is_installed(real, observer):
    before = rule_count(observer)
    with client(real, "tenant-a") as api:
        body = native_intent("e2e-idem", match={"protocol": "udp", "dst_port": 5504}, action={"type": "drop"})
        headers = {"Idempotency-Key": "e2e-1"}
        statuses = [api.post(INTENTS, json=body, headers=headers).status_code for _ in range(2)]

        assert statuses == [201, 200]
        assert rule_count(observer) == before + 1
        api.delete(f"{INTENTS}/e2e-idem")


def test_given_the_papers_message_over_rest_then_a_rule_is_installed_and_delete_removes_it(real, observer):
    message = paper_message()
    message.pop("Params")  # the paper's eth0 need not exist here
    before = rule_count(observer)
    with client(real, "tenant-a") as api:
        inserted = api.post(f"{INTENTS}/legacy", json=message)
        assert inserted.status_code == 201 and inserted.json()["source"] == "legacy"
        assert rule_count(observer) == before + 1

        message["Action"]["actionType"] = "DELETE"
        assert api.post(INTENTS, json=message).status_code == 204
        assert rule_count(observer) == before


def test_given_two_tenants_then_neither_sees_the_others_intent_and_the_admin_sees_both(real):
    with client(real, "tenant-a") as a, client(real, "tenant-b") as b, client(real, "admin") as admin:
        body = native_intent("e2e-mine", match={"protocol": "udp", "dst_port": 5604}, action={"type": "pass"})
        assert a.post(INTENTS, json=body).status_code == 201

        assert_problem(b.get(f"{INTENTS}/e2e-mine"), 404)
        assert_problem(b.delete(f"{INTENTS}/e2e-mine"), 404)
        assert "e2e-mine" not in [item["intent"]["id"] for item in b.get(INTENTS).json()["items"]]
        assert admin.get(f"{INTENTS}/e2e-mine", params={"tenant": "tenant-a"}).json()["tenant"] == "tenant-a"
        assert admin.get(INTENTS, params={"tenant": "tenant-a"}).json()["total"] >= 1
        assert a.delete(f"{INTENTS}/e2e-mine").status_code == 204


def test_given_a_redirect_to_a_missing_interface_then_400_names_the_field(real):
    with client(real, "tenant-a") as api:
        body = native_intent("e2e-nowhere", action={"type": "redirect", "interface": "nosuch0"})
        problem = assert_problem(api.post(INTENTS, json=body), 400)

    assert any(param["name"] == "action.interface" for param in problem["invalid-params"])


def test_given_an_admin_then_it_detaches_and_attaches_the_interface_over_rest(real):
    def attached(api: httpx.Client) -> bool:
        [view] = api.get("/api/v1/dataplane").json()["interfaces"]
        return view["attached"]

    with client(real, "admin") as admin:
        assert admin.post("/api/v1/dataplane/detach", json={"interface": VETH}).status_code == 204
        assert attached(admin) is False
        assert_problem(admin.post("/api/v1/dataplane/detach", json={"interface": VETH}), 404)

        reattached = admin.post("/api/v1/dataplane/attach", json={"interface": VETH, "mode": "generic"})

        assert reattached.status_code == 200 and reattached.json()["interface"] == VETH
        assert attached(admin) is True


@pytest.mark.parametrize("operation", ["attach", "detach"])
def test_given_an_interface_name_holding_a_nul_then_400_names_interface_and_the_attachment_stays(
    real, operation
):
    # It once reached if_nametoindex, which raises ValueError on a NUL: a 500.
    with client(real, "admin") as admin:
        response = admin.post(f"/api/v1/dataplane/{operation}", json={"interface": f"{VETH}\u0000"})
        problem = assert_problem(response, 400)
        [view] = admin.get("/api/v1/dataplane").json()["interfaces"]

    assert [param["name"] for param in problem["invalid-params"]] == ["interface"]
    assert view["attached"] is True


def test_given_offload_mode_on_a_veth_then_attach_is_a_400_naming_mode(real):
    # veth refuses offload with EINVAL, which was a 503.
    with client(real, "admin") as admin:
        assert admin.post("/api/v1/dataplane/detach", json={"interface": VETH}).status_code == 204
        try:
            response = admin.post("/api/v1/dataplane/attach", json={"interface": VETH, "mode": "offload"})
        finally:
            restored = admin.post("/api/v1/dataplane/attach", json={"interface": VETH, "mode": "generic"})

    problem = assert_problem(response, 400)
    assert [param["name"] for param in problem["invalid-params"]] == ["mode"]
    assert "try mode generic" in problem["detail"]
    assert restored.status_code == 200


def test_given_an_admin_then_a_reload_swaps_the_program_and_the_intents_stay(real):
    with client(real, "admin") as admin, client(real, "tenant-a") as api:
        body = native_intent("e2e-reload", match={"protocol": "udp", "dst_port": 5304})
        assert api.post(INTENTS, json=body).status_code == 201
        before = admin.get("/api/v1/dataplane").json()

        reloaded = admin.post("/api/v1/dataplane/reload")

        assert reloaded.status_code == 200, reloaded.text
        result = reloaded.json()
        assert result["previous_program_id"] == before["program_id"] != result["program_id"]
        assert result["interfaces"] == [VETH]
        after = admin.get("/api/v1/dataplane").json()
        assert after["program_id"] == result["program_id"]
        assert after["rules"] == before["rules"] and after["interfaces"] == before["interfaces"]
        assert api.get(f"{INTENTS}/e2e-reload").status_code == 200
        assert_problem(api.post("/api/v1/dataplane/reload"), 403)


def test_given_an_alternative_group_in_use_then_deleting_it_is_a_409(real):
    group = {"id": 5, "members": [{"mac": "02:00:00:00:00:09", "ip4": "10.0.0.9"}]}
    with client(real, "admin") as admin, client(real, "tenant-a") as api:
        assert admin.put("/api/v1/alternatives/5", json=group).status_code == 200
        body = native_intent(
            "e2e-fwd",
            match={"protocol": "udp", "dst_port": 5704},
            action={"type": "forward", "alternative": 5},
        )
        assert api.post(INTENTS, json=body).status_code == 201

        assert_problem(admin.delete("/api/v1/alternatives/5"), 409)

        assert api.delete(f"{INTENTS}/e2e-fwd").status_code == 204
        assert admin.delete("/api/v1/alternatives/5").status_code == 204


def test_given_a_slice_over_rest_then_its_intents_are_installed_and_go_with_it(real, observer):
    spec = {
        "id": "e2e-embb",
        "snssai": {"sst": 1, "sd": "00A1B2"},
        "priority_level": 10,
        "members": {"vnis": [2093], "dscp": [46]},
        "cpus": [STEER_CPU],
    }
    before = rule_count(observer)
    with client(real, "tenant-a") as api:
        created = api.put("/api/v1/slices/e2e-embb", json=spec)
        assert created.status_code == 201 and created.json()["intent_ids"]
        assert rule_count(observer) > before

        assert api.delete("/api/v1/slices/e2e-embb").status_code == 204
        assert rule_count(observer) == before


def test_given_numbers_past_what_the_store_or_the_kernel_holds_then_400_and_both_keep_theirs(real, observer):
    with client(real, "admin") as admin:
        assert admin.get(INTENTS, params={"offset": (1 << 63) - 1}).json()["items"] == []
        assert_problem(admin.get(INTENTS, params={"offset": 1 << 63}), 400)
        cpu = f"/api/v1/dataplane/cpus/{STEER_CPU}"
        assert admin.put(cpu, json={"cpu": STEER_CPU, "capacity_pps": 5}).status_code == 200
        for refused in ({"capacity_pps": (1 << 64) + 5}, {"queue_size": 16385}):
            problem = assert_problem(admin.put(cpu, json={"cpu": STEER_CPU, **refused}), 400)
            assert problem["invalid-params"][0]["name"] == next(iter(refused))
        stored = [view for view in admin.get("/api/v1/dataplane/cpus").json() if view["cpu"] == STEER_CPU]

    assert observer.cpu_get(STEER_CPU).capacity_pps == 5
    assert [view["capacity_pps"] for view in stored] == [5]


def netapp_status(real) -> list[str]:
    """`netapp status` (typer's runner) as an admin against the served NetApp: its lines; it exits 0."""
    server, _ = real
    env = {"NETAPP_URL": server.url, "NETAPP_TOKEN": token_of("admin"), "COLUMNS": "200"}
    result = CliRunner().invoke(cli_app, ["status"], env=env)
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_given_the_policers_clock_running_then_stopped_then_netapp_status_says_so(real, instance):
    """The timer's word, read by the service through libdpp and told by the API, in the CLI as
    `dppctl status` words it; the timer stopped (its map's value written over: the kernel cancels
    it), the word four ticks old is stopped; a reopen starts the timer again."""
    running = netapp_status(real)
    with Dataplane.open(instance=instance) as dp:
        word, timer = pipeline_word_fd(dp), pipeline_map_fd(dp, "dpp_clock")
    try:
        map_update(timer, c_uint32(0), ClockTimer())
        wait_for_ticks(word_reader(word)().jiffies, 4)  # two ticks make it stopped, whatever the grids' phase
        stopped = netapp_status(real)
    finally:
        os.close(word)
        os.close(timer)
        with Dataplane.open(instance=instance):
            pass  # the timer started again for the module's other tests

    assert [line for line in running if re.fullmatch(r"clock: word \d+ us old", line)], running
    assert "clock: stopped: coarse policers read the helper" in stopped, stopped
