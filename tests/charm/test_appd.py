"""The charm applies a MEC 010-2 AppD: on day 1 from its `appd` option (once the API answers, again
only when the AppD or its placeholders' values change), and on demand with the apply-appd action,
whose AppD is its own parameter's, else the option's, else the one the charm carries (what OSM's
day 1 onboards). ops.testing runs the charm with a fake workload and API client
(tests/charm/conftest.py): no Juju controller and no NetApp run here;
tests/charm/test_actions_real_server.py runs the action against a real NetApp."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Iterator

import jsonschema
import pytest
import yaml
from netapp_workload import SHIPPED_APPD, ApiError
from ops import testing

from tests.charm.conftest import CHARM_DIR, private_charm_root
from tests.charm.test_action_schemas import schema_of

VNFD_DIR = CHARM_DIR.parents[1] / "vnfd"
APPD_SOURCE = VNFD_DIR / "dpp-netapp_appd.json"  # the VNF package's mec/dpp-netapp_appd.json
APPD = json.loads(APPD_SOURCE.read_text())
MGMT = testing.Network("juju-info", bind_addresses=[testing.BindAddress([testing.Address("10.10.0.5")])])
DAY1 = testing.State(config={"appd": json.dumps(APPD), "api-port": 8443}, networks={MGMT})


def _applied(netapp) -> list[tuple]:
    return [args for name, args in netapp.api.calls if name == "apply_appd"]


class NotProvided(Exception):
    """What OSM's LCM raises for a primitive it cannot map (ns.py _map_primitive_params)."""


def day1_primitive_params(name: str, instantiation: dict[str, str]) -> dict[str, str]:
    """The parameters the VNFD's day-1 primitive `name` passes to the charm's action, as OSM's LCM
    maps them: a `value` (or `default-value`) that is a <placeholder> takes the instantiation
    parameter (additionalParamsForVnf) of that name, and one the instantiation does not give, or a
    parameter with no value at all, fails the primitive."""
    vnfd = yaml.safe_load((VNFD_DIR / "dpp-netapp_vnfd.yaml").read_text())["vnfd"]
    (df,) = vnfd["df"]
    (day12,) = df["lcm-operations-configuration"]["operate-vnf-op-config"]["day1-2"]
    (primitive,) = [one for one in day12["initial-config-primitive"] if one["name"] == name]
    mapped = {}
    for param in primitive.get("parameter", []):
        value = str(param.get("value", param.get("default-value", "<>")))
        placeholder = re.fullmatch(r"<(\w*)>", value)
        if placeholder and placeholder[1] not in instantiation:
            raise NotProvided(f"Parameter {value} needed to execute primitive {name} not provided")
        mapped[param["name"]] = instantiation[placeholder[1]] if placeholder else value
    return mapped


@pytest.fixture
def packed_appd() -> Iterator[None]:
    """The AppD in the charm where `make package` puts it (netapp/packaging/charm.py APPD_FILE),
    copied from its source as packaging copies it; gone again after the test."""
    shipped = private_charm_root() / SHIPPED_APPD
    shutil.copyfile(APPD_SOURCE, shipped)
    yield
    shipped.unlink()


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
    """No parameter, no option, and a charm without the AppD (built without `make package`)."""
    assert not (private_charm_root() / SHIPPED_APPD).exists()
    with pytest.raises(testing.ActionFailed, match=f"^appd: required: .*carries no {SHIPPED_APPD}"):
        ctx.run(ctx.on.action("apply-appd"), testing.State())
    assert _applied(netapp) == []


def test_given_an_instantiation_without_an_appd_when_osm_runs_the_day1_primitive_then_the_charms_appd_is_applied(
    ctx, netapp, packed_appd
):
    """No instantiation parameter and no appd option: OSM maps the VNFD's primitive and the charm
    applies the AppD it carries."""
    params = day1_primitive_params("apply-appd", {})

    ctx.run(ctx.on.action("apply-appd", params=params), testing.State(config={"api-port": 8443}, networks={MGMT}))

    assert _applied(netapp) == [(APPD, "dpp-netapp", {"mgmt-address": "10.10.0.5", "api-port": "8443"})]
    assert ctx.action_results["appd-source"] == "charm" and ctx.action_results["changed"] == "true"


def test_given_the_option_and_the_charms_appd_when_apply_appd_then_the_parameter_then_the_option_win(
    ctx, netapp, packed_appd
):
    option, given = {**APPD, "appName": "from-option"}, {**APPD, "appName": "from-action"}
    state = testing.State(config={"appd": json.dumps(option)}, networks={MGMT})

    ctx.run(ctx.on.action("apply-appd"), state)
    assert _applied(netapp)[-1][:2] == (option, "from-option") and ctx.action_results["appd-source"] == "option"
    ctx.run(ctx.on.action("apply-appd", params={"appd": json.dumps(given)}), state)
    assert _applied(netapp)[-1][:2] == (given, "from-action") and ctx.action_results["appd-source"] == "action"


def test_given_osms_day2_defaults_when_apply_appd_then_the_options_appd_goes_to_its_app_name(ctx, netapp):
    """An `osm ns-action` that leaves both parameters out passes the VNFD's default-values ("");
    Juju's schema takes them and the charm reads them as not given."""
    params = {"appd": "", "app-instance-id": ""}
    jsonschema.validate(params, schema_of("apply-appd"))

    ctx.run(ctx.on.action("apply-appd", params=params), DAY1)

    assert _applied(netapp)[-1][:2] == (APPD, "dpp-netapp") and ctx.action_results["appd-source"] == "option"
