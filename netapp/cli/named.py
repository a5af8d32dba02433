"""Commands that apply a file of named objects (FRER streams, ATSSS sessions) through the REST API:
one PUT each, by its name, in order; the first refusal stops."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Optional

from netapp.cli.client import Api
from netapp.cli.errors import EXIT_BAD_INPUT, fail
from netapp.intents.errors import IntentError
from netapp.intents.loader import read_data


def named_entries(data: Any, plural: str, kind: str) -> list[dict]:
    """The objects a file holds: one object, a list, or a document's `plural`."""
    if isinstance(data, dict) and plural in data:
        data = data[plural]
    entries = data if isinstance(data, list) else [data]
    if not all(isinstance(entry, dict) and isinstance(entry.get("name"), str) for entry in entries):
        raise ValueError(f"every {kind} must be an object with a name")
    return entries


def put_named(file: Path, plural: str, kind: str, collection: str, url: Optional[str],
              token: Optional[str]) -> Iterator[tuple[dict, bool]]:
    """PUT each object of `file` at `<collection>/<name>`: (the API's answer, whether created)."""
    try:
        entries = named_entries(read_data(file), plural, kind)
    except IntentError as exc:
        fail(f"{file}: {exc.line()}", EXIT_BAD_INPUT)
    except ValueError as exc:
        fail(f"{file}: {exc}", EXIT_BAD_INPUT)
    api = Api.from_options(url, token)
    for entry in entries:
        response = api.request("PUT", f"{collection}/{entry['name']}", json=entry)
        yield response.json(), response.status_code == 201
