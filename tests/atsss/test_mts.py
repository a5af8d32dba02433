"""MEC 015 Multi-access Traffic Steering (/mts/v1) served by uvicorn over ATSSS's service on the
pinned pipeline's maps, checked against ETSI's own document (TrafficSteeringApi.json of GS MEC 015
v2.1.1, in ../shared/specs beside the repository; skipped with the reason when it is not there),
not against our exported one: answers validate against ETSI's schemas (jsonschema); an MTS session
changes the scheduler of its UE's session in the kernel's map (mtsMode 1 -> smallest delay, 2 ->
weighted, 3 -> redundant, deleted -> the session's own mode); what the node cannot serve is a ProblemDetails naming
ETSI's field; and schemathesis, with ETSI's document as the schema, runs the MTS operations against
the server as a tenant: no 5xx, every answer of a status, media type and body ETSI's document allows."""

from __future__ import annotations

import errno
import json
import logging
from datetime import datetime, timezone
from functools import lru_cache
from ipaddress import ip_address
from pathlib import Path as FilePath
from typing import Any, Iterator

import jsonschema
import pytest
import schemathesis
from hypothesis import strategies as st
from schemathesis.checks import positive_data_acceptance

from netapp.atsss.abi import Mode, SessionFlags
from netapp.atsss.qos_watch import LOSS_WEIGHT, QosWatch
from netapp.atsss.routes import get_atsss
from netapp.atsss.service import Atsss
from netapp.atsss.telemetry import AtsssPoints
from netapp.atsss.index import SessionIndex
from netapp.atsss.table import AtsssMaps, session_key
from netapp.core.config import Settings
from netapp.dataplane.errors import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.service.function_rules import FunctionRules
from netapp.service.state import ServiceState
from netapp.telemetry.poll import ATSSS_QOS
from tests.api import conftest as api
from tests.api.conftest import token_of
from tests.api.openapi_run import examples
from tests.api.problems import assert_problem, invalid_param
from tests.atsss.atsss import PathSpec
from tests.atsss.uplink import ACK, RECEIVED, ack_vector, mp_seq_option, uplink_frame
from tests.utils.kernel import require_kernel
from tests.utils.maps import pinned_instance
from tests.utils.mec import etsi_examples, etsi_timeout

admin, api_app, client_for, server, service, tenant_a, tenant_b, tokens_path = (
    api.admin, api.api_app, api.client_for, api.server, api.service, api.tenant_a, api.tenant_b, api.tokens_path)

pytestmark = pytest.mark.slow

MTS_SPEC = (FilePath(__file__).resolve().parents[3] / "shared" / "specs" / "mec015-v2.1.1-etsi-forge"
            / "TrafficSteeringApi.json")
BASE = "/mts/v1"
STREAM = "/api/v1/telemetry/stream"
EXAMPLES_PER_OPERATION = etsi_examples(60)  # six operations: about half a minute on an idle machine
UE, OTHER_UE = "10.60.0.5", "10.70.0.5"
# tenant-a's access interfaces: where redundant copies leave
GRANTS = {"tenant-a": [{"dst": "10.60.0.0/24"}, *({"interface": f"acc{n}", "dst": "10.60.0.0/24"} for n in range(2))],
          "tenant-b": [{"dst": "10.70.0.0/24"}]}


@lru_cache(maxsize=1)
def etsi_document() -> dict[str, Any]:
    if not MTS_SPEC.exists():
        pytest.skip(f"ETSI's MEC 015 document is not beside the repository ({MTS_SPEC}): nothing to check against")
    return json.loads(MTS_SPEC.read_text())


def etsi_validator(path: str, method: str, status: str = "200") -> jsonschema.Draft202012Validator:
    """A validator of an operation's answer, its $refs resolved in ETSI's document (OpenAPI 3.1)."""
    operation = etsi_document()["paths"][path][method]
    schema = operation["responses"][status]["content"]["application/json"]["schema"]
    return jsonschema.Draft202012Validator({**schema, "components": etsi_document()["components"]})


def path(n: int, access: str) -> dict[str, Any]:
    return {"access": access, "local": f"192.0.2.{n}", "peer": f"198.51.100.{n}", "local_port": 5000 + n,
            "peer_port": 6000 + n, "source_mac": "02:00:00:00:aa:01", "next_hop_mac": "02:00:00:00:bb:01"}


def mts_session(ue: str = UE, mode: int = 1, **overrides: Any) -> dict[str, Any]:
    return {"appInsId": "app-1", "requestType": 1, "flowFilter": [{"dstIp": ue}], "qosD": {}, "mtsMode": mode,
            "trafficDirection": "00", **overrides}


@pytest.fixture(scope="module")
def instance() -> Iterator[str]:
    require_kernel()
    with pinned_instance("mts") as name:
        yield name


@pytest.fixture
def node(instance, api_app, admin, tenant_a, node_ns) -> Iterator[Dataplane]:
    """ATSSS over the pinned pipeline's maps, the tenants granted their UEs, tenant-a's UE with a
    round-robin session (a 3GPP path, then a non-3GPP one)."""
    dataplane = Dataplane.open(instance=instance)
    rules = FunctionRules(ServiceState(Settings(auth_disabled=True), dataplane, None, lambda: datetime.now(timezone.utc)),
                          "atsss")  # the service's rule machinery, for MTS sessions' flow filters
    atsss = Atsss.start(api_app.state.tenants.store, dataplane.table, netns=node_ns, rules=rules)
    api_app.dependency_overrides[get_atsss] = lambda: atsss
    for tenant, traffic in GRANTS.items():
        assert admin.put(f"/api/v1/tenants/{tenant}", json={"traffic": traffic}).status_code in (200, 201)
    created = tenant_a.put("/api/v1/atsss/sessions/ue", json={
        "name": "ue", "ue": UE, "mode": "round_robin", "paths": [path(1, "3GPP"), path(2, "non-3GPP")]})
    assert created.status_code in (200, 201), created.text
    try:
        yield dataplane
    finally:
        api_app.dependency_overrides.pop(get_atsss, None)
        dataplane.close()


def kernel_mode(dataplane: Dataplane, ue: str = UE) -> Mode:
    value = SessionIndex(dataplane.table).get(session_key(ip_address(ue)))
    assert value is not None
    return Mode(value.mode)


def kernel_group(dataplane: Dataplane, ue: str = UE) -> int:
    value = SessionIndex(dataplane.table).get(session_key(ip_address(ue)))
    assert value is not None
    return value.tx_group


def clear(client: Any) -> None:
    for found in client.get(f"{BASE}/mts_sessions").json():
        assert client.delete(f"{BASE}/mts_sessions/{found['sessionId']}").status_code == 204


def test_the_capability_info_validates_and_names_the_served_modes(node, tenant_a):
    response = tenant_a.get(f"{BASE}/mts_capability_info")
    assert response.status_code == 200, response.text
    etsi_validator("/mts_capability_info", "get").validate(response.json())
    assert response.json()["mtsMode"] == [0, 1, 2, 3, 4]
    assert {access["metered"] for access in response.json()["mtsAccessInfo"]} == {0, 1}


def test_an_mts_session_sets_the_scheduler_of_its_ues_session_in_the_kernel(node, tenant_a):
    clear(tenant_a)
    assert kernel_mode(node) == Mode.ROUND_ROBIN
    created = tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(mode=1))
    assert created.status_code == 201, created.text
    mts_id = created.json()["sessionId"]
    assert created.headers["location"] == f"{BASE}/mts_sessions/{mts_id}"
    assert kernel_mode(node) == Mode.SMALLEST_DELAY
    session = tenant_a.get("/api/v1/atsss/sessions/ue").json()
    assert (session["mode"], session["effective_mode"], session["mts_session"]) == ("round_robin", "smallest_delay",
                                                                                    mts_id)
    replaced = tenant_a.put(f"{BASE}/mts_sessions/{mts_id}", json=mts_session(mode=2))
    assert replaced.status_code == 200 and kernel_mode(node) == Mode.WEIGHTED, replaced.text
    listed, one = tenant_a.get(f"{BASE}/mts_sessions"), tenant_a.get(f"{BASE}/mts_sessions/{mts_id}")
    etsi_validator("/mts_sessions", "post", "201").validate(created.json())
    etsi_validator("/mts_sessions/{sessionId}", "put").validate(replaced.json())
    etsi_validator("/mts_sessions", "get").validate(listed.json())
    etsi_validator("/mts_sessions/{sessionId}", "get").validate(one.json())
    assert [found["sessionId"] for found in listed.json()] == [mts_id] and one.json()["mtsMode"] == 2
    assert "timeStamp" in one.json() and "sessionId" not in tenant_a.get(
        f"{BASE}/mts_sessions", params={"session_id": "another"}).json()
    problem = assert_problem(tenant_a.delete("/api/v1/atsss/sessions/ue"), 409)
    assert mts_id in problem["detail"]
    assert tenant_a.delete(f"{BASE}/mts_sessions/{mts_id}").status_code == 204
    assert kernel_mode(node) == Mode.ROUND_ROBIN, "the session's own mode again"
    assert_problem(tenant_a.get(f"{BASE}/mts_sessions/{mts_id}"), 404)


@pytest.mark.parametrize("body, field", [
    (mts_session(mode=3), "mtsMode"),  # redundancy: the session's paths name no interface
    (mts_session(mode=4, qosD={"maxLatency": 100}), "qosD.maxLatency"),  # no path's RTT known
    (mts_session(mode=4), "qosD"),  # no requirement
    (mts_session(mode=4, qosD={"maxJitter": 10}), "qosD.maxJitter"),
    (mts_session(mode=4, qosD={"minTpt": 1000, "priority": 2}), "qosD.priority"),  # one scheduler each
    (mts_session(mode=4, qosD={"maxLoss": 3}), "qosD.maxLoss"),  # redundancy: the paths name no interface
    (mts_session(mode=0), "mtsMode"),  # low cost: the session puts its 3GPP path first
    (mts_session(mode=9), "mtsMode"),
    (mts_session(flowFilter=[{"dstIp": UE, "dstPort": [443]}]), "flowFilter[0].dstPort"),  # ports need a protocol
    (mts_session(flowFilter=[{"dstIp": UE, "protocol": 1, "dstPort": [8]}]), "flowFilter[0].dstPort"),  # ICMP's
    (mts_session(flowFilter=[{"dstIp": UE, "protocol": 6, "sourcePort": list(range(1, 5)),
                              "dstPort": list(range(1, 6))}]), "flowFilter[0].dstPort"),  # 20 rules
    (mts_session(flowFilter=[{"dstIp": UE, "flowlabel": 7}]), "flowFilter[0].flowlabel"),  # not in the key
    (mts_session(flowFilter=[{"dstIp": UE, "sourceIp": "2001:db8::9"}]), "flowFilter[0].sourceIp"),  # IPv6, UE IPv4
    (mts_session(flowFilter=[{"dstIp": UE, "dscp": 64}]), "flowFilter[0].dscp"),
    (mts_session(flowFilter=[{"dstIp": UE, "protocol": 256}]), "flowFilter[0].protocol"),
    (mts_session(flowFilter=[{"dstIp": "10.60.0.0/24"}]), "flowFilter[0].dstIp"),
    (mts_session(flowFilter=[{"dstIp": UE, "protocol": 6}, {"protocol": 17}]), "flowFilter[1].dstIp"),
    (mts_session(flowFilter=[{"dstIp": UE}, {"dstIp": "10.60.0.6"}]), "flowFilter[1].dstIp"),
    (mts_session(flowFilter=[{"dstIp": UE}, {"dstIp": UE, "protocol": 17}]), "flowFilter[0]"),  # whole and flows
    (mts_session(ue="10.60.0.99"), "flowFilter[0].dstIp"),  # no ATSSS session there
    (mts_session(ue=OTHER_UE), "flowFilter[0].dstIp"),  # tenant-b's UE
    (mts_session(flowFilter=[{"dstIp": OTHER_UE, "protocol": 17}]), "flowFilter[0].dstIp"),  # flows of it too
    (mts_session(trafficDirection="01"), "trafficDirection"),
    (mts_session(requestType=0), "requestType"),
])  # fmt: skip
def test_what_the_node_cannot_serve_is_a_problem_details_naming_etsis_field(node, tenant_a, body, field):
    clear(tenant_a)
    problem = assert_problem(tenant_a.post(f"{BASE}/mts_sessions", json=body), 400)
    assert invalid_param(problem)["name"] == field
    assert tenant_a.get(f"{BASE}/mts_sessions").json() == [] and kernel_mode(node) == Mode.ROUND_ROBIN


def kernel_flags(dataplane: Dataplane, ue: str = UE) -> int:
    value = SessionIndex(dataplane.table).get(session_key(ip_address(ue)))
    assert value is not None
    return value.flags


VIDEO = {"dstIp": UE, "sourceIp": "203.0.113.10", "sourcePort": [5000], "protocol": 17}


def test_mts_sessions_with_flow_filters_steer_flows_of_the_ue_beside_one_that_steers_the_rest(node, tenant_a,
                                                                                             tenant_b):
    """Two sessions select flows of the UE (their modes in the session's mts_flows; the frames:
    tests/atsss/test_flows.py), one without filters sets the mode of the rest; an exact duplicate
    of another's filter is refused naming it, as is tenant-b's filter on tenant-a's UE; the ATSSS
    session cannot go while any steers it; the last one gone, the UE's frames are looked up no more."""
    clear(tenant_a)
    video = tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(mode=1, flowFilter=[VIDEO]))
    web = tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(mode=2, flowFilter=[
        {"dstIp": UE, "protocol": 6, "dstPort": [443, 8443]}, {"dstIp": UE, "protocol": 17, "dstPort": [443]}]))
    rest = tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(mode=1))
    assert (video.status_code, web.status_code, rest.status_code) == (201, 201, 201), (video.text, web.text, rest.text)
    etsi_validator("/mts_sessions", "post", "201").validate(web.json())
    assert web.json()["flowFilter"][0]["dstPort"] == [443, 8443]
    session = tenant_a.get("/api/v1/atsss/sessions/ue").json()
    assert session["mts_flows"] == {video.json()["sessionId"]: "smallest_delay", web.json()["sessionId"]: "weighted"}
    assert (session["effective_mode"], session["mts_session"]) == ("smallest_delay", rest.json()["sessionId"])
    assert kernel_flags(node) & SessionFlags.FLOW_RULES and kernel_mode(node) == Mode.SMALLEST_DELAY

    duplicate = assert_problem(tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(mode=2, flowFilter=[VIDEO])), 400)
    assert invalid_param(duplicate)["name"] == "flowFilter[0]" and video.json()["sessionId"] in duplicate["detail"]
    theirs = assert_problem(tenant_b.post(f"{BASE}/mts_sessions", json=mts_session(mode=2, flowFilter=[
        {**VIDEO, "sourcePort": [5001]}])), 400)
    assert invalid_param(theirs)["name"] == "flowFilter[0].dstIp"
    assert assert_problem(tenant_a.delete("/api/v1/atsss/sessions/ue"), 409)

    clear(tenant_a)
    assert not kernel_flags(node) & SessionFlags.FLOW_RULES and kernel_mode(node) == Mode.ROUND_ROBIN
    assert tenant_a.get("/api/v1/atsss/sessions/ue").json()["mts_flows"] == {}


def test_a_flow_state_the_map_refuses_to_zero_is_a_503_naming_mtsmode_and_nothing_is_stored(node, tenant_a,
                                                                                              monkeypatch):
    """A weighted session with flow filters is given a scheduler state, zeroed in the map before its
    rules name it: the map refusing that write is the data plane's 503, as any refused ATSSS write."""
    clear(tenant_a)

    def refuse(maps: AtsssMaps, slots: list[int]) -> None:
        raise DataplaneError(errno.EIO, "dpp_table_update")

    monkeypatch.setattr(AtsssMaps, "reset_flow_states", refuse)
    refused = assert_problem(tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(mode=2, flowFilter=[VIDEO])), 503)

    assert invalid_param(refused)["name"] == "mtsMode" and "dpp_table_update" in refused["detail"]
    assert tenant_a.get(f"{BASE}/mts_sessions").json() == []
    assert not kernel_flags(node) & SessionFlags.FLOW_RULES


def test_a_put_turns_a_sessions_flows_into_the_whole_downlink_and_back(node, tenant_a):
    clear(tenant_a)
    created = tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(mode=1, flowFilter=[VIDEO]))
    mts_id = created.json()["sessionId"]
    whole = tenant_a.put(f"{BASE}/mts_sessions/{mts_id}", json=mts_session(mode=2))
    assert whole.status_code == 200, whole.text
    assert (kernel_mode(node), kernel_flags(node) & SessionFlags.FLOW_RULES) == (Mode.WEIGHTED, 0)
    flows = tenant_a.put(f"{BASE}/mts_sessions/{mts_id}", json=mts_session(mode=1, flowFilter=[VIDEO]))
    assert flows.status_code == 200, flows.text
    assert kernel_mode(node) == Mode.ROUND_ROBIN and kernel_flags(node) & SessionFlags.FLOW_RULES
    clear(tenant_a)


def test_low_cost_is_served_when_the_unmetered_path_comes_first(node, tenant_a):
    clear(tenant_a)
    reordered = tenant_a.put("/api/v1/atsss/sessions/ue", json={
        "name": "ue", "ue": UE, "mode": "round_robin", "paths": [path(2, "non-3GPP"), path(1, "3GPP")]})
    assert reordered.status_code == 200, reordered.text
    assert tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(mode=0)).status_code == 201
    assert kernel_mode(node) == Mode.ACTIVE_STANDBY
    clear(tenant_a)


def test_redundancy_runs_the_redundant_scheduler_when_every_path_names_its_interface(node, tenant_a):
    clear(tenant_a)
    refused = assert_problem(tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(mode=3)), 400)
    assert invalid_param(refused)["name"] == "mtsMode" and "paths[0].interface" in refused["detail"], refused
    with_interfaces = [{**path(1, "3GPP"), "interface": "acc0"}, {**path(2, "non-3GPP"), "interface": "acc1"}]
    assert tenant_a.put("/api/v1/atsss/sessions/ue", json={
        "name": "ue", "ue": UE, "mode": "round_robin", "paths": with_interfaces}).status_code == 200
    # another redundant session sends its copies out of the same interfaces crossed: a group of its own
    crossed = [{**path(3, "3GPP"), "interface": "acc1"}, {**path(4, "non-3GPP"), "interface": "acc0"}]
    assert tenant_a.put("/api/v1/atsss/sessions/ue6", json={
        "name": "ue6", "ue": "10.60.0.6", "mode": "redundant", "paths": crossed}).status_code == 201
    created = tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(mode=3))
    assert created.status_code == 201, created.text
    etsi_validator("/mts_sessions", "post", "201").validate(created.json())
    assert kernel_mode(node) == Mode.REDUNDANT
    assert kernel_group(node) != kernel_group(node, "10.60.0.6"), "each set of ports its group"
    assert tenant_a.delete("/api/v1/atsss/sessions/ue6").status_code == 204
    assert tenant_a.get("/api/v1/atsss/sessions/ue").json()["effective_mode"] == "redundant"
    without = [{**path(1, "3GPP"), "interface": "acc0"}, path(2, "non-3GPP")]
    problem = assert_problem(tenant_a.put("/api/v1/atsss/sessions/ue", json={
        "name": "ue", "ue": UE, "mode": "round_robin", "paths": without}), 400)
    assert invalid_param(problem)["name"] == "paths[1].interface", "the MTS session's mode needs it"
    shared = [{**path(1, "3GPP"), "interface": "acc0"}, {**path(2, "non-3GPP"), "interface": "acc0"}]
    problem = assert_problem(tenant_a.put("/api/v1/atsss/sessions/ue", json={
        "name": "ue", "ue": UE, "mode": "round_robin", "paths": shared}), 400)
    assert invalid_param(problem)["name"] == "paths[1].interface" and "own interface" in problem["detail"], problem
    clear(tenant_a)
    assert kernel_mode(node) == Mode.ROUND_ROBIN


def feed_rtts(client: Any, *rtts_us: int) -> None:
    """The paths' RTTs, as a monitoring module feeds them."""
    patch = {"paths": [{"index": index, "rtt_us": rtt} for index, rtt in enumerate(rtts_us)]}
    assert client.patch("/api/v1/atsss/sessions/ue", json=patch).status_code == 200


@pytest.mark.parametrize("qos, mode", [
    ({"minTpt": 50_000}, Mode.WEIGHTED),
    ({"priority": 3}, Mode.PRIORITY),
    ({"maxLatency": 1_000_000}, Mode.SMALLEST_DELAY),  # 10 ms one way: the 20 ms RTT path meets it
])  # fmt: skip
def test_qos_runs_the_scheduler_its_requirement_asks(node, tenant_a, qos, mode):
    clear(tenant_a)
    feed_rtts(tenant_a, 40_000, 20_000)
    created = tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(mode=4, qosD=qos))
    assert created.status_code == 201, created.text
    etsi_validator("/mts_sessions", "post", "201").validate(created.json())
    assert kernel_mode(node) == mode
    clear(tenant_a)


def put_with_interfaces(client: Any) -> None:
    """tenant-a's UE session, its paths naming their interfaces (redundancy's) and RTTs (40, 20 ms)."""
    with_interfaces = [{**path(1, "3GPP"), "interface": "acc0", "rtt_us": 40_000},
                       {**path(2, "non-3GPP"), "interface": "acc1", "rtt_us": 20_000}]
    assert client.put("/api/v1/atsss/sessions/ue", json={
        "name": "ue", "ue": UE, "mode": "round_robin", "paths": with_interfaces}).status_code == 200


def test_qos_latency_is_refused_when_no_path_meets_it_and_loss_runs_redundancy(node, tenant_a):
    clear(tenant_a)
    feed_rtts(tenant_a, 40_000, 20_000)  # one way: 10 ms on the faster path
    refused = assert_problem(tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(
        mode=4, qosD={"maxLatency": 999_999})), 400)
    assert invalid_param(refused)["name"] == "qosD.maxLatency" and "1000000" in refused["detail"], refused
    put_with_interfaces(tenant_a)
    created = tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(
        mode=4, qosD={"maxLoss": 4, "maxLatency": 1_000_000}))
    assert created.status_code == 201, created.text
    assert kernel_mode(node) == Mode.REDUNDANT
    clear(tenant_a)


def qos_status(client: Any, mts_id: str) -> tuple[str, str]:
    """(qosStatus, qosStatusReason or "") of the MTS session, read back as one and in the list."""
    one = client.get(f"{BASE}/mts_sessions/{mts_id}")
    assert one.status_code == 200, one.text
    etsi_validator("/mts_sessions/{sessionId}", "get").validate(one.json())
    listed = [found for found in client.get(f"{BASE}/mts_sessions").json() if found["sessionId"] == mts_id]
    assert [(found["qosStatus"], found.get("qosStatusReason")) for found in listed] == [
        (one.json()["qosStatus"], one.json().get("qosStatusReason"))]
    return one.json()["qosStatus"], one.json().get("qosStatusReason", "")


def feed(client: Any, **paths: dict[str, Any]) -> None:
    """Paths' state as a monitoring module feeds it: path0={...}, path1={...}."""
    patch = {"paths": [{"index": int(name[-1]), **state} for name, state in paths.items()]}
    assert client.patch("/api/v1/atsss/sessions/ue", json=patch).status_code == 200


def test_a_qos_sessions_status_follows_the_rtt_and_loss_fed_through_the_api(node, tenant_a):
    """maxLoss 2 (at most 1%) and maxLatency 10 ms one way, served by redundancy over two paths:
    the status is checked again over the paths' state at each read, the scheduler stays."""
    clear(tenant_a)
    put_with_interfaces(tenant_a)
    created = tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(
        mode=4, qosD={"maxLoss": 2, "maxLatency": 1_000_000}))
    assert created.status_code == 201, created.text
    mts_id = created.json()["sessionId"]
    assert created.json()["qosStatus"] == "UNVERIFIED" and "qosD.maxLoss" in created.json()["qosStatusReason"]

    feed(tenant_a, path0={"loss": 0.05}, path1={"loss": 0.1})  # together 0.005
    assert qos_status(tenant_a, mts_id) == ("MET", "")
    feed(tenant_a, path1={"loss": 0.5})  # together 0.025
    status, reason = qos_status(tenant_a, mts_id)
    assert status == "NOT_MET" and reason.startswith("qosD.maxLoss") and "0.025" in reason, reason
    feed(tenant_a, path1={"loss": 0.1}, path0={"loss": 0.02})
    assert qos_status(tenant_a, mts_id) == ("MET", "")
    feed(tenant_a, path1={"rtt_us": 3_000_000})  # the fastest now 40 ms: 20 ms one way
    status, reason = qos_status(tenant_a, mts_id)
    assert status == "NOT_MET" and reason.startswith("qosD.maxLatency") and "2000000" in reason, reason
    feed(tenant_a, path0={"up": False}, path1={"rtt_us": 20_000})  # one path up, 10% loss alone
    status, reason = qos_status(tenant_a, mts_id)
    assert status == "NOT_MET" and reason.startswith("qosD.maxLoss"), reason
    assert kernel_mode(node) == Mode.REDUNDANT, "redundancy stays: no other scheduler loses less"
    feed(tenant_a, path0={"up": True})
    assert qos_status(tenant_a, mts_id) == ("MET", "")
    clear(tenant_a)


def send_acks(dataplane: Dataplane, n: int, acks: list[int], lost_every: int) -> None:
    """The UE's DCCP-Acks on path(n), through the pipeline's entry (BPF_PROG_TEST_RUN): each with
    an Ack Vector of the 210 numbers up to it, the multiples of `lost_every` not received."""
    spec = PathSpec(f"192.0.2.{n}", f"198.51.100.{n}", sport=5000 + n, dport=6000 + n)
    states = {number: RECEIVED for number in range(max(acks) + 1) if number % lost_every}
    for seq, ack in enumerate(acks, start=1):
        dataplane.test_run(uplink_frame(spec, b"", seq=seq, kind=ACK, ack=ack,
                                        options=mp_seq_option(seq) + ack_vector(ack, states, 210)))


def stream_events(lines: Iterator[str], polls: int) -> list[dict[str, Any]]:
    """The data of the next `polls` poll events of an open stream (keep-alives skipped)."""
    found, previous = [], ""
    while len(found) < polls:
        line = next(lines)
        if line.startswith("data: ") and previous == "event: poll":
            found.append(json.loads(line[len("data: "):]))
        previous = line
    return found


def qos_points(poll: dict[str, Any]) -> list[dict[str, Any]]:
    return [point for point in poll["points"] if point["measurement"] == ATSSS_QOS]


@pytest.fixture
def watched(node, api_app) -> Iterator[Any]:
    """The app's collector with ATSSS's paths as a source, the QoS watch behind it (as `netapp serve`
    wires them), and its event stream served; the test makes the polls."""
    telemetry = api_app.state.telemetry
    atsss = api_app.dependency_overrides[get_atsss]()
    source = AtsssPoints(atsss.readings, "edge-1", on_losses=QosWatch(atsss))
    telemetry.collector.add_source(source)
    telemetry.streams.start()
    try:
        yield telemetry.collector
    finally:
        telemetry.streams.stop()
        telemetry.collector.remove_source(source)


def test_a_qos_sessions_status_follows_the_loss_the_ues_ack_vectors_report(watched, node, tenant_a, tenant_b, caplog):
    """maxLoss 2 (at most 1%) served by redundancy over two paths, their fed losses 50% each: the
    UE's Ack Vectors run through the kernel's uplink, each telemetry poll hands each path's window
    loss to the QoS check, which averages them (LOSS_WEIGHT) and the MEC 015 view's qosStatus
    follows the averages, which win over the fed losses; a window that judged nothing keeps the
    average. Path 1 loses 5% of one window, path 2 10%, 50%, 10%, 10%: by the windows alone MET,
    NOT_MET, MET, MET; averaged with the hysteresis MET, NOT_MET, NOT_MET (0.0092: within 1% but
    not yet below 0.8%), MET. Each change is a dpp_atsss_qos point of the poll that saw it, in
    tenant-a's event stream (uvicorn) with the losses that decided it; tenant-b's stream has none."""
    clear(tenant_a)
    put_with_interfaces(tenant_a)
    created = tenant_a.post(f"{BASE}/mts_sessions", json=mts_session(mode=4, qosD={"maxLoss": 2}))
    assert created.status_code == 201, created.text
    mts_id = created.json()["sessionId"]
    feed(tenant_a, path0={"loss": 0.5}, path1={"loss": 0.5})
    averages, statuses = [], []
    with tenant_a.stream("GET", STREAM) as mine, tenant_b.stream("GET", STREAM) as theirs:
        lines, other_lines = mine.iter_lines(), theirs.iter_lines()
        assert next(lines).startswith("retry:") and next(other_lines).startswith("retry:"), "both listening"
        watched.poll_once()  # each path's first poll: no window yet
        assert qos_status(tenant_a, mts_id)[0] == "NOT_MET", "the fed losses: 0.25 together"
        send_acks(node, 1, [100], lost_every=20)  # the first Acks only mark where judging starts
        send_acks(node, 2, [100], lost_every=10)
        watched.poll_once()
        # Acks every 50 numbers (a vector reaches 64 back): 98..297 judged, 10 of 200 lost, 5%; none after
        send_acks(node, 1, [150, 200, 250, 300], lost_every=20)
        average = 0.1
        for window, (ack, lost_every) in enumerate([(300, 10), (500, 2), (700, 10), (900, 10)]):
            # the 200 numbers before ack - 3: 10%, 50%, 10%, 10% lost
            send_acks(node, 2, list(range(ack - 150, ack + 1, 50)), lost_every=lost_every)
            average = LOSS_WEIGHT / lost_every + (1 - LOSS_WEIGHT) * average if window else average
            with caplog.at_level(logging.WARNING, logger="netapp.atsss.qos_watch"):
                watched.poll_once()
            averages.append(average)
            statuses.append(qos_status(tenant_a, mts_id))
        polls, other_polls = stream_events(lines, 6), stream_events(other_lines, 6)

    assert averages == pytest.approx([0.1, 0.22, 0.184, 0.1588])
    assert [status for status, _ in statuses] == ["MET", "NOT_MET", "NOT_MET", "MET"]
    assert "0.011" in statuses[1][1] and "0.0092" in statuses[2][1] and "0.008" in statuses[2][1], statuses
    assert f"{mts_id} of tenant tenant-a: qosStatus MET -> NOT_MET" in caplog.text
    assert [len(qos_points(poll)) for poll in polls] == [0, 0, 0, 1, 0, 1], "the first check sets where it stands"
    events = [qos_points(poll)[0] for poll in (polls[3], polls[5])]
    assert [(event["tags"]["previous"], event["tags"]["status"]) for event in events] == [("MET", "NOT_MET"),
                                                                                          ("NOT_MET", "MET")]
    assert events[0]["tags"] == {"node": "edge-1", "tenant": "tenant-a", "mts_session": mts_id, "session": "ue",
                                 "app": "app-1", "previous": "MET", "status": "NOT_MET"}
    # approx: a window's loss is the ratio of two rates over the poll's interval (the app's collector's clock)
    assert events[0]["fields"] == {"paths_up": 2, "loss_0": pytest.approx(0.05), "loss_1": pytest.approx(averages[1])}
    assert events[1]["fields"] == {"paths_up": 2, "loss_0": pytest.approx(0.05), "loss_1": pytest.approx(averages[3])}
    assert events[0]["time"] == polls[3]["time"]
    assert [qos_points(poll) for poll in other_polls] == [[]] * 6, "tenant-b sees no session of tenant-a"
    assert kernel_mode(node) == Mode.REDUNDANT, "redundancy stays: no other scheduler loses less"
    clear(tenant_a)


def test_another_tenant_gets_404s_and_changes_nothing(node, tenant_a, tenant_b):
    clear(tenant_a)
    mts_id = tenant_a.post(f"{BASE}/mts_sessions", json=mts_session()).json()["sessionId"]
    assert tenant_b.get(f"{BASE}/mts_sessions").json() == []
    assert_problem(tenant_b.get(f"{BASE}/mts_sessions/{mts_id}"), 404)
    assert_problem(tenant_b.put(f"{BASE}/mts_sessions/{mts_id}", json=mts_session(mode=2)), 404)
    assert_problem(tenant_b.delete(f"{BASE}/mts_sessions/{mts_id}"), 404)
    assert kernel_mode(node) == Mode.SMALLEST_DELAY
    clear(tenant_a)


# --- schemathesis, with ETSI's document as the schema ---------------------------------------------


def _etsi_schema() -> Any:
    return schemathesis.openapi.from_dict(json.loads(MTS_SPEC.read_text())) if MTS_SPEC.exists() else None


etsi_schema = _etsi_schema()


@st.composite
def aimed_sessions(draw: st.DrawFn) -> dict[str, Any]:
    """An MTS session the node can serve or refuses for one field, on tenant-a's UE."""
    body = mts_session(mode=draw(st.integers(0, 4)))
    extra = draw(st.sampled_from(({}, {"dstPort": [443]}, {"protocol": 17})))
    body["flowFilter"] = [{"dstIp": draw(st.sampled_from((UE, OTHER_UE))), **extra}]
    return body


if etsi_schema is not None:

    @etsi_schema.hook
    def flatmap_case(context: Any, case: Any) -> st.SearchStrategy:
        """The generated case, or one whose body is aimed at tenant-a's UE (random bodies mostly
        meet 400s); positive cases only: a negative one must stay invalid."""
        if case.meta is None or not case.meta.generation.mode.is_positive or case.method.upper() not in ("POST", "PUT"):
            return st.just(case)
        return st.one_of(st.just(case), aimed_sessions().map(lambda body: setattr(case, "body", body) or case))

    @etsi_schema.parametrize()
    @examples(EXAMPLES_PER_OPERATION)
    @pytest.mark.timeout(etsi_timeout(EXAMPLES_PER_OPERATION))
    def test_schemathesis_with_etsis_document_finds_no_5xx_and_only_conformant_answers(case, node, server):
        # A session valid by ETSI's schema may still be one the node cannot serve: its 400 is the point
        # (test_what_the_node_cannot_serve_...), so acceptance of every valid body is not a check here.
        case.call_and_validate(base_url=server.url + BASE,
                               headers={"Authorization": f"Bearer {token_of('tenant-a')}"},
                               excluded_checks=[positive_data_acceptance])

else:

    def test_schemathesis_with_etsis_document_finds_no_5xx_and_only_conformant_answers():
        pytest.skip(f"ETSI's MEC 015 document is not beside the repository ({MTS_SPEC}): nothing to run")
