"""MEC 011 traffic rules for the tests, as ETSI bodies."""

from __future__ import annotations

from typing import Any

from netapp.mec.models import TrafficRule


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
