"""`netapp intents apply --dry-run`: the rules a file's intents compile into, their conflicts and
overlaps, without changing anything; from the NetApp's API, or compiled here (--offline).

Offline, the file is compiled as the service compiles it (netapp.intents.index, and the overlap
warnings of netapp.service.overlaps), against an empty data plane: the file's intents are compared
with each other only, never with what a NetApp has installed, and interface names are taken as
written (the server's host resolves them when the file is applied).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from rich.console import Console
from rich.table import Table

from netapp.cli.errors import EXIT_BAD_INPUT, fail
from netapp.cli.present import fields_summary
from netapp.intents.compiler import KEY_FIELD_NAMES, MAX_SHAPES
from netapp.intents.errors import IntentError
from netapp.intents.index import RuleIndex
from netapp.intents.loader import load_document
from netapp.intents.models import Intent
from netapp.service.contract import CompiledRuleView, ConflictView, DryRunReport
from netapp.service.overlaps import overlap_warnings


def offline_report(path: Path) -> tuple[dict[str, Any], list[str]]:
    """The DryRunReport (as the API answers it) of the file's intents, and the interface names they
    use, which nothing here checks."""
    try:
        intents = load_document(path).intents
        names = interface_names(intents)
        report = compile_report(intents, {name: number for number, name in enumerate(names, start=1)})
    except IntentError as exc:
        fail(f"{path}: {exc.line()}", EXIT_BAD_INPUT)
    return report.model_dump(mode="json"), names


def interface_names(intents: Iterable[Intent]) -> list[str]:
    """Every interface the intents name (ingress matches and redirects), in order of appearance."""
    names: dict[str, None] = {}
    for intent in intents:
        for name in (intent.match.interface, getattr(intent.action, "interface", None)):
            if name is not None:
                names.setdefault(name)
    return list(names)


def compile_report(intents: list[Intent], interfaces: dict[str, int]) -> DryRunReport:
    """Rules, collisions and overlap warnings of `intents` on a data plane holding nothing else."""
    index = RuleIndex(interfaces)
    compiled = [index.compile(intent) for intent in intents]
    for rule in compiled:
        index.add(rule)
    names = {ifindex: name for name, ifindex in interfaces.items()}
    conflicts = [
        ConflictView(kind=c.kind, intent_a=c.intent_a, intent_b=c.intent_b, reason=c.reason)  # type: ignore[arg-type]
        for c in index.conflicts()
    ]
    return DryRunReport(
        rules=[CompiledRuleView.of(rule, rule.intent_id, names) for rule in compiled],
        conflicts=conflicts,
        warnings=overlap_warnings(index, [rule.intent_id for rule in compiled], str, ()),
    )


def merged(reports: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Several answers of the API (a batch's and each legacy message's) as one report."""
    total: dict[str, Any] = {"applied": False, "rules": [], "conflicts": [], "warnings": []}
    for report in reports:
        for key in ("rules", "conflicts", "warnings"):
            total[key] += report.get(key) or []
    return total


def show_report(report: dict[str, Any], console: Console, as_json: bool, note: str = "") -> None:
    """The report on stdout: a summary line, the rules, their shapes and a line per conflict, or its
    JSON. (Its warnings are for the caller to print, as every apply does.)"""
    if as_json:
        console.print_json(json.dumps(report))
        return
    rules, conflicts = report["rules"], report["conflicts"]
    summary = f"dry run, nothing applied: {_count(rules, 'rule')}, {_count(conflicts, 'conflict')}"
    console.print(summary + (f"; {note}" if note else ""), markup=False, highlight=False)
    if rules:
        console.print(rules_table(rules))
        console.print(shapes_table(rules))
    for conflict in conflicts:
        console.print(f"{conflict['kind']}: {conflict['intent_a']} / {conflict['intent_b']}: {conflict['reason']}",
                      markup=False, highlight=False)


def rules_table(rules: list[dict[str, Any]]) -> Table:
    table = Table(title="rules", title_justify="left")
    table.add_column("intent", overflow="fold")
    table.add_column("priority", justify="right")
    table.add_column("match", overflow="fold")
    table.add_column("action", overflow="fold")
    for rule in rules:
        match = {name: rule["match"][name] for name in sorted(rule["match"], key=_key_order)}
        table.add_row(rule["intent_id"], str(rule["priority"]), fields_summary(match) or "every packet", _action(rule))
    return table


def shapes_table(rules: list[dict[str, Any]]) -> Table:
    """The shapes the rules take, each a hash table the data plane searches (at most MAX_SHAPES)."""
    counts = Counter(rule["shape"] for rule in rules)
    table = Table(title=f"shapes (the data plane searches at most {MAX_SHAPES})", title_justify="left")
    table.add_column("shape", overflow="fold")
    table.add_column("rules", justify="right")
    for shape, count in counts.items():
        table.add_row(shape, str(count))
    return table


def _key_order(name: str) -> int:
    return KEY_FIELD_NAMES.index(name) if name in KEY_FIELD_NAMES else len(KEY_FIELD_NAMES)


def _action(rule: dict[str, Any]) -> str:
    details = (f"{key} {rule[key]}" for key in ("cpu", "alternative") if rule.get(key) is not None)
    return " ".join((rule["action"], *details))


def _count(items: list, noun: str) -> str:
    return f"{len(items)} {noun}" + ("" if len(items) == 1 else "s")
