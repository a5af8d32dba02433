"""JSON Schemas of the intent formats, exported from the pydantic models (the one schema).

`python -m netapp.intents.schema api/schemas` rewrites the committed files; a test fails when they
drift from the models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Union

from pydantic import TypeAdapter

from netapp.intents.models import Intent, IntentDocumentIn, IntentEntry, LegacyMessage

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def intent_schema() -> dict[str, Any]:
    """One intent, native or in the paper's legacy format."""
    schema = TypeAdapter(Union[Intent, LegacyMessage]).json_schema()
    return _titled(
        schema, "Intent", "A DPP NetApp intent: native, or the paper's Resources/Action/Params message."
    )


def intent_document_schema() -> dict[str, Any]:
    """What an intents file holds: a document object, one intent, or a list of intents."""
    schema = TypeAdapter(Union[IntentDocumentIn, IntentEntry, list[IntentEntry]]).json_schema()
    return _titled(
        schema,
        "IntentDocument",
        "An intents file: a document object (intents, alternatives, cpus, defaults), one intent, or a list of intents.",
    )


def _titled(schema: dict[str, Any], title: str, description: str) -> dict[str, Any]:
    return {"$schema": SCHEMA_DIALECT, "title": title, "description": description, **schema}


def schemas() -> dict[str, dict[str, Any]]:
    """File name -> schema, as committed under api/schemas/."""
    return {
        "intent.schema.json": intent_schema(),
        "intent-document.schema.json": intent_document_schema(),
    }


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"


def export(directory: Union[str, Path]) -> list[Path]:
    """Write every schema into `directory`; returns the files written."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in schemas().items():
        path = directory / name
        path.write_text(render(schema), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for written_path in export(sys.argv[1] if len(sys.argv) > 1 else "api/schemas"):
        print(written_path)
