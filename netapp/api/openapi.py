"""The published OpenAPI document: FastAPI's, with problem+json instead of 422s, and servers.

`python -m netapp.api.openapi api/openapi.json` rewrites the committed file; a test fails when it
drifts from the app (sorted keys, so that a diff shows only real changes).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Union

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from netapp.api.problems import PROBLEM_JSON, Problem

OPENAPI_PATH = "/api/v1/openapi.json"
SERVERS = [
    {
        "url": "{scheme}://{host}:{port}",
        "description": "a NetApp instance (https when it has tls_cert and tls_key)",
        "variables": {
            "scheme": {"default": "http", "enum": ["http", "https"]},
            "host": {"default": "127.0.0.1"},
            "port": {"default": "8080"},
        },
    }
]
# Schema keywords FastAPI's OpenAPI models hold as floats; integral ones go back to integers.
_NUMERIC_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
# FastAPI documents 422 and its own error schemas; this API answers 400 with a Problem instead.
_FASTAPI_ERROR_SCHEMAS = ("HTTPValidationError", "ValidationError")


def install_openapi(app: FastAPI) -> None:
    """Serve (and cache) our document instead of FastAPI's."""

    def cached() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = openapi_document(app)
        return app.openapi_schema

    app.openapi = cached  # type: ignore[method-assign]


def openapi_document(app: FastAPI) -> dict[str, Any]:
    document = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        servers=SERVERS,
        separate_input_output_schemas=app.separate_input_output_schemas,
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    _replace_validation_errors(document, schemas)
    _add_problem_schemas(schemas)
    return _integral_bounds(document)


def _integral_bounds(node: Any) -> Any:
    """{"maximum": 63.0} -> {"maximum": 63}, everywhere in the document."""
    if isinstance(node, dict):
        return {
            key: int(value)
            if key in _NUMERIC_KEYWORDS and isinstance(value, float) and value.is_integer()
            else _integral_bounds(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_integral_bounds(item) for item in node]
    return node


def _replace_validation_errors(document: dict[str, Any], schemas: dict[str, Any]) -> None:
    for path_item in document.get("paths", {}).values():
        for operation in path_item.values():
            operation.get("responses", {}).pop("422", None)
    for name in _FASTAPI_ERROR_SCHEMAS:
        schemas.pop(name, None)


def _add_problem_schemas(schemas: dict[str, Any]) -> None:
    problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(problem.pop("$defs", {}))
    problem["description"] = f"RFC 7807 problem details, sent as {PROBLEM_JSON}."
    schemas["Problem"] = problem


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def committed_document() -> dict[str, Any]:
    """The document of the app as built from this source tree."""
    from netapp.api.main import build_routes  # here, not at the top: main imports this module

    return build_routes().openapi()


def export(path: Union[str, Path]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(committed_document()), encoding="utf-8")
    return path


if __name__ == "__main__":
    print(export(sys.argv[1] if len(sys.argv) > 1 else "api/openapi.json"))
