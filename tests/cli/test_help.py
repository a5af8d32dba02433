"""Every `netapp` command explains itself: `--help` works on each, flags show no value, and
`netapp --version` is the package's version."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest
import typer
from typer.testing import CliRunner

import netapp
from netapp.cli.main import app

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def command_paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name in getattr(command, "list_commands", lambda ctx: [])(None):
        yield from command_paths(command.get_command(None, name), (*path, name))


@pytest.mark.parametrize("path", list(command_paths(typer.main.get_command(app))), ids=" ".join)
def test_every_command_has_help_and_its_flags_take_no_value(path):
    result = CliRunner().invoke(app, [*path, "--help"])

    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: netapp {' '.join(path)}".rstrip())
    assert not re.search(r"--[\w-]+ +<bool>", result.output), result.output


def test_the_dry_run_flag_reads_as_a_flag():
    result = CliRunner().invoke(app, ["intents", "apply", "--help"])

    assert re.search(r"^  --dry-run +Show the rules", result.output, re.MULTILINE), result.output


def test_version_is_the_packages_and_the_projects():
    result = CliRunner().invoke(app, ["--version"])

    assert (result.exit_code, result.output) == (0, f"netapp {netapp.__version__}\n")
    declared = re.search(r'^version = "(.*)"$', PYPROJECT.read_text(), re.MULTILINE)
    assert declared and declared.group(1) == netapp.__version__
