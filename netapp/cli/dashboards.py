"""`netapp dashboards ...`: the dashboards shipped with the NetApp (api/telemetry.md, "Grafana")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from netapp.cli.errors import EXIT_BAD_INPUT, fail
from netapp.dashboards import GRAFANA_DASHBOARD

app = typer.Typer(help="Dashboards shipped with the NetApp.", no_args_is_help=True)


@app.command()
def export(
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="Write the JSON to this file; default: standard output."),
    ] = None,
) -> None:
    """The Grafana dashboard of the InfluxDB telemetry, as JSON for Grafana's Import."""
    text = GRAFANA_DASHBOARD.read_text(encoding="utf-8")
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"{output}: cannot write the dashboard: {exc.strerror}", EXIT_BAD_INPUT)
    typer.echo(f"wrote {output}", err=True)
