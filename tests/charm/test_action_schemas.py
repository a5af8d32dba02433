"""The actions' parameters against their JSON schemas in charmcraft.yaml, with jsonschema: Juju
checks them before the charm runs, ops.testing does not (enum, required, minimum)."""

from __future__ import annotations

import json
from typing import Any

import charm
import jsonschema
import pytest

from tests.charm.conftest import CHARMCRAFT
from tests.charm.test_charm import GOOD

ACTIONS = CHARMCRAFT["actions"]

# The contract with the VNFD's config primitives: action -> parameter names.
PARAMETERS = {
    "add-intent": {"intent"},
    "remove-intent": {"intent-id"},
    "list-intents": set(),
    "create-slice": {"slice"},
    "update-slice": {"slice"},
    "delete-slice": {"slice-id"},
    "set-alternatives": {"groups"},
    "get-stats": set(),
    "attach": {"interface", "mode"},
    "detach": {"interface"},
    "subscribe-telemetry": {"callback-uri", "measurements", "period"},
    "unsubscribe-telemetry": {"subscription-id"},
    "set-cpu": {"cpu", "capacity-pps", "queue-size", "overloaded"},
    "remove-cpu": {"cpu"},
    "check-openstack": {"server", "data-networks"},
    "reload-dataplane": set(),
    "apply-appd": {"appd", "app-instance-id"},
}


def schema_of(action: str) -> dict[str, Any]:
    """The JSON schema Juju builds from an action's declaration."""
    spec = ACTIONS[action]
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": spec.get("params", {}),
        "required": spec.get("required", []),
        "additionalProperties": spec.get("additionalProperties", True),
    }


def test_given_charmcraft_when_read_then_actions_and_parameters_are_the_contract():
    assert {name: set(spec.get("params", {})) for name, spec in ACTIONS.items()} == PARAMETERS
    assert set(charm.ACTIONS) | charm.MACHINE_ACTIONS == set(ACTIONS)
    assert not set(charm.ACTIONS) & charm.MACHINE_ACTIONS


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_given_action_when_schema_checked_then_valid_draft7_with_closed_parameters(action):
    jsonschema.Draft7Validator.check_schema(schema_of(action))
    assert ACTIONS[action].get("additionalProperties") is False
    assert ACTIONS[action].get("description")


@pytest.mark.parametrize("action, params", [(g[0], g[1]) for g in GOOD])
def test_given_good_parameters_of_unit_tests_when_validated_then_accepted(action, params):
    jsonschema.validate(params, schema_of(action))


def test_given_slice_parameter_when_validated_then_accepted():
    jsonschema.validate({"slice": json.dumps({"id": "embb"})}, schema_of("create-slice"))
    jsonschema.validate({"slice": json.dumps({"id": "embb"})}, schema_of("update-slice"))


BAD = [
    ("attach", {"interface": "ens4", "mode": "turbo"}, "enum"),
    ("attach", {"mode": "native"}, "required"),
    ("attach", {"interface": "a-very-long-interface-name"}, "maxLength"),
    ("detach", {}, "required"),
    ("subscribe-telemetry", {"callback-uri": "http://x", "period": 0}, "minimum"),
    ("subscribe-telemetry", {"callback-uri": "http://x", "period": "10"}, "type"),
    ("subscribe-telemetry", {"period": 10}, "required"),
    ("add-intent", {}, "required"),
    ("add-intent", {"intent": {"id": "x"}}, "type"),
    ("remove-intent", {"intent-id": ""}, "minLength"),
    ("delete-slice", {}, "required"),
    ("set-alternatives", {}, "required"),
    ("unsubscribe-telemetry", {"subscription-id": ""}, "minLength"),
    ("list-intents", {"filter": "x"}, "additionalProperties"),
    ("reload-dataplane", {"force": True}, "additionalProperties"),
    ("set-cpu", {}, "required"),
    ("set-cpu", {"cpu": 128}, "maximum"),
    ("set-cpu", {"cpu": -1}, "minimum"),
    ("set-cpu", {"cpu": "2"}, "type"),
    ("set-cpu", {"cpu": 2, "capacity-pps": 4294967296}, "maximum"),
    ("set-cpu", {"cpu": 2, "queue-size": 16385}, "maximum"),
    ("set-cpu", {"cpu": 2, "overloaded": "yes"}, "type"),
    ("remove-cpu", {}, "required"),
    ("remove-cpu", {"cpu": 128}, "maximum"),
    ("remove-cpu", {"cpu": 3, "force": True}, "additionalProperties"),
    ("check-openstack", {}, "required"),
    ("check-openstack", {"data-networks": ""}, "minLength"),
    ("check-openstack", {"data-networks": "altnet", "cloud": "edge"}, "additionalProperties"),
]


@pytest.mark.parametrize("action, params, keyword", BAD)
def test_given_bad_parameters_when_validated_then_rejected_by_keyword(action, params, keyword):
    errors = list(jsonschema.Draft7Validator(schema_of(action)).iter_errors(params))
    assert [error.validator for error in errors] == [keyword]


def test_given_set_cpu_when_declared_then_its_bounds_are_the_apis():
    from netapp.intents.models import MAX_CPUS
    from netapp.steering.models import MAX_CAPACITY_PPS, MAX_QUEUE_SIZE

    params = ACTIONS["set-cpu"]["params"]
    assert params["cpu"]["maximum"] == MAX_CPUS - 1
    assert params["capacity-pps"]["maximum"] == MAX_CAPACITY_PPS
    assert params["queue-size"]["maximum"] == MAX_QUEUE_SIZE
    assert {name: spec.get("default") for name, spec in params.items()} == {
        "cpu": None, "capacity-pps": 0, "queue-size": 0, "overloaded": False
    }
    assert ACTIONS["remove-cpu"]["params"]["cpu"] == params["cpu"]


def test_given_charm_limits_when_compared_then_they_are_the_apis():
    import charm_config

    from netapp.intents.models import MAX_CPUS
    from netapp.steering.models import MAX_CAPACITY_PPS, MAX_QUEUE_SIZE

    api = {"MAX_CPUS": MAX_CPUS, "MAX_CAPACITY_PPS": MAX_CAPACITY_PPS, "MAX_QUEUE_SIZE": MAX_QUEUE_SIZE}
    for name, limit in api.items():
        assert getattr(charm_config, name) == limit, name


def test_given_attach_mode_when_omitted_then_default_native():
    assert ACTIONS["attach"]["params"]["mode"]["default"] == "native"
