"""The findings and plans as text (one line per precondition) and as JSON (the same, for machines)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from netapp.openstack.preconditions import Report, Status
from netapp.openstack.preparer import Plan

APPLIES = (
    "flavor and image changes apply to servers booted, rebuilt or resized afterwards; port changes at once"
)


def check_lines(report: Report) -> list[str]:
    """`<status> <check> <subject>: <what>`, then `fix: <command>` under each that is not ok."""
    target = report.target
    head = f"server {target.server}: " if target.server else ""
    lines = [f"{head}flavor {target.flavor}, image {target.image}, {len(target.ports)} data-plane port(s)"]
    width = max(len(status.value) for status in Status)
    for finding in report.findings:
        lines.append(f"{finding.status.value:<{width}} {finding.check} {finding.subject}: {finding.what}")
        if finding.fix:
            lines.append(f"{'':<{width}}   fix: {finding.fix}")
    unmet = len(report.unmet)
    lines.append(f"{unmet} unmet" if unmet else "all preconditions OpenStack shows are met")
    if unmet:
        lines.append(APPLIES)
    return lines


def check_json(report: Report) -> str:
    document: dict[str, Any] = {
        "server": report.target.server,
        "flavor": report.target.flavor,
        "image": report.target.image,
        "ports": [port.name or port.id for port in report.target.ports],
        "met": not report.unmet,
        "findings": [{**asdict(finding), "status": finding.status.value} for finding in report.findings],
    }
    return json.dumps(document, indent=2)


def plan_lines(plan: Plan, dry_run: bool) -> list[str]:
    if not plan.changes:
        lines = ["no changes: flavor, image and ports already meet the preconditions prepare manages"]
    else:
        verb = "would change" if dry_run else "changed"
        lines = [f"{verb} {change.subject}: {change.what}" for change in plan.changes]
        if dry_run:
            lines.append(f"dry run: {len(plan.changes)} change(s) not made")
    lines.extend(f"note: {note}" for note in plan.notes)
    return lines


def plan_json(plan: Plan, dry_run: bool) -> str:
    document = {
        "dry_run": dry_run,
        "changed": bool(plan.changes) and not dry_run,
        "changes": [{"subject": change.subject, "what": change.what} for change in plan.changes],
        "notes": plan.notes,
    }
    return json.dumps(document, indent=2)
