"""The published OpenAPI document (api/openapi.json) is the app's, and says what the API does."""

from __future__ import annotations

import json
from pathlib import Path

from netapp.api.openapi import OPENAPI_PATH, committed_document, render

COMMITTED = Path(__file__).resolve().parents[2] / "api" / "openapi.json"
EXPORT = "python -m netapp.api.openapi api/openapi.json"


def test_committed_openapi_document_matches_the_app():
    assert COMMITTED.exists(), f"{COMMITTED} is missing: run `{EXPORT}`"
    assert COMMITTED.read_text() == render(committed_document()), f"api/openapi.json drifted: run `{EXPORT}`"


def test_the_served_document_is_the_committed_one(client_for):
    response = client_for(None).get(OPENAPI_PATH)

    assert response.status_code == 200 and response.json() == json.loads(COMMITTED.read_text())


def test_every_operation_is_authenticated_except_the_probes_and_documents_its_problems():
    document = committed_document()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            where = f"{method.upper()} {path}"
            if path in ("/healthz", "/readyz"):
                assert "security" not in operation, where
            else:
                assert operation["security"] == [{"bearer": []}], where
                assert {"400", "401", "403", "500"} <= set(operation["responses"]), where
            assert "422" not in operation["responses"], where
            assert operation["description"] and operation["operationId"], where
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "A token from `netapp tokens add`.",
    }


def test_problem_responses_are_problem_json():
    document = committed_document()
    problem = document["paths"]["/api/v1/intents"]["post"]["responses"]["409"]["content"]

    assert problem == {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    assert "invalid-params" in document["components"]["schemas"]["Problem"]["properties"]


def test_the_document_has_info_servers_and_integer_bounds():
    document = committed_document()

    assert document["info"]["title"] == "DPP NetApp" and document["info"]["version"]
    assert document["servers"][0]["url"] == "{scheme}://{host}:{port}"
    assert ".0," not in json.dumps(document["components"]["schemas"]["CpuSpec"])
