"""The charm applies a MEC 010-2 AppD: on day 1 from its `appd` option (once the API answers, again
only when the AppD or its placeholders' values change), and on demand with the apply-appd action.
ops.testing runs the charm with a fake workload and API client (tests/charm/conftest.py): no Juju
controller and no NetApp run here; tests/charm/test_actions_real_server.py runs the action against
a real NetApp."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
import yaml
from netapp_workload import ApiError
from ops import testing

from tests.charm.conftest import CHARM_DIR

VNFD_DIR = CHARM_DIR.parents[1] / "vnfd"
SHIPPED_APPD = (VNFD_DIR / "dpp-netapp_appd.json").read_text()  # the VNF package's mec/dpp-netapp_appd.json
APPD = json.loads(SHIPPED_APPD)
MGMT = testing.Network("juju-info", bind_addresses=[testing.BindAddress([testing.Address("10.10.0.5")])])
DAY1 = testing.State(config={"appd": json.dumps(APPD), "api-port": 8443}, networks={MGMT})


def _applied(netapp) -> list[tuple]:
    return [args for name, args in netapp.api.calls if name == "apply_appd"]


def day1_primitive_params(name: str, instantiation: dict[str, str]) -> dict[str, str]:
    """The parameters the VNFD's day-1 primitive `name` passes to the charm's action, as OSM passes
    them: each <placeholder> filled from the instantiation parameters (additionalParamsForVnf)."""
    vnfd = yaml.safe_load((VNFD_DIR / "dpp-netapp_vnfd.yaml").read_text())["vnfd"]
    (df,) = vnfd["df"]
    (day12,) = df["lcm-operations-configuration"]["operate-vnf-op-config"]["day1-2"]
    (primitive,) = [one for one in day12["initial-config-primitive"] if one["name"] == name]
    return {param["name"]: re.sub(r"<(\w+)>", lambda found: instantiation[found[1]], str(param["value"]))
            for param in primitive.get("parameter", [])}


def test_given_an_appd_when_config_changed_then_applied_with_the_units_address_and_port_once(ctx, netapp):
    out = ctx.run(ctx.on.config_changed(), DAY1)

    assert _applied(netapp) == [(APPD, "dpp-netapp", {"mgmt-address": "10.10.0.5", "api-port": "8443"})]
    assert out.unit_status == testing.ActiveStatus()
    netapp.api.calls.clear()
    ctx.run(ctx.on.update_status(), out)
    assert _applied(netapp) == []


def test_given_an_appd_applied_when_the_api_port_changes_then_applied_again(ctx, netapp):
    out = ctx.run(ctx.on.config_changed(), DAY1)
    ctx.run(ctx.on.config_changed(), dataclasses.replace(out, config={**out.config, "api-port": 9443}))

    assert [values["api-port"] for _, _, values in _applied(netapp)] == ["8443", "9443"]


def test_given_the_netapp_refuses_the_appd_then_blocked_until_it_takes_one(ctx, netapp):
    netapp.api.fail_with = ApiError(400, "appTrafficRule[0].trafficFilter[0].dstAddress: ...")
    out = ctx.run(ctx.on.config_changed(), DAY1)
    assert isinstance(out.unit_status, testing.BlockedStatus)
    assert "appd: the NetApp refused it: 400: appTrafficRule[0]" in out.unit_status.message

    netapp.api.fail_with = None
    fixed = ctx.run(ctx.on.update_status(), out)
    assert fixed.unit_status == testing.ActiveStatus() and len(_applied(netapp)) == 2


def test_given_the_api_does_not_answer_then_not_blocked_and_tried_on_the_next_event(ctx, netapp):
    netapp.api.fail_with = ApiError(None, "cannot reach the NetApp")
    out = ctx.run(ctx.on.config_changed(), DAY1)
    assert not isinstance(out.unit_status, testing.BlockedStatus)

    netapp.api.fail_with = None
    ctx.run(ctx.on.update_status(), out)
    assert _applied(netapp)[-1][1] == "dpp-netapp"


def test_given_an_appd_option_that_is_not_an_appd_then_blocked_naming_the_option(ctx, netapp):
    out = ctx.run(ctx.on.config_changed(), testing.State(config={"appd": "[1, 2]"}))

    assert isinstance(out.unit_status, testing.BlockedStatus) and "appd:" in out.unit_status.message
    assert _applied(netapp) == []


def test_given_the_option_when_apply_appd_action_then_it_is_applied_to_the_instance_asked(ctx, netapp):
    ctx.run(ctx.on.action("apply-appd", params={"app-instance-id": "edge-1"}), DAY1)

    assert _applied(netapp)[-1] == (APPD, "edge-1", {"mgmt-address": "10.10.0.5", "api-port": "8443"})
    assert ctx.action_results["app-instance-id"] == "edge-1" and ctx.action_results["changed"] == "true"


def test_given_no_appd_anywhere_when_apply_appd_action_then_it_fails_naming_the_parameter(ctx, netapp):
    with pytest.raises(testing.ActionFailed, match="^appd: required"):
        ctx.run(ctx.on.action("apply-appd"), testing.State())
    assert _applied(netapp) == []


def test_given_the_vnfds_day1_primitive_when_osm_runs_it_then_the_shipped_appd_is_applied(ctx, netapp):
    """No appd option: the AppD comes from the primitive, as an OSM instantiation gives it."""
    params = day1_primitive_params("apply-appd", {"mec_appd": SHIPPED_APPD})

    ctx.run(ctx.on.action("apply-appd", params=params), testing.State(config={"api-port": 8443}, networks={MGMT}))

    assert _applied(netapp) == [(APPD, "dpp-netapp", {"mgmt-address": "10.10.0.5", "api-port": "8443"})]
    assert ctx.action_results["app-instance-id"] == "dpp-netapp" and ctx.action_results["changed"] == "true"
