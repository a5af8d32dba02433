"""`netapp sessions ...`: the UPF's PFCP sessions, read-only, through the REST API (/api/v1/upf)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from netapp.cli.client import Api
from netapp.cli.errors import EXIT_BAD_INPUT, fail
from netapp.cli.options import TokenOption, UrlOption

app = typer.Typer(help="PFCP sessions of the UPF (read-only): their PDRs, FARs, QERs and URRs.", no_args_is_help=True)
BASE = "/api/v1/upf/sessions"
JsonOption = Annotated[bool, typer.Option("--json", help="The API's answer as JSON instead of a table.")]


def _teids(session: dict[str, Any]) -> str:
    teids = [pdr["pdi"]["local_fteid"]["teid"] for pdr in session["pdrs"] if pdr["pdi"].get("local_fteid")]
    return ",".join(f"{teid:#010x}" for teid in sorted(set(teid for teid in teids if teid is not None)))


def _ue(session: dict[str, Any]) -> str:
    addresses = {
        address
        for pdr in session["pdrs"]
        if pdr["pdi"].get("ue_ip")
        for address in (pdr["pdi"]["ue_ip"].get("ipv4"), pdr["pdi"]["ue_ip"].get("ipv6"))
        if address
    }
    return ",".join(sorted(addresses))


def _usage(session: dict[str, Any]) -> str:
    """Per URR, the bytes counted up and down (the API's `usage`); "-" where no data path counts."""
    if session.get("usage") is None:
        return "-"
    return " ".join(f"{urr['urr_id']}:{urr['ul_bytes']}/{urr['dl_bytes']}" for urr in session["usage"])


@app.command("list")
def list_sessions(
    node_id: Annotated[
        Optional[str], typer.Option("--node-id", help="Admins: this association's sessions only.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Page size.")] = 100,
    offset: Annotated[int, typer.Option(min=0, help="First item.")] = 0,
    as_json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """The sessions this token may see (its association's; an admin's: all), one row each."""
    page = Api.from_options(url, token).get(BASE, node_id=node_id, limit=limit, offset=offset)
    if as_json:
        Console().print_json(json.dumps(page))
        return
    table = Table("seid", "node id", "cp seid", "ue", "teids", "pdrs", "fars", "qers", "urrs",
                  "usage (urr:ul/dl bytes)", caption=f"{len(page['items'])} of {page['total']}")
    for session in page["items"]:
        table.add_row(
            str(session["seid"]), session["node_id"], f"{session['remote']['seid']:#x}", _ue(session), _teids(session),
            *(str(len(session[kind])) for kind in ("pdrs", "fars", "qers", "urrs")), _usage(session),
        )
    Console().print(table)


@app.command("get")
def get(seid: Annotated[str, typer.Argument(help="The UPF's SEID: decimal, or hex with 0x.")], url: UrlOption = None,
        token: TokenOption = None) -> None:
    """One session with its rules as stored and its URRs' usage now, as JSON."""
    try:
        number = int(seid, 0)
    except ValueError:
        fail(f"SEID {seid!r}: not a number (decimal, or hex with 0x)", EXIT_BAD_INPUT)
    Console().print_json(json.dumps(Api.from_options(url, token).get(f"{BASE}/{number}")))
