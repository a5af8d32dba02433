"""`netapp mec ...`: MEC onboarding through the REST API (PUT /api/v1/mec/applications/{id}/appd)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from netapp.cli.client import Api
from netapp.cli.errors import EXIT_BAD_INPUT, fail
from netapp.cli.options import TokenOption, UrlOption
from netapp.mec.models import MEC_ID_PATTERN

app = typer.Typer(help="ETSI MEC: application instances onboarded from their MEC 010-2 AppD.", no_args_is_help=True)
APPLICATIONS = "/api/v1/mec/applications"


def read_appd(file: Path) -> dict[str, Any]:
    """The AppD of FILE (JSON, as MEC 010-2 writes it); the command fails naming the problem."""
    try:
        appd = json.loads(file.read_text())
    except OSError as exc:
        fail(f"{file}: cannot read it ({exc.strerror or exc})", EXIT_BAD_INPUT)
    except json.JSONDecodeError as exc:
        fail(f"{file}: not JSON ({exc})", EXIT_BAD_INPUT)
    if not isinstance(appd, dict):
        fail(f"{file}: an AppD is a JSON object", EXIT_BAD_INPUT)
    return appd


def default_instance_id(file: Path, appd: dict[str, Any]) -> str:
    """The AppD's appName: an instance named as its application, when there is one of it."""
    name = appd.get("appName")
    if not isinstance(name, str) or not name:
        fail(f"{file}: no appName to name the instance after: give --app-instance-id", EXIT_BAD_INPUT)
    return name


@app.command("apply-appd")
def apply_appd(
    file: Annotated[Path, typer.Argument(help="The MEC 010-2 AppD, JSON.")],
    app_instance_id: Annotated[Optional[str], typer.Option(
        "--app-instance-id", help="The application instance (default: the AppD's appName).")] = None,
    tenant: Annotated[Optional[str], typer.Option(
        "--tenant", help="The tenant of an instance the AppD creates (default: the caller's).")] = None,
    values: Annotated[Optional[list[str]], typer.Option(
        "--set", metavar="NAME=VALUE", help="NAME=VALUE for the AppD's <NAME> placeholders, e.g. mgmt-address=192.0.2.7; repeatable.")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Make the AppD's traffic rules, DNS rules and services those of an application instance (admin).
    Applying the same AppD again changes nothing; a changed one replaces what the previous made."""
    appd = read_appd(file)
    instance = app_instance_id or default_instance_id(file, appd)
    if not _is_instance_id(instance):
        fail(f"--app-instance-id {instance!r}: letters, digits and ._~!$&'()*+,;=:@- only, 1 to 128", EXIT_BAD_INPUT)
    params: dict[str, Any] = {"value": list(values or [])}
    if tenant is not None:
        params["tenant"] = tenant
    answer = Api.from_options(url, token).request("PUT", f"{APPLICATIONS}/{instance}/appd", json=appd,
                                                  params=params).json()
    Console().print(_summary(answer), markup=False)


def _is_instance_id(text: str) -> bool:
    return len(text) <= 128 and re.fullmatch(MEC_ID_PATTERN, text) is not None


def _summary(answer: dict[str, Any]) -> str:
    """One line of what applying did."""
    what = ("created and onboarded" if answer["created"] else "onboarded") if answer["changed"] else "unchanged"
    return (f"{answer['appInstanceId']} (tenant {answer['tenant']}): {what} from AppD {answer['appDId']} "
            f"{answer['appDVersion']}: {len(answer['trafficRuleIds'])} traffic rules, "
            f"{len(answer['dnsRuleIds'])} DNS rules, {len(answer['serInstanceIds'])} services")
