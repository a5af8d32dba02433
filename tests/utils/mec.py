"""MEC 011 traffic rules and services for the tests, as ETSI bodies, and ETSI's documents to check
answers against."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from netapp.mec.models import TrafficRule


def etsi_examples(default: int) -> int:
    """Examples per operation of a schemathesis run with an ETSI document: `default`, sized for CI's
    time, or DPP_ETSI_EXAMPLES (e.g. 1000 before a release, the depth the MEC issue asks)."""
    return int(os.environ.get("DPP_ETSI_EXAMPLES", default))


def etsi_timeout(examples: int) -> float:
    """A run's limit per operation: the suite's 120 s, and a third of a second per example above 300
    (a deep run on two shared CPUs takes about a tenth)."""
    return 120 + max(0, examples - 300) / 3


def traffic_rule(rule_id: str = "r1", **fields: Any) -> dict[str, Any]:
    """An active PACKET rule dropping UDP to 192.0.2.0/24 port 5000, with the given parts replaced."""
    body: dict[str, Any] = {
        "trafficRuleId": rule_id,
        "filterType": "PACKET",
        "priority": 1,
        "trafficFilter": [{"dstAddress": ["192.0.2.0/24"], "protocol": ["UDP"], "dstPort": ["5000"]}],
        "action": "DROP",
        "state": "ACTIVE",
    }
    body.update(fields)
    return body


def rule_model(rule_id: str = "r1", **fields: Any) -> TrafficRule:
    """`traffic_rule` as the model."""
    return TrafficRule.model_validate(traffic_rule(rule_id, **fields))


def service_info(name: str = "video-cache", **fields: Any) -> dict[str, Any]:
    """An ACTIVE MEC 011 ServiceInfo reached over REST at a documentation address, parts replaced."""
    body: dict[str, Any] = {
        "serName": name,
        "serCategory": {"href": "/catalogue/cache", "id": "cache", "name": "Cache", "version": "1"},
        "version": "1.0",
        "state": "ACTIVE",
        "transportInfo": {
            "id": "rest-1", "name": "REST", "type": "REST_HTTP", "protocol": "HTTP", "version": "1.1",
            "endpoint": {"addresses": [{"host": "192.0.2.10", "port": 8443}]}, "security": {},
        },
        "serializer": "JSON",
        "scopeOfLocality": "MEC_HOST",
        "consumedLocalOnly": False,
        "isLocal": True,
    }
    body.update(fields)
    return body


def etsi_document(path: Path) -> dict[str, Any]:
    """One of ETSI's OpenAPI documents (../shared/specs beside the repository); the test is skipped,
    saying why, when it is not there."""
    if not path.exists():
        pytest.skip(f"ETSI's document is not beside the repository ({path}): nothing to check against")
    return json.loads(path.read_text())


def etsi_answer_validator(path: Path, operation: str, method: str, status: str = "200") -> jsonschema.Draft202012Validator:
    """A validator of the JSON answer ETSI's document at `path` gives an operation, its $refs resolved
    in that document (OpenAPI 3.1: JSON Schema 2020-12)."""
    document = etsi_document(path)
    schema = document["paths"][operation][method]["responses"][status]["content"]["application/json"]["schema"]
    return etsi_schema_validator(path, schema)


def etsi_schema_validator(path: Path, schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """A validator of `schema` whose $refs resolve in ETSI's document at `path`."""
    return jsonschema.Draft202012Validator({**schema, "components": etsi_document(path)["components"]})
