"""How CLI commands show values in tables and lines: one spelling per kind of value, so that a TEID,
a yes/no or a missing value looks the same whichever command prints it."""

from __future__ import annotations

from typing import Any, Mapping

from netapp.intents.overlap import IMPLIED_FIELDS, PROTOCOL_NAMES


def cell(value: Any) -> str:
    """A table cell: nothing for a missing value, yes/no for a boolean, else the value."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def teid(value: int) -> str:
    """A GTP-U TEID, as dppctl and the overlap warnings write it: 0x8894d0d4."""
    return f"{value:#010x}"


def field_value(name: str, value: Any) -> str:
    if name == "teid" and isinstance(value, int) and not isinstance(value, bool):
        return teid(value)
    if name == "protocol" and isinstance(value, int) and not isinstance(value, bool):
        return PROTOCOL_NAMES.get(value, str(value))
    return cell(value)


def fields_summary(fields: Mapping[str, Any]) -> str:
    """A match or an action as "name=value ...": what is set, TEIDs in hex, protocols by name, and
    none of the flag fields a compiled rule adds on its own (has_vni, gtp, fragment, family)."""
    return " ".join(
        f"{name}={field_value(name, value)}"
        for name, value in fields.items()
        if value is not None and name not in IMPLIED_FIELDS
    )
