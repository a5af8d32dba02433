"""`netapp slices ...`: network slices for a slicing manager or an operator, through the REST API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from netapp.cli.client import Api
from netapp.cli.errors import EXIT_BAD_INPUT, fail
from netapp.cli.options import TokenOption, UrlOption
from netapp.intents.errors import IntentError
from netapp.intents.loader import read_data

app = typer.Typer(help="Slices: S-NSSAI, priority, bitrates and member traffic.", no_args_is_help=True)
BASE = "/api/v1/slices"


def _specs(path: Path) -> list[dict]:
    try:
        data = read_data(path)
    except IntentError as exc:
        fail(f"{path}: {exc.line()}", EXIT_BAD_INPUT)
    specs = data.get("slices", [data]) if isinstance(data, dict) else data
    if not isinstance(specs, list) or not all(isinstance(s, dict) and "id" in s for s in specs):
        fail(f"{path}: expected a slice, a list of slices or {{\"slices\": [...]}}, each with an id",
             EXIT_BAD_INPUT)
    return specs


@app.command("apply")
def apply(
    file: Annotated[Path, typer.Option("-f", "--file", help="Slices (JSON or YAML).")],
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Create or resize every slice of FILE; each slice's intents change atomically."""
    api = Api.from_options(url, token)
    for spec in _specs(file):
        response = api.request("PUT", f"{BASE}/{spec['id']}", json=spec)
        Console().print(f"{'created' if response.status_code == 201 else 'updated'} {spec['id']}")


@app.command("list")
def list_slices(url: UrlOption = None, token: TokenOption = None) -> None:
    """The slices this token may see."""
    page = Api.from_options(url, token).get(BASE)
    table = Table("id", "sst", "sd", "priority level", "gbr kbps", "mbr kbps", "cpus", "intents", "tenant")
    for record in page["items"]:
        spec = record["spec"]
        table.add_row(spec["id"], str(spec["snssai"]["sst"]), spec["snssai"].get("sd") or "",
                      str(spec["priority_level"]), str(spec["gbr_kbps"]), str(spec["mbr_kbps"]),
                      ",".join(map(str, spec["cpus"])), str(len(record["intent_ids"])), record["tenant"])
    Console().print(table)


@app.command("get")
def get(slice_id: str, url: UrlOption = None, token: TokenOption = None) -> None:
    """One slice as stored, with its intents, as JSON."""
    Console().print_json(json.dumps(Api.from_options(url, token).get(f"{BASE}/{slice_id}")))


@app.command("delete")
def delete(slice_id: str, url: UrlOption = None, token: TokenOption = None) -> None:
    """Remove a slice and all its intents in one transaction."""
    Api.from_options(url, token).request("DELETE", f"{BASE}/{slice_id}")
    Console().print(f"deleted {slice_id}")
