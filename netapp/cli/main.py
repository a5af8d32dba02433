"""`netapp`: the command line entry point; each command group lives in its own module."""

from __future__ import annotations

from typing import Annotated

import typer

from netapp import __version__
from netapp.cli import ai, dashboards, dataplane, demo, intents, openstack, serve, slices, status, tenants, tokens
from netapp.atsss import cli as atsss
from netapp.frer import cli as frer
from netapp.mec import cli as mec
from netapp.routing import cli as routes
from netapp.upf import cli as sessions

app = typer.Typer(
    name="netapp",
    help="DPP NetApp: intent-driven XDP acceleration for the 5G edge.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help, as click writes it: typer's rich panels give every flag a value ("--dry-run <bool>").
    rich_markup_mode=None,
)
app.add_typer(ai.app, name="ai")
app.add_typer(dashboards.app, name="dashboards")
app.add_typer(dataplane.app, name="dataplane")
app.add_typer(frer.app, name="frer")
app.add_typer(atsss.app, name="atsss")
app.command(name="demo")(demo.demo)
app.command(name="serve")(serve.serve)
app.add_typer(tokens.app, name="tokens")
app.add_typer(intents.app, name="intents")
app.add_typer(mec.app, name="mec")
app.add_typer(openstack.app, name="openstack")
app.add_typer(routes.app, name="routes")
app.add_typer(sessions.app, name="sessions")
app.add_typer(slices.app, name="slices")
app.add_typer(tenants.app, name="tenants")
app.command(name="status")(status.status)
app.command(name="stats")(status.stats)


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"netapp {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    # The options of `netapp` itself; its help is the Typer's.
    pass


if __name__ == "__main__":
    app()
