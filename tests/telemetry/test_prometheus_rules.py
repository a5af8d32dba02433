"""The VNFD's automatic scaling policy as Prometheus alerting rules
(vnfd/prometheus/dpp-netapp-rules.yml): promtool validates them and runs their unit tests, and
their metric, thresholds, comparisons, `for:` and cooldown are the VNFD's, so the two cannot
drift apart."""

from __future__ import annotations

import re

import yaml

from tests.utils.prometheus import REPO, RULES, RULES_TEST, promtool

VNFD = REPO / "vnfd" / "dpp-netapp_vnfd.yaml"
OPERATORS = {"GT": ">", "GE": ">=", "LT": "<", "LE": "<=", "EQ": "=="}


def rules() -> dict[str, dict]:
    """alert name -> rule, of the shipped file."""
    (group,) = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule for rule in group["rules"]}


def scaling() -> tuple[dict, dict, dict]:
    """(aspect, policy, criterion) of the VNFD's one automatic scaling policy."""
    vnfd = yaml.safe_load(VNFD.read_text())["vnfd"]
    (df,) = vnfd["df"]
    (aspect,) = df["scaling-aspect"]
    (policy,) = [p for p in aspect["scaling-policy"] if p["scaling-type"] == "automatic"]
    (criterion,) = policy["scaling-criteria"]
    return aspect, policy, criterion


def performance_metric(param_id: str) -> str:
    vnfd = yaml.safe_load(VNFD.read_text())["vnfd"]
    (vdu,) = vnfd["vdu"]
    (param,) = [p for p in vdu["monitoring-parameter"] if p["id"] == param_id]
    return param["performance-metric"]


def expected_expression(direction: str) -> str:
    """What the VNFD's criterion says for "out" or "in", as PromQL: a NetApp's load is the mean
    over its metered CPUs."""
    _, _, criterion = scaling()
    metric = performance_metric(criterion["vnf-monitoring-param-ref"])
    operator = OPERATORS[criterion[f"scale-{direction}-relational-operation"]]
    return f"avg by (node) ({metric}) {operator} {criterion[f'scale-{direction}-threshold']}"


def test_promtool_validates_the_rules():
    checked = promtool("check", "rules", str(RULES))

    assert checked.returncode == 0, (checked.stdout + checked.stderr).decode()
    assert b"SUCCESS: 2 rules found" in checked.stdout


def test_the_rules_unit_tests_pass():
    tested = promtool("test", "rules", RULES_TEST.name, cwd=RULES_TEST.parent)

    assert tested.returncode == 0, (tested.stdout + tested.stderr).decode()
    assert b"SUCCESS" in tested.stdout


def test_the_rules_say_what_the_vnfd_scaling_policy_says():
    aspect, policy, _ = scaling()
    found = rules()

    for alert, direction in (("DppNetAppScaleOut", "out"), ("DppNetAppScaleIn", "in")):
        rule = found[alert]
        assert rule["expr"] == expected_expression(direction), alert
        assert rule["for"] == f"{policy['threshold-time']}s", alert
        assert rule["annotations"]["cooldown"] == f"{policy['cooldown-time']}s", alert
        assert rule["labels"]["scaling_aspect"] == aspect["id"]
        assert rule["labels"]["scaling_policy"] == policy["name"]
        assert rule["labels"]["scaling_direction"] == direction
    assert set(found) == {"DppNetAppScaleOut", "DppNetAppScaleIn"}


def test_api_telemetry_md_shows_the_rules_as_shipped():
    doc = (REPO / "api" / "telemetry.md").read_text().split("## Alerting rules", 1)[1]
    rows = re.findall(r"^\| `(\w+)` \| `([^`]+)` \| (\w+) \|", doc, re.MULTILINE)

    assert {alert: (expr, duration) for alert, expr, duration in rows} == {
        alert: (rule["expr"], rule["for"]) for alert, rule in rules().items()
    }
