"""`netapp routes ...`: the private routing tables' routes, through the REST API (/api/v1/routes)."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from netapp.cli.client import Api
from netapp.cli.options import TokenOption, UrlOption

app = typer.Typer(help="Routes of the private routing tables (network instances with upf.routing private).",
                  no_args_is_help=True)
BASE = "/api/v1/routes"
InstanceArgument = Annotated[str, typer.Argument(help="The network instance (upf.routing private).")]
PrefixArgument = Annotated[str, typer.Argument(help="The destinations, e.g. 10.0.0.0/8 or 2001:db8::/32.")]


def _resolved(value: Optional[bool]) -> str:
    return {True: "yes", False: "no", None: "-"}[value]


@app.command("list")
def list_routes(
    as_json: Annotated[bool, typer.Option("--json", help="The API's answer as JSON instead of a table.")] = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Every route, one row each, with whether its gateway is resolved."""
    routes = Api.from_options(url, token).get(BASE)
    if as_json:
        Console().print_json(json.dumps(routes))
        return
    table = Table("instance", "prefix", "gateway", "device", "resolved", caption=f"{len(routes)} routes")
    for route in routes:
        table.add_row(route["instance"], route["prefix"], route["gateway"] or "on-link", route["device"],
                      _resolved(route["resolved"]))
    Console().print(table)


@app.command("add")
def add(
    instance: InstanceArgument,
    prefix: PrefixArgument,
    device: Annotated[str, typer.Option("--dev", help="The egress interface.")],
    gateway: Annotated[Optional[str], typer.Option("--via", help="The next hop; none: on-link.")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Create or replace the route of PREFIX in INSTANCE (as `ip route replace PREFIX via GW dev DEV`)."""
    body = {"instance": instance, "prefix": prefix, "gateway": gateway, "device": device}
    route = Api.from_options(url, token).request("POST", BASE, json=body).json()
    via = f"via {route['gateway']} " if route["gateway"] else ""
    Console().print(f"{route['instance']}: {route['prefix']} {via}dev {route['device']}", markup=False)


@app.command("delete")
def delete(instance: InstanceArgument, prefix: PrefixArgument, url: UrlOption = None,
           token: TokenOption = None) -> None:
    """Delete the route of PREFIX in INSTANCE."""
    Api.from_options(url, token).request("DELETE", BASE, params={"instance": instance, "prefix": prefix})
    Console().print(f"deleted {instance}: {prefix}", markup=False)
