"""`netapp tenants ...`: the traffic each tenant owns and its quotas (admins), through the REST API."""

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

app = typer.Typer(help="Tenants: the traffic each may act on, its quotas and usage.", no_args_is_help=True)
BASE = "/api/v1/tenants"


@app.command("grant")
def grant(
    tenant: str,
    file: Annotated[Path, typer.Option("-f", "--file", help="The tenant's record: traffic, snssais, quotas (JSON or YAML).")],
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Create or replace TENANT's record (admin): e.g. {"traffic": [{"overlay": "vxlan", "vni": 1093}]}."""
    try:
        spec = read_data(file)
    except IntentError as exc:
        fail(f"{file}: {exc.line()}", EXIT_BAD_INPUT)
    response = Api.from_options(url, token).request("PUT", f"{BASE}/{tenant}", json=spec)
    Console().print(f"{'created' if response.status_code == 201 else 'replaced'} {tenant}")


@app.command("list")
def list_tenants(url: UrlOption = None, token: TokenOption = None) -> None:
    """Every tenant with a record, what it owns and what it holds (admin)."""
    kinds = ("intents", "slices", "subscriptions", "streams", "frer_streams", "atsss_sessions")
    table = Table("tenant", "traffic", *kinds)
    for record in Api.from_options(url, token).get(BASE):
        spec, usage, quotas = record["spec"], record["usage"], record["spec"]["quotas"]
        owned = "site-wide" if spec["site"] else f"{len(spec['traffic'])} grants"
        table.add_row(
            record["tenant"], owned, *(f"{usage[k]}/{quotas[k]}" for k in kinds)
        )
    Console().print(table)


@app.command("get")
def get(tenant: str, url: UrlOption = None, token: TokenOption = None) -> None:
    """TENANT's record and usage as JSON (a tenant reads its own)."""
    Console().print_json(json.dumps(Api.from_options(url, token).get(f"{BASE}/{tenant}")))


@app.command("delete")
def delete(tenant: str, url: UrlOption = None, token: TokenOption = None) -> None:
    """Remove TENANT's record (admin); refused while it holds intents or slices."""
    Api.from_options(url, token).request("DELETE", f"{BASE}/{tenant}")
    Console().print(f"deleted {tenant}")
