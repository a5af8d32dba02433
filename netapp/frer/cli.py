"""`netapp frer ...`: FRER's protected streams and counters, through the REST API (/api/v1/frer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from netapp.cli.client import Api
from netapp.cli.named import put_named
from netapp.cli.options import TokenOption, UrlOption

app = typer.Typer(help="FRER (IEEE 802.1CB): protected streams, replicated and eliminated.", no_args_is_help=True)
streams = typer.Typer(help="Protected streams: how they are identified, generated or recovered here.",
                      no_args_is_help=True)
app.add_typer(streams, name="streams")
BASE = "/api/v1/frer"
STREAMS = f"{BASE}/streams"
JsonOption = Annotated[bool, typer.Option("--json", help="The API's answer as JSON instead of a table.")]
NameArgument = Annotated[str, typer.Argument(help="The stream's name.")]


def _uses(stream: dict) -> str:
    """Where a stream's frames go from here, in words."""
    if stream.get("generation"):
        return "replicated to " + ", ".join(port["interface"] for port in stream["generation"]["ports"])
    return f"delivered to {stream['recovery'].get('deliver_interface') or 'the stack'}"


@streams.command("list")
def list_streams(as_json: JsonOption = False, url: UrlOption = None, token: TokenOption = None) -> None:
    """Every stream the caller may see, one row each."""
    found = Api.from_options(url, token).get(STREAMS)
    if as_json:
        Console().print_json(json.dumps(found))
        return
    table = Table("tenant", "name", "handle", "role", "identities", "here", caption=f"{len(found)} streams")
    for stream in found:
        role = "generation" if stream.get("generation") else "recovery"
        table.add_row(stream["tenant"], stream["name"], str(stream["handle"]), role,
                      str(len(stream["identification"])), _uses(stream))
    Console().print(table)


@streams.command("apply")
def apply(
    file: Annotated[Path, typer.Argument(help="A stream, a list of them or {\"streams\": [...]}, JSON or YAML.")],
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Create or replace each stream of FILE by its name (PUT), in order; the first refusal stops."""
    for stream, created in put_named(file, "streams", "stream", STREAMS, url, token):
        done = "created" if created else "replaced"
        Console().print(f"{done} {stream['name']} (handle {stream['handle']}, {_uses(stream)})", markup=False)


@streams.command("delete")
def delete(name: NameArgument, url: UrlOption = None, token: TokenOption = None) -> None:
    """Delete the stream NAME: its frames go on as without FRER."""
    Api.from_options(url, token).request("DELETE", f"{STREAMS}/{name}")
    Console().print(f"deleted {name}", markup=False)


@streams.command("counters")
def counters(name: NameArgument, as_json: JsonOption = False, url: UrlOption = None, token: TokenOption = None) -> None:
    """The 802.1CB counters of the stream NAME on this node."""
    found = Api.from_options(url, token).get(f"{STREAMS}/{name}/counters")
    if as_json:
        Console().print_json(json.dumps(found))
        return
    table = Table("counter", "value", caption=f"{found['name']} (handle {found['handle']}, {found['role']})")
    if found["next_sequence_number"] is not None:
        table.add_row("next sequence number", str(found["next_sequence_number"]))
    for counter, value in (found["recovery"] or {}).items():
        table.add_row(counter, str(value))
    if found["recovery"] is None and found["next_sequence_number"] is None:
        table.add_row("-", "none: the stream is not in a data path on this node")
    Console().print(table)


@app.command("ports")
def ports(as_json: JsonOption = False, url: UrlOption = None, token: TokenOption = None) -> None:
    """Ports that received frames whose R-tag could not be read (admin)."""
    found = Api.from_options(url, token).get(f"{BASE}/ports")
    if as_json:
        Console().print_json(json.dumps(found))
        return
    table = Table("interface", "ifindex", "frerCpsSeqEncErroredPackets", caption=f"{len(found)} ports")
    for port in found:
        table.add_row(port["interface"] or "-", str(port["ifindex"]), str(port["frerCpsSeqEncErroredPackets"]))
    Console().print(table)
