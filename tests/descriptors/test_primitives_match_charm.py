"""Every primitive the VNFD names exists in the charm with the same parameters, and back:
config primitives and day-1/terminate actions <-> charmcraft.yaml `actions`, the `config`
initial primitives <-> charmcraft.yaml `config.options`, the day1-2 relation <-> its endpoints."""

from __future__ import annotations

import pytest
import yaml

from tests.utils.yang import REPO_ROOT

CHARMCRAFT = REPO_ROOT / "charms" / "dpp-netapp" / "charmcraft.yaml"
# JSON-schema / Juju config types -> OSM primitive data-type.
TYPES = {
    "string": "STRING",
    "integer": "INTEGER",
    "int": "INTEGER",
    "boolean": "BOOLEAN",
    "number": "STRING",
    "float": "STRING",
    "secret": "STRING",  # a secret option's value is the secret's URI
}


@pytest.fixture(scope="module")
def charm() -> dict:
    if not CHARMCRAFT.is_file():
        pytest.skip(f"{CHARMCRAFT.relative_to(REPO_ROOT)} is not in the repository yet")
    return yaml.safe_load(CHARMCRAFT.read_text())


@pytest.fixture(scope="module")
def day12(descriptors) -> dict:
    (df,) = descriptors.vnfd["df"]
    (conf,) = df["lcm-operations-configuration"]["operate-vnf-op-config"]["day1-2"]
    return conf


def _action_signature(action: dict) -> dict:
    required = set(action.get("required", []))
    return {
        name: (TYPES[spec.get("type", "string")], name in required)
        for name, spec in (action.get("params") or {}).items()
    }


def test_config_primitives_and_charm_actions_match_both_ways(charm, day12):
    primitives = {
        p["name"]: {
            q["name"]: (q.get("data-type", "STRING"), q.get("mandatory", False))
            for q in p.get("parameter", [])
        }
        for p in day12["config-primitive"]
    }
    actions = {name: _action_signature(spec or {}) for name, spec in charm["actions"].items()}
    assert primitives == actions


def test_primitive_defaults_are_the_charm_defaults(charm, day12):
    for prim in day12["config-primitive"]:
        params = charm["actions"][prim["name"]].get("params") or {}
        for param in prim.get("parameter", []):
            if "default-value" in param:
                default = params[param["name"]].get("default")
                text = str(default).lower() if isinstance(default, bool) else str(default)  # YANG's "false"
                assert text == param["default-value"], (
                    prim["name"],
                    param["name"],
                )


def test_every_optional_day2_parameter_has_a_default_osm_can_pass(day12):
    """OSM's LCM (ns.py _map_primitive_params) gives a parameter the operator leaves out its
    default-value and refuses the action when it has none: one that is not mandatory needs one."""
    missing = [
        (prim["name"], param["name"])
        for prim in day12["config-primitive"]
        for param in prim.get("parameter", [])
        if not param.get("mandatory", False) and "default-value" not in param
    ]
    assert missing == []


def test_day1_and_terminate_primitives_are_charm_config_or_actions(charm, day12):
    options = charm["config"]["options"]
    for prim in day12["initial-config-primitive"] + day12["terminate-config-primitive"]:
        params = {p["name"]: p.get("data-type", "STRING") for p in prim.get("parameter", [])}
        if prim["name"] == "config":  # OSM turns `config` into `juju config`
            for name, data_type in params.items():
                assert name in options, f"initial config sets unknown charm option {name!r}"
                assert TYPES[options[name]["type"]] == data_type, name
        else:
            action = _action_signature(charm["actions"][prim["name"]])
            assert set(params) <= set(action), prim
            assert {n for n, (_, req) in action.items() if req} <= set(params), prim


def test_charm_declares_the_alternatives_relation(charm, day12):
    (rel,) = day12["relation"]
    provides, requires = charm.get("provides") or {}, charm.get("requires") or {}
    if not provides and not requires:
        pytest.skip(
            "the charm declares no relations yet: it needs provides "
            f"{rel['provider']['endpoint']!r} and requires {rel['requirer']['endpoint']!r}"
            " (interface dpp-alternatives)"
        )
    assert provides[rel["provider"]["endpoint"]]["interface"] == "dpp-alternatives"
    assert requires[rel["requirer"]["endpoint"]]["interface"] == "dpp-alternatives"
