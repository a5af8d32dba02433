"""Every charm action against a real NetApp: `netapp serve` on loopback over the real data plane,
attached with XDP (generic) to a veth in a namespace of its own, its settings and the charm's admin
token made by the charm's workload (`netapp tokens add`, tests/charm/real_netapp.py). Each action
runs through ops.testing with the charm's workload being that one, so the charm's own client
reaches the server; the server's state is read back after each. Needs root and libdpp
(tests/utils/kernel.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from charm_config import CharmConfig
from netapp_workload import ApiError, NetApp, NetAppClient
from ops import testing

from tests.charm.conftest import CHARM_DIR, CHARMCRAFT, charm_context
from tests.charm.real_netapp import served_netapp
from tests.utils.callbacks import CallbackReceiver
from tests.utils.kernel import veth_namespace, xdp_program_on
from tests.utils.maps import pinned_instance, second_handle
from tests.utils.serve import free_port

VETH, PEER = "dppact0", "dppact1"
INTENT = {
    "id": "video",
    "match": {"protocol": "udp", "dst_port": 5004},
    "action": {"type": "steer", "cpu": 0},
}
SLICE = {"id": "embb", "snssai": {"sst": 1, "sd": "00A1B2"}, "priority_level": 10, "members": {"vnis": [1093]}}
GROUP = {"id": 5, "members": [{"mac": "02:00:00:00:00:0b", "ip4": "10.0.20.11", "interface": VETH}]}


class Served:
    """The served NetApp: its workload, the charm config it took, its namespace, its pinned instance."""

    def __init__(self, workload: NetApp, config: dict[str, Any], namespace: str, instance: str):
        self.workload = workload
        self.config = config
        self.namespace = namespace
        self.instance = instance

    @property
    def api(self) -> NetAppClient:
        """A client with the charm's token, to read the server's state."""
        return self.workload.client(CharmConfig(**_fields(self.config)))

    def get(self, path: str) -> Any:
        return self.api.request("GET", path)

    def status_of(self, path: str) -> int:
        try:
            self.api.request("GET", path)
        except ApiError as exc:
            return exc.status or 0
        return 200


def _fields(config: dict[str, Any]) -> dict[str, Any]:
    return {key.replace("-", "_"): value for key, value in config.items()}


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    config = {
        "interfaces": VETH,
        "xdp-mode": "generic",
        "api-port": free_port(),
        "metrics-port": 0,
        "callback-allow": "127.0.0.1/32",  # the test's callback receiver
    }
    root = tmp_path_factory.mktemp("machine")
    with veth_namespace("charm-act", VETH, PEER) as namespace, pinned_instance("act", namespace) as instance:
        with served_netapp(root, namespace, instance, CharmConfig(**_fields(config))) as (workload, _):
            yield Served(workload, config, namespace, instance)


@pytest.fixture
def act(served, monkeypatch):
    """Run an action through ops.testing with the served workload; its results."""
    import charm

    monkeypatch.setattr(charm, "NetApp", lambda: served.workload)
    ctx = charm_context()

    def run(name: str, **params: Any) -> dict[str, str]:
        ctx.run(ctx.on.action(name, params=params), testing.State(config=served.config))
        return ctx.action_results

    return run


def test_the_module_runs_every_action_of_the_charm():
    ran = {"add-intent", "list-intents", "remove-intent", "create-slice", "update-slice", "delete-slice"}
    ran |= {"set-alternatives", "get-stats", "attach", "detach", "subscribe-telemetry", "unsubscribe-telemetry"}
    ran |= {"set-cpu", "remove-cpu", "reload-dataplane", "apply-appd"}
    # check-openstack calls OpenStack, not the NetApp: test_check_openstack.py runs it against the
    # recorded cloud.
    assert ran | {"check-openstack"} == set(CHARMCRAFT["actions"])


def test_given_real_netapp_when_add_list_remove_intent_then_the_intent_comes_and_goes(served, act):
    added = act("add-intent", intent=json.dumps(INTENT))
    assert added["intent-id"] == "video"
    stored = served.get("/api/v1/intents/video")["intent"]
    assert {key: value for key, value in stored["match"].items() if value is not None} == INTENT["match"]
    assert stored["action"]["cpu"] == 0

    listed = act("list-intents")
    assert listed["count"] == "1"
    assert [item["intent"]["id"] for item in json.loads(listed["result"])] == ["video"]

    act("remove-intent", **{"intent-id": "video"})
    assert served.status_of("/api/v1/intents/video") == 404
    with pytest.raises(testing.ActionFailed, match="^remove-intent: the NetApp refused: 404"):
        act("remove-intent", **{"intent-id": "video"})


def test_given_real_netapp_when_slice_created_replaced_updated_deleted_then_server_follows(served, act):
    assert act("create-slice", slice=json.dumps(SLICE))["outcome"] == "created"
    assert served.get("/api/v1/slices/embb")["spec"]["priority_level"] == 10

    assert act("create-slice", slice=json.dumps({**SLICE, "priority_level": 20}))["outcome"] == "replaced"
    assert served.get("/api/v1/slices/embb")["spec"]["priority_level"] == 20

    act("update-slice", slice=json.dumps({**SLICE, "priority_level": 5}))
    assert served.get("/api/v1/slices/embb")["spec"]["priority_level"] == 5

    act("delete-slice", **{"slice-id": "embb"})
    assert served.status_of("/api/v1/slices/embb") == 404
    with pytest.raises(testing.ActionFailed, match="^slice: no slice 'embb'; use create-slice"):
        act("update-slice", slice=json.dumps(SLICE))


def test_given_real_netapp_when_set_alternatives_then_the_group_is_there(served, act):
    try:
        assert act("set-alternatives", groups=json.dumps([GROUP]))["count"] == "1"
        (group,) = [g for g in served.get("/api/v1/alternatives") if g["id"] == GROUP["id"]]
        assert [(m["mac"], m["ip4"], m["interface"]) for m in group["members"]] == [
            ("02:00:00:00:00:0b", "10.0.20.11", VETH)
        ]
    finally:
        served.api.delete_alternative(GROUP["id"], missing_ok=True)


def test_given_real_netapp_when_get_stats_then_the_apis_statistics(served, act):
    stats = json.loads(act("get-stats")["result"])
    assert set(stats) == set(served.get("/api/v1/stats"))  # the counters move; the shape does not
    assert {"intents", "verdicts"} <= set(stats)


def _attached(served: Served) -> dict[str, bool]:
    return {view["name"]: view["attached"] for view in served.get("/api/v1/dataplane")["interfaces"]}


def test_given_real_netapp_when_detach_then_attach_then_the_dataplane_shows_it(served, act):
    assert _attached(served)[VETH] is True
    try:
        assert act("detach", interface=VETH)["interface"] == VETH
        assert _attached(served).get(VETH) in (None, False)
        assert xdp_program_on(served.namespace, VETH) is None
    finally:
        attached = act("attach", interface=VETH, mode="generic")
    assert attached["mode"] == "generic"
    assert _attached(served)[VETH] is True
    assert xdp_program_on(served.namespace, VETH) == served.get("/api/v1/dataplane")["program_id"]


def test_given_real_netapp_when_subscribe_then_notified_on_loopback_and_unsubscribe_deletes_it(served, act):
    with CallbackReceiver() as receiver:
        subscribed = act(
            "subscribe-telemetry", **{"callback-uri": receiver.url, "measurements": "dpp_cpu", "period": 1}
        )
        sub_id = subscribed["subscription-id"]
        assert sub_id and served.status_of(f"/api/v1/subscriptions/{sub_id}") == 200
        receiver.wait_for(1, subscription=sub_id)

        act("unsubscribe-telemetry", **{"subscription-id": sub_id})
    assert served.status_of(f"/api/v1/subscriptions/{sub_id}") == 404


def test_given_real_netapp_when_set_cpu_then_the_steering_set_holds_it_and_a_steer_intent_is_not_left_out(
    served, act
):
    done = act("set-cpu", cpu=0, **{"capacity-pps": 250000, "queue-size": 512})
    assert done["cpu"] == "0"
    (cpu,) = [view for view in served.get("/api/v1/dataplane/cpus") if view["cpu"] == 0]
    assert (cpu["capacity_pps"], cpu["queue_size"], cpu["overloaded"]) == (250000, 512, False)
    assert cpu["state"] is not None, cpu.get("problem")

    act("set-cpu", cpu=0, overloaded=True)
    (cpu,) = [view for view in served.get("/api/v1/dataplane/cpus") if view["cpu"] == 0]
    assert (cpu["capacity_pps"], cpu["queue_size"], cpu["overloaded"]) == (0, 0, True)
    act("set-cpu", cpu=0)


def test_given_real_netapp_when_remove_cpu_then_the_cpu_leaves_the_set_and_the_maps(served, act):
    act("set-cpu", cpu=0, **{"capacity-pps": 250000})
    try:
        done = act("remove-cpu", cpu=0)

        assert done["cpu"] == "0"
        assert [view["cpu"] for view in served.get("/api/v1/dataplane/cpus")] == []
        handle = second_handle(served.instance)
        try:
            assert (handle.cpu_get(0).enabled, handle.cpu_get(0).capacity_pps) == (0, 0)
        finally:
            handle.close()
        with pytest.raises(testing.ActionFailed) as refused:
            act("remove-cpu", cpu=0)
        assert refused.value.message == "remove-cpu: the NetApp refused: 404: CPU 0 is not in the CPU set"
    finally:
        act("set-cpu", cpu=0)  # as the other tests found it


def test_given_real_netapp_when_set_cpu_beyond_the_machine_then_the_action_fails_naming_cpu(served, act):
    if (os.cpu_count() or 1) > 127:
        pytest.skip("this machine has a CPU 127")
    with pytest.raises(testing.ActionFailed) as refused:
        act("set-cpu", cpu=127)
    assert refused.value.message.startswith("set-cpu: the NetApp refused: 400")
    assert "cpu" in refused.value.message.lower()


def test_given_real_netapp_when_reload_dataplane_then_a_new_program_runs_on_the_same_interface(served, act):
    before = served.get("/api/v1/dataplane")["program_id"]

    reloaded = act("reload-dataplane")

    assert reloaded["previous-program-id"] == str(before)
    assert reloaded["program-id"] != str(before) and reloaded["count"] == "1"
    assert json.loads(reloaded["result"])["interfaces"] == [VETH]
    assert served.get("/api/v1/dataplane")["program_id"] == int(reloaded["program-id"])
    assert xdp_program_on(served.namespace, VETH) == int(reloaded["program-id"])


def test_given_real_netapp_when_apply_appd_then_the_instance_has_its_rules_and_again_changes_nothing(served, act):
    appd = (CHARM_DIR.parents[1] / "vnfd" / "dpp-netapp_appd.json").read_text()

    first = dict(act("apply-appd", appd=appd))  # the context's results are one dict, refilled by each run
    again = act("apply-appd", appd=appd)

    assert (first["app-instance-id"], first["changed"], again["changed"]) == ("dpp-netapp", "true", "false")
    rules = served.get("/mec_app_support/v1/applications/dpp-netapp/traffic_rules")
    # <api-port>: the port the charm configured the API on; <mgmt-address>: the unit's address.
    assert [rule["trafficFilter"][0]["dstPort"] for rule in rules] == [[str(served.config["api-port"])]]
    assert "<" not in json.dumps(rules)


def test_given_real_netapp_when_an_intent_it_refuses_then_the_action_fails_with_its_reason(served, act):
    bad = {**INTENT, "id": "warp", "action": {"type": "warp"}}
    with pytest.raises(testing.ActionFailed) as refused:
        act("add-intent", intent=json.dumps(bad))
    assert refused.value.message.startswith("add-intent: the NetApp refused: 400")
    assert "action" in refused.value.message
    assert served.status_of("/api/v1/intents/warp") == 404


def test_given_real_netapp_when_attach_to_an_interface_it_lacks_then_the_action_fails_naming_it(served, act):
    with pytest.raises(testing.ActionFailed) as refused:
        act("attach", interface="nosuch0", mode="generic")
    assert refused.value.message.startswith("attach: the NetApp refused: 404: no interface 'nosuch0'")
    assert _attached(served)[VETH] is True
