"""The Grafana dashboard of the NetApp's InfluxDB telemetry (api/telemetry.md), built with grafanalib.

    python -m netapp.dashboards.grafana [PATH]

writes it to PATH (default: netapp/dashboards/dpp-netapp.json, the file the package ships and the
OSM VNF package carries); a test fails when the committed file drifts from this module.

Every query is InfluxQL for Grafana's InfluxDB data source: InfluxDB 1.8, or 2.x through its
InfluxQL API. The data source is the dashboard variable `datasource`; `node`, `tenant`, `intent`
and `slice` narrow the panels, their "All" the regex `.*` (never the list of every intent). Panels
plot the mean per `$__interval` of the collector's per-second rates (`*_rate` fields), or the
derivative of a counter that has none.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

# The builder needs the `dashboards` extra; the package ships its output and runs without it, so
# this module still imports (and says what is missing) where grafanalib is not installed.
try:
    import attr  # grafanalib's panels are attrs classes
    from grafanalib._gen import DashboardEncoder
    from grafanalib.core import (
        Dashboard,
        GridPos,
        Panel,
        RowPanel,
        Template,
        Templating,
        Time,
        TimeSeries,
    )
    from grafanalib.influxdb import InfluxDBTarget
except ModuleNotFoundError as missing:
    GRAFANALIB_MISSING: Optional[ModuleNotFoundError] = missing
else:
    GRAFANALIB_MISSING = None

from netapp.dashboards import GRAFANA_DASHBOARD

UID = "dpp-netapp"
TITLE = "DPP NetApp"
SCHEMA_VERSION = 36  # Grafana 9 and later: data sources referenced by {type, uid}
DATASOURCE_VARIABLE = "datasource"
DATASOURCE = {"type": "influxdb", "uid": f"${{{DATASOURCE_VARIABLE}}}"}
ALL = "$__all"
ALL_VALUE = ".*"  # "All" as a regex: one short query whatever the number of intents
PANEL_WIDTH, PANEL_HEIGHT, ROW_HEIGHT, COLUMNS = 12, 8, 1, 2
# The AI module's forecast, drawn dashed beside the load it forecasts.
DASHED = {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}
# Reasons whose packets went to an alternative node (dataplane/bpf/nf/steer/steer.h: overflow,
# unavailable).
FORWARD_REASONS = ("cpu_overloaded", "cpu_unavailable")


@dataclass(frozen=True)
class Query:
    """One target: `select` (an InfluxQL selector over one field) from `measurement`, per interval
    and per the `by` tags, on the selected nodes and the variables' tags, with `where` besides."""

    select: str
    measurement: str
    by: tuple[str, ...]
    alias: str
    variables: tuple[str, ...] = ()  # tags narrowed by the dashboard variable of the same name
    where: tuple[str, ...] = ()

    def influxql(self) -> str:
        conditions = [_matches(tag) for tag in ("node", *self.variables)] + [*self.where, "$timeFilter"]
        tags = ", ".join(f'"{tag}"' for tag in ("node", *self.by))
        return (
            f'SELECT {self.select} FROM "{self.measurement}" WHERE {" AND ".join(conditions)} '
            f"GROUP BY time($__interval), {tags} fill(null)"
        )


def _matches(tag: str) -> str:
    return f'"{tag}" =~ /^${tag}$/'


def mean(field: str) -> str:
    return f'mean("{field}")'


def per_second(counter: str) -> str:
    """The rate of a cumulative counter that has no `*_rate` field of its own."""
    return f'non_negative_derivative(last("{counter}"), 1s)'


# --- panels ------------------------------------------------------------------------------------


def timeseries(
    title: str,
    description: str,
    unit: str,
    queries: Sequence[Query],
    overrides: Sequence[dict] = (),
    **options: Any,
) -> TimeSeries:
    targets = [
        InfluxDBTarget(
            query=query.influxql(), alias=query.alias, refId=chr(ord("A") + n), datasource=DATASOURCE
        )
        for n, query in enumerate(queries)
    ]
    return TimeSeries(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=targets,
        unit=unit,
        maxDataPoints=None,  # Grafana's default: one point per pixel at most
        legendDisplayMode="table",
        legendCalcs=["mean", "max", "lastNotNull"],
        tooltipMode="multi",
        overrides=list(overrides),
        **options,
    )


def rate_panels(measurement: str, what: str, by: tuple[str, ...], alias: str) -> list[TimeSeries]:
    """Packets and bytes per second of each `what` (a tenant's intents or slices)."""
    return [
        timeseries(
            f"Packets per second per {what}",
            f"`{measurement}.packets_rate`: the packets that matched each {what}'s rules, per second.",
            "pps",
            [Query(mean("packets_rate"), measurement, by, alias, variables=by)],
        ),
        timeseries(
            f"Bytes per second per {what}",
            f"`{measurement}.bytes_rate`: the bytes that matched each {what}'s rules, per second.",
            "Bps",
            [Query(mean("bytes_rate"), measurement, by, alias, variables=by)],
        ),
    ]


def cpu_panels() -> list[TimeSeries]:
    return [
        timeseries(
            "CPU load and AI forecast",
            "`dpp_cpu.load`: packets steered to the CPU per second over its `capacity_pps` (1 = at "
            "capacity; the data plane forwards what exceeds it to an alternative node). Dashed: "
            "`dpp_ai_forecast.forecast`, the load the AI module expects `horizon` polls later, drawn "
            "when it was made.",
            "percentunit",
            [
                Query(mean("load"), "dpp_cpu", ("cpu",), "CPU $tag_cpu load"),
                Query(mean("forecast"), "dpp_ai_forecast", ("cpu",), "CPU $tag_cpu forecast"),
            ],
            overrides=[{"matcher": {"id": "byRegexp", "options": ".* forecast$"}, "properties": [DASHED]}],
            valueMin=0,
            axisSoftMax=1,
        ),
        timeseries(
            "Packets per second steered to each CPU",
            "`dpp_cpu.packets_rate`: what STEER handed to each CPU (overflow and fallbacks never "
            "reach it, so they are not its load).",
            "pps",
            [Query(mean("packets_rate"), "dpp_cpu", ("cpu",), "CPU $tag_cpu")],
        ),
    ]


def alternative_panels() -> list[TimeSeries]:
    forwarded = "\"action\" = 'forward'"
    reasons = '"reason" =~ /^(' + "|".join(FORWARD_REASONS) + ")$/"
    return [
        timeseries(
            "Packets per second forwarded to alternative nodes",
            "`dpp_action.packets_rate` of `forward`: everything sent to an alternative node "
            "(forward intents and overflow); below it, the overflow by reason "
            "(`dpp_reason.packets_rate`): `cpu_overloaded` (the CPU over its capacity or marked "
            "overloaded), `cpu_unavailable` (the CPU not in the CPU set).",
            "pps",
            [
                Query(mean("packets_rate"), "dpp_action", (), "forwarded", where=(forwarded,)),
                Query(
                    mean("packets_rate"), "dpp_reason", ("reason",), "of which $tag_reason", where=(reasons,)
                ),
            ],
        ),
        timeseries(
            "Bytes per second forwarded to alternative nodes",
            "`dpp_action.bytes_rate` of `forward`.",
            "Bps",
            [Query(mean("bytes_rate"), "dpp_action", (), "forwarded", where=(forwarded,))],
        ),
    ]


def drop_panels() -> list[TimeSeries]:
    not_none = "\"reason\" != 'none'"
    return [
        timeseries(
            "Drops and fallbacks by reason",
            "`dpp_reason.packets_rate`: packets that did not simply get their rule's action, by "
            "reason. Parse faults and `no_alternative` get the default verdict (`default_verdict`: "
            "drop or pass); `cpu_overloaded` and `cpu_unavailable` went to an alternative node; "
            "`not_ip` and `gtp_signalling` passed to the kernel.",
            "pps",
            [Query(mean("packets_rate"), "dpp_reason", ("reason",), "$tag_reason", where=(not_none,))],
        ),
        timeseries(
            "XDP verdicts",
            "`dpp_verdict.packets_rate`: what the program returned, per verdict; `DROP` is every "
            "packet dropped, by drop intents or by the default verdict.",
            "pps",
            [Query(mean("packets_rate"), "dpp_verdict", ("verdict",), "$tag_verdict")],
        ),
    ]


def telemetry_panels() -> list[TimeSeries]:
    sinks, collector = "\"component\" != 'collector'", "\"component\" = 'collector'"
    return [
        timeseries(
            "Telemetry points written and dropped per second",
            "`dpp_telemetry` of each sink: points delivered and points lost (buffer full). Lost "
            "points are gaps in every other panel.",
            "short",
            [
                Query(per_second("points_written"), "dpp_telemetry", ("component",), "$tag_component written",
                      where=(sinks,)),
                Query(per_second("points_dropped"), "dpp_telemetry", ("component",), "$tag_component dropped",
                      where=(sinks,)),
            ],
        ),
        timeseries(
            "Collector poll duration",
            "`dpp_telemetry.poll_duration_s` of the collector: how long reading every counter took.",
            "s",
            [Query(mean("poll_duration_s"), "dpp_telemetry", (), "poll", where=(collector,))],
        ),
    ]


def sections() -> list[tuple[str, list[TimeSeries]]]:
    """The dashboard's rows, top to bottom, with their panels."""
    return [
        ("Intents", rate_panels("dpp_intent", "intent", ("tenant", "intent"), "$tag_tenant/$tag_intent")),
        ("Slices", rate_panels("dpp_slice", "slice", ("tenant", "slice"), "$tag_tenant/$tag_slice")),
        ("CPUs", cpu_panels()),
        ("Alternative nodes", alternative_panels()),
        ("Drops and fallbacks", drop_panels()),
        ("Telemetry", telemetry_panels()),
    ]


def _laid_out(sections: Sequence[tuple[str, Sequence[Panel]]]) -> list[Panel]:
    """A row per section, its panels COLUMNS to a line below it; ids in that order from 1."""
    laid: list[Panel] = []
    y = 0
    for title, panels in sections:
        laid.append(RowPanel(title=title, gridPos=GridPos(h=ROW_HEIGHT, w=24, x=0, y=y), id=len(laid) + 1))
        y += ROW_HEIGHT
        for n, panel in enumerate(panels):
            x, top = (n % COLUMNS) * PANEL_WIDTH, y + (n // COLUMNS) * PANEL_HEIGHT
            position = GridPos(h=PANEL_HEIGHT, w=PANEL_WIDTH, x=x, y=top)
            laid.append(attr.evolve(panel, gridPos=position, id=len(laid) + 1))
        y += -(-len(panels) // COLUMNS) * PANEL_HEIGHT  # whole lines
    return laid


# --- variables ---------------------------------------------------------------------------------


def _tag_values(measurement: str, tag: str, narrowed_by: Sequence[str]) -> str:
    where = " AND ".join(_matches(name) for name in narrowed_by)
    return f'SHOW TAG VALUES FROM "{measurement}" WITH KEY = "{tag}"' + (f" WHERE {where}" if where else "")


def _variable(name: str, label: str, query: str) -> Template:
    return Template(
        name=name,
        label=label,
        query=query,
        dataSource=DATASOURCE,
        default=ALL,
        includeAll=True,
        allValue=ALL_VALUE,
        multi=True,
    )


def templating() -> Templating:
    return Templating(
        list=[
            Template(name=DATASOURCE_VARIABLE, label="InfluxDB", query="influxdb", type="datasource"),
            # dpp_telemetry: every node writes its collector's point at every poll.
            _variable("node", "Node", _tag_values("dpp_telemetry", "node", ())),
            _variable("tenant", "Tenant", _tag_values("dpp_intent", "tenant", ("node",))),
            _variable("intent", "Intent", _tag_values("dpp_intent", "intent", ("node", "tenant"))),
            _variable("slice", "Slice", _tag_values("dpp_slice", "slice", ("node", "tenant"))),
        ]
    )


# --- the dashboard -----------------------------------------------------------------------------


def dashboard() -> Dashboard:
    return Dashboard(
        title=TITLE,
        uid=UID,
        description="DPP NetApp telemetry in InfluxDB (api/telemetry.md): intents, slices, CPUs and "
        "the AI forecast, alternative nodes, drops.",
        tags=["dpp", "netapp", "xdp", "influxdb"],
        panels=_laid_out(sections()),
        templating=templating(),
        time=Time("now-15m", "now"),
        refresh="10s",
        schemaVersion=SCHEMA_VERSION,
        graphTooltip=1,  # shared crosshair
    )


def document() -> dict[str, Any]:
    """The dashboard as Grafana's JSON model (what Import takes)."""
    return json.loads(json.dumps(dashboard().to_json_data(), cls=DashboardEncoder))


def render(model: dict[str, Any]) -> str:
    return json.dumps(model, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) > 1:
        print("usage: python -m netapp.dashboards.grafana [PATH]", file=sys.stderr)
        return 2
    if GRAFANALIB_MISSING is not None:
        print(
            f"netapp.dashboards.grafana: {GRAFANALIB_MISSING}; install the builder's extra: "
            "pip install 'dpp-netapp[dashboards]'",
            file=sys.stderr,
        )
        return 1
    path = Path(args[0]) if args else GRAFANA_DASHBOARD
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(document()), encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
