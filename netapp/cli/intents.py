"""`netapp intents ...`: apply, list, show and delete intents through the REST API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from netapp.cli.client import Api
from netapp.cli.dry_run import merged, offline_report, show_report
from netapp.cli.errors import EXIT_BAD_INPUT, fail, warn
from netapp.cli.options import TokenOption, UrlOption
from netapp.cli.present import fields_summary
from netapp.intents.errors import IntentError
from netapp.intents.loader import read_data
from netapp.intents.models import LEGACY_ID_PREFIX, is_legacy

app = typer.Typer(help="Intents: which traffic matters and what to do with it.", no_args_is_help=True)
BASE = "/api/v1/intents"


def entries_of(data: Any) -> list[dict]:
    """The intents a file holds: one intent, a list, or a document's "intents" (native or legacy)."""
    if isinstance(data, dict) and "intents" in data:
        data = data["intents"]
    entries = data if isinstance(data, list) else [data]
    if not all(isinstance(entry, dict) for entry in entries):
        raise ValueError("every intent must be a JSON object")
    return entries


def _load(path: Path, dry_run: bool) -> list[dict]:
    try:
        data = read_data(path)
        entries = entries_of(data)
    except IntentError as exc:
        fail(f"{path}: {exc.line()}", EXIT_BAD_INPUT)
    except ValueError as exc:
        fail(f"{path}: {exc}", EXIT_BAD_INPUT)
    site = [key for key in SITE_KEYS if isinstance(data, dict) and key in data]
    if site and not dry_run:
        warn(f"{path}: {', '.join(site)} not applied (this applies intents; an admin sets alternatives and "
             "CPUs with PUT /api/v1/alternatives/ID and /api/v1/dataplane/cpus/CPU, defaults in the settings)")
    return entries


# What a document holds besides intents: the site, not changed by `intents apply`.
SITE_KEYS = ("alternatives", "cpus", "default_verdict", "default_alternative")


def _apply_one(api: Api, entry: dict) -> tuple[str, str, Any]:
    """Create a native intent, or replace it when it exists; legacy messages go to their own door,
    an INSERT of an intent that exists as an UPDATE (create or replace, as for native intents).
    Returns what happened, to which intent id, and the answer."""
    if is_legacy(entry):
        if _legacy_insert_of_existing(api, entry):
            entry = {**entry, "Action": {**entry["Action"], "actionType": "UPDATE"}}
        response = api.request("POST", f"{BASE}/legacy", json=entry)
        body = response.json() if response.content else None
        outcome = {201: "created", 204: "deleted"}.get(response.status_code, "replaced")
        return outcome, body["intent"]["id"] if body else _legacy_id(entry), body
    if api.exists(f"{BASE}/{entry.get('id')}"):
        response = api.request("PUT", f"{BASE}/{entry['id']}", json=entry)
        return "replaced", entry["id"], response.json()
    response = api.request("POST", BASE, json=entry)
    return ("created" if response.status_code == 201 else "unchanged"), entry["id"], response.json()


def _legacy_id(entry: dict) -> str:
    """The id the NetApp stores a legacy message's intent under (LegacyMessage.to_intent)."""
    return LEGACY_ID_PREFIX + str(entry.get("Action", {}).get("flow_hash", "")).lower()


def _legacy_insert_of_existing(api: Api, entry: dict) -> bool:
    """Whether a legacy message is an INSERT of an intent id (legacy-<flow_hash>) that exists. A
    malformed message is sent as it is, for the API to name what is wrong."""
    action = entry.get("Action")
    if not isinstance(action, dict) or action.get("actionType") != "INSERT":
        return False
    flow_hash = action.get("flow_hash")
    return isinstance(flow_hash, str) and api.exists(f"{BASE}/{LEGACY_ID_PREFIX}{flow_hash.lower()}")


BATCH_LIMIT = 1000  # the API's limit on one batch create


def _create_batch(api: Api, entries: list[dict]) -> list[tuple[str, Any]]:
    """Create new native intents: one request for several (all or none), POST /intents for one.
    Warns of what the answers warn of."""
    if len(entries) == 1:
        response = api.request("POST", BASE, json=entries[0])
        return [("created" if response.status_code == 201 else "unchanged", response.json())]
    outcomes = []
    for start in range(0, len(entries), BATCH_LIMIT):
        response = api.request("POST", f"{BASE}/batch", json={"intents": entries[start : start + BATCH_LIMIT]})
        outcomes += [("created", record) for record in response.json()["items"]]
        warn_of(response.json())
    return outcomes


def warn_of(body: Any) -> None:
    """The answer's `warnings`, one line each on stderr."""
    for warning in body.get("warnings", []) if isinstance(body, dict) else []:
        warn(warning_line(warning))


def warning_line(warning: dict) -> str:
    """One warning of an answer (IntentWarning) as a line."""
    if warning["kind"] == "overlap":
        return (
            f"overlap: {warning['intent_a']} and {warning['intent_b']} both match {warning['shared']}; "
            f"{warning['winner']} gets them ({warning['reason']})"
        )
    return f"{warning['kind']}: {warning['reason']}"


@app.command("apply")
def apply(
    file: Annotated[Path, typer.Option("-f", "--file", help="Intents (JSON or YAML): one, a list, or a document.")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the rules, conflicts and overlaps; change nothing.")
    ] = False,
    offline: Annotated[
        bool,
        typer.Option("--offline", help="With --dry-run: compile here, without a server (the file's intents "
                     "compared with each other only; interface names not checked)."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="With --dry-run: the report as JSON.")] = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Create or replace every intent of FILE (a legacy INSERT of an intent that exists is sent as
    an UPDATE, other legacy messages as they are; a document's alternatives, CPUs and defaults are
    not applied). Consecutive new native intents are created together in one batch request (one
    transaction). Warnings, such as intents of other shapes that match some of the same packets, go
    to stderr, one line each."""
    for flag, given in (("--offline", offline), ("--json", as_json)):
        if given and not dry_run:
            fail(f"{flag} goes with --dry-run (it says how to show what would be done)", EXIT_BAD_INPUT)
    if dry_run:
        _dry_run(file, offline, as_json, url, token)
        return
    api = Api.from_options(url, token)
    console = Console()
    pending: list[dict] = []  # new native intents, created together before anything that follows

    def report(outcome: str, name: str, body: Any) -> None:
        console.print(f"{outcome} {name}", markup=False, highlight=False)
        warn_of(body)

    def flush() -> None:
        for entry, (outcome, body) in zip(pending, _create_batch(api, pending) if pending else [], strict=True):
            report(outcome, entry["id"], body)
        pending.clear()

    for entry in _load(file, dry_run=False):
        if not is_legacy(entry) and not api.exists(f"{BASE}/{entry.get('id')}"):
            pending.append(entry)
            continue
        flush()
        report(*_apply_one(api, entry))
    flush()


def _dry_run(file: Path, offline: bool, as_json: bool, url: Optional[str], token: Optional[str]) -> None:
    """The report of compiling FILE: here (offline), or by the NetApp against what it holds, the
    new native intents in one batch and each legacy message through its own door."""
    if offline:
        report, interfaces = offline_report(file)
        note = "offline: compared with each other only, not with what a NetApp holds"
        if interfaces:
            note += f"; interfaces taken as named: {', '.join(interfaces)}"
    else:
        api = Api.from_options(url, token)
        entries = _load(file, dry_run=True)
        native = [entry for entry in entries if not is_legacy(entry)]
        answers = [
            api.request("POST", f"{BASE}/batch", json={"intents": native[start : start + BATCH_LIMIT]},
                        params={"dry_run": "true"}).json()
            for start in range(0, len(native), BATCH_LIMIT)
        ]
        answers += [api.request("POST", f"{BASE}/legacy", json=entry, params={"dry_run": "true"}).json()
                    for entry in entries if is_legacy(entry)]
        report, note = merged(answers), ""
    show_report(report, Console(), as_json, note)
    warn_of(report)


@app.command("list")
def list_intents(
    slice_id: Annotated[Optional[str], typer.Option("--slice", help="Only this slice's intents.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Page size.")] = 100,
    offset: Annotated[int, typer.Option(min=0, help="First item.")] = 0,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """The intents this token may see, one row each."""
    page = Api.from_options(url, token).get(BASE, slice=slice_id, limit=limit, offset=offset)
    table = Table("id", "priority", "class", "match", "action", "slice", "tenant",
                  caption=f"{len(page['items'])} of {page['total']}")
    for record in page["items"]:
        intent = record["intent"]
        table.add_row(intent["id"], str(intent["priority"]), intent["traffic_class"],
                      fields_summary(intent["match"]), fields_summary(intent["action"]),
                      record.get("slice_id") or "", record["tenant"])
    Console().print(table)


@app.command("get")
def get(intent_id: str, url: UrlOption = None, token: TokenOption = None) -> None:
    """One intent as stored, as JSON."""
    Console().print_json(json.dumps(Api.from_options(url, token).get(f"{BASE}/{intent_id}")))


@app.command("delete")
def delete(intent_id: str, url: UrlOption = None, token: TokenOption = None) -> None:
    """Remove an intent (its rules leave the data plane in the same transaction)."""
    Api.from_options(url, token).request("DELETE", f"{BASE}/{intent_id}")
    Console().print(f"deleted {intent_id}")
