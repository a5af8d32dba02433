"""`netapp`: the command line entry point; each command group lives in its own module."""

from __future__ import annotations

import typer

from netapp.cli import dataplane, demo

app = typer.Typer(
    name="netapp",
    help="DPP NetApp: intent-driven XDP acceleration for the 5G edge.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(dataplane.app, name="dataplane")
app.command(name="demo")(demo.demo)


if __name__ == "__main__":
    app()
