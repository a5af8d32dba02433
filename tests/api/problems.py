"""Checks every problem+json answer gets: RFC 7807 members, and ETSI MEC's ProblemDetails schema
(from ../shared/specs, next to the repository, when it is there)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import httpx

MEC_SPEC = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "specs"
    / "mec011-v2.1.1-etsi-forge"
    / "MecAppSupportApi.json"
)


@lru_cache(maxsize=1)
def mec_problem_details_schema() -> Optional[dict[str, Any]]:
    """MEC 011's ProblemDetails schema, or None when the specs are not beside the repository."""
    if not MEC_SPEC.exists():
        return None
    return json.loads(MEC_SPEC.read_text())["components"]["schemas"]["ProblemDetails"]


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    """The response is an RFC 7807 problem with this status; returns its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == status
    assert problem["title"] and problem["type"]
    # the path; where ETSI's document asks for a URI (MEC 015: netapp.api.problems), the absolute URL
    assert problem["instance"] in (response.request.url.path, str(response.request.url.copy_with(query=None)))
    for param in problem.get("invalid-params", []):
        assert set(param) <= {"name", "reason", "allowed"} and param["name"] and param["reason"]
    schema = mec_problem_details_schema()
    if schema is not None:
        import jsonschema

        jsonschema.validate(problem, schema)
    return problem


def invalid_param(problem: dict[str, Any]) -> dict[str, Any]:
    """The one entry of a problem's invalid-params."""
    [param] = problem["invalid-params"]
    return param
