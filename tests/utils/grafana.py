"""Reading the Grafana dashboard's JSON model as Grafana would, for the tests: its panels and
targets, its variables, and each query with Grafana's macros and variables substituted, so that
InfluxDB can run it. Grafana itself does not run in the tests."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# What Grafana puts for its macros: the last hour, and the smallest interval (the poll interval).
MACROS = {"$timeFilter": "time > now() - 1h", "$__interval": "1s"}
VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")
# Grafana escapes these in a value it puts inside an InfluxQL /regex/ (lodash escapeRegExp and /).
_REGEX_SPECIAL = re.compile(r"([\\^$*+?.()|\[\]{}/])")


@dataclass(frozen=True)
class Target:
    panel: str
    ref_id: str
    query: str

    def __str__(self) -> str:
        return f"{self.panel!r} {self.ref_id}"


def panels(model: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every panel but the rows (which hold none here: no row is collapsed)."""
    return [panel for panel in model["panels"] if panel["type"] != "row"]


def targets(model: Mapping[str, Any]) -> Iterator[Target]:
    for panel in panels(model):
        for target in panel["targets"]:
            yield Target(panel["title"], target["refId"], target["query"])


def variables(model: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> variable, in the dashboard's order (each may use those before it)."""
    return {variable["name"]: variable for variable in model["templating"]["list"]}


def names_in(query: str) -> set[str]:
    """The variables and macros a query uses, without their `$`."""
    return {braced or bare for braced, bare in VARIABLE.findall(query)}


def regex_escaped(value: str) -> str:
    return _REGEX_SPECIAL.sub(r"\\\1", value)


def substituted(query: str, values: Mapping[str, str]) -> str:
    """The query with Grafana's macros and the variables' values (regexes, as the queries use
    them in /^$name$/) in place; a name neither knows stays, for the caller to notice."""
    for macro, text in MACROS.items():
        query = query.replace(macro, text)
    return VARIABLE.sub(lambda match: values.get(match.group(1) or match.group(2), match.group(0)), query)
