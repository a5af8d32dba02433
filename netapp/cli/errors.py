"""How CLI commands fail: one actionable line on stderr and a non-zero exit code."""

from __future__ import annotations

from typing import NoReturn

import typer

EXIT_FAILED = 1  # the data plane refused or failed an operation
EXIT_BAD_INPUT = 2  # a file or an option is wrong (typer's usage errors use 2 as well)
EXIT_ENVIRONMENT = 3  # something this host lacks: root, libdpp, an interface


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    typer.echo(f"netapp: {message}", err=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    typer.echo(f"netapp: warning: {message}", err=True)


def note(message: str) -> None:
    """What a command assumed for the user, on stderr so that it never mixes with the output."""
    typer.echo(f"netapp: note: {message}", err=True)
