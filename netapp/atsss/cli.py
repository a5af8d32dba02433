"""`netapp atsss ...`: ATSSS sessions, their paths' state and counters, through the REST API
(/api/v1/atsss)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from netapp.cli.client import Api
from netapp.cli.errors import EXIT_BAD_INPUT, fail
from netapp.cli.named import put_named
from netapp.cli.options import TokenOption, UrlOption

app = typer.Typer(help="ATSSS: UEs' downlinks split over several accesses (MP-DCCP).", no_args_is_help=True)
sessions = typer.Typer(help="ATSSS sessions: a UE, its access paths and steering mode.", no_args_is_help=True)
app.add_typer(sessions, name="sessions")
SESSIONS = "/api/v1/atsss/sessions"
JsonOption = Annotated[bool, typer.Option("--json", help="The API's answer as JSON instead of a table.")]
NameArgument = Annotated[str, typer.Argument(help="The session's name.")]


def _paths(session: dict) -> str:
    """The session's paths in words: access, peer, down or congested."""
    return ", ".join(f"{path['access']} {path['peer']}{_state(path)}" for path in session["paths"])


def _state(path: dict) -> str:
    said = [word for word, is_so in (("down", not path["up"]), ("congested", path.get("congested"))) if is_so]
    return f" ({', '.join(said)})" if said else ""


@sessions.command("list")
def list_sessions(as_json: JsonOption = False, url: UrlOption = None, token: TokenOption = None) -> None:
    """Every session the caller may see, one row each."""
    found = Api.from_options(url, token).get(SESSIONS)
    if as_json:
        Console().print_json(json.dumps(found))
        return
    table = Table("tenant", "name", "ue", "mode", "paths", caption=f"{len(found)} sessions")
    for session in found:
        mode = session["effective_mode"] + (f" (MTS {session['mts_session']})" if session["mts_session"] else "")
        table.add_row(session["tenant"], session["name"], session["ue"], mode, _paths(session))
    Console().print(table)


@sessions.command("apply")
def apply(
    file: Annotated[Path, typer.Argument(help="A session, a list of them or {\"sessions\": [...]}, JSON or YAML.")],
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Create or replace each session of FILE by its name (PUT), in order; the first refusal stops."""
    for session, created in put_named(file, "sessions", "session", SESSIONS, url, token):
        done = "created" if created else "replaced"
        Console().print(f"{done} {session['name']} (UE {session['ue']}, slots {session['slots']})", markup=False)


@sessions.command("path")
def path(
    name: NameArgument,
    index: Annotated[int, typer.Argument(help="The path's position in the session (0..3).")],
    up: Annotated[Optional[bool], typer.Option("--up/--down", help="Report the path up or down.")] = None,
    rtt_us: Annotated[Optional[int], typer.Option("--rtt-us", help="The path's smoothed RTT in µs.")] = None,
    weight: Annotated[Optional[int], typer.Option("--weight", help="The path's weight (weighted mode).")] = None,
    loss: Annotated[Optional[float], typer.Option(
        "--loss", help="The part of the path's packets lost, 0-1 (what MEC 015 QoS sessions' maxLoss is checked "
        "against; e.g. the counters' loss over a recent window).")] = None,
    congested: Annotated[Optional[bool], typer.Option(
        "--congested/--not-congested", help="Report the path congested or not (priority mode).")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Feed one path's state: up or down, RTT, weight, loss, congested (PATCH); the rest of the session is kept."""
    given = (("up", up), ("rtt_us", rtt_us), ("weight", weight), ("loss", loss), ("congested", congested))
    change = {key: value for key, value in given if value is not None}
    if not change:
        fail("give --up/--down, --rtt-us, --weight, --loss or --congested/--not-congested", EXIT_BAD_INPUT)
    session = Api.from_options(url, token).request("PATCH", f"{SESSIONS}/{name}",
                                                   json={"paths": [{"index": index, **change}]}).json()
    Console().print(f"{session['name']}: {_paths(session)}", markup=False)


@sessions.command("delete")
def delete(name: NameArgument, url: UrlOption = None, token: TokenOption = None) -> None:
    """Delete the session NAME: the UE's packets go on as without ATSSS."""
    Api.from_options(url, token).request("DELETE", f"{SESSIONS}/{name}")
    Console().print(f"deleted {name}", markup=False)


@sessions.command("counters")
def counters(name: NameArgument, as_json: JsonOption = False, url: UrlOption = None, token: TokenOption = None) -> None:
    """What each path of the session NAME sent on this node, and its share."""
    found = Api.from_options(url, token).get(f"{SESSIONS}/{name}/counters")
    if as_json:
        Console().print_json(json.dumps(found))
        return
    table = Table("path", "slot", "access", "up", "rtt µs", "packets", "bytes", "share", "lost",
                  caption=f"{found['name']} (UE {found['ue']})")
    for row in found["paths"]:
        table.add_row(str(row["index"]), str(row["slot"]), row["access"], "yes" if row["up"] else "no",
                      str(row["rtt_us"]), str(row["packets"]), str(row["bytes"]), _ratio(row["share"]),
                      _ratio(row["loss"]))
    if not found["paths"]:
        table.add_row("-", "-", "-", "-", "-", "-", "-", "not in a data path on this node", "-")
    Console().print(table)


def _ratio(value: Optional[float]) -> str:
    """A share or loss as a percentage; "-" when not known (no packets yet, no Ack Vector yet)."""
    return "-" if value is None else f"{value:.1%}"
