"""`netapp openstack check|prepare`: the XDP preconditions of a NetApp VM on OpenStack (openstacksdk)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Optional

import typer

from netapp.cli.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_FAILED, fail
from netapp.openstack.cloud import OpenStackError, connect
from netapp.openstack.inspector import Selection, check as check_preconditions, inspect
from netapp.openstack.preconditions import ANY_SOURCE, Requirements
from netapp.openstack.preparer import PORT_SECURITY_STRATEGIES, Options, apply, plan
from netapp.openstack.report import check_json, check_lines, plan_json, plan_lines

app = typer.Typer(
    help="Check and prepare the XDP preconditions of a NetApp VM on OpenStack: pinned CPUs and huge "
    "pages (flavor), virtio multiqueue (image), MTU (network), port security (ports). Needs "
    "openstacksdk (pip install 'dpp-netapp[openstack]'). Exit codes: 0 met, 1 unmet or refused, "
    "2 bad option, 3 the cloud could not be read (credentials, unknown server).",
    no_args_is_help=True,
)

CloudOption = Annotated[
    Optional[str],
    typer.Option("--cloud", envvar="OS_CLOUD", help="Cloud name in clouds.yaml (unset: OS_* variables)."),
]
CloudsFileOption = Annotated[
    Optional[Path],
    typer.Option("--clouds-file", help="clouds.yaml to read (default: OS_CLIENT_CONFIG_FILE, then the usual places)."),
]
ServerOption = Annotated[Optional[str], typer.Option("--server", help="The NetApp VM, by name or id.")]
FlavorOption = Annotated[
    Optional[str], typer.Option("--flavor", help="Flavor to judge instead of the server's (needed without --server).")
]
ImageOption = Annotated[
    Optional[str], typer.Option("--image", help="Image to judge instead of the server's (needed without --server).")
]
PortOption = Annotated[
    Optional[list[str]], typer.Option("--port", metavar="<str>", help="A data-plane port by name or id (repeat); default: the server's.")
]
DataNetworkOption = Annotated[
    Optional[list[str]],
    typer.Option("--data-network", metavar="<str>", help="The server's data-plane ports are those on this network (repeat)."),
]
MgmtNetworkOption = Annotated[
    Optional[str],
    typer.Option("--mgmt-network", help="Or: the server's data-plane ports are all but those on this network."),
]
NoHugePagesOption = Annotated[
    bool, typer.Option("--no-huge-pages", help="Do not require huge pages (the VNFD asks for them).")
]
SourceOption = Annotated[
    Optional[list[str]],
    typer.Option(
        "--source",
        metavar="<cidr>",
        help="Source prefix forwarded frames may carry, for allowed address pairs (repeat; default "
        + " and ".join(ANY_SOURCE)
        + ").",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="The result as one JSON document.")]


@app.command()
def check(
    cloud: CloudOption = None,
    clouds_file: CloudsFileOption = None,
    server: ServerOption = None,
    flavor: FlavorOption = None,
    image: ImageOption = None,
    port: PortOption = None,
    data_network: DataNetworkOption = None,
    mgmt_network: MgmtNetworkOption = None,
    no_huge_pages: NoHugePagesOption = False,
    source: SourceOption = None,
    json_output: JsonOption = False,
) -> None:
    """List each XDP precondition of the VM as ok, UNMET (with the exact fix) or guest (inside the VM).

    Exits 1 when one is unmet.
    """
    selection = Selection(server, flavor, image, tuple(port or ()), tuple(data_network or ()), mgmt_network)
    required = _requirements(no_huge_pages, source)
    try:
        report = check_preconditions(connect(cloud, clouds_file), selection, required)
    except OpenStackError as exc:
        fail(str(exc), EXIT_ENVIRONMENT)
    typer.echo(check_json(report) if json_output else "\n".join(check_lines(report)))
    if report.unmet:
        raise typer.Exit(EXIT_FAILED)


@app.command()
def prepare(
    cloud: CloudOption = None,
    clouds_file: CloudsFileOption = None,
    server: ServerOption = None,
    flavor: Annotated[
        Optional[str],
        typer.Option(
            "--flavor",
            help="Flavor to create or give the extra specs (default: the server's). A new one has --vcpus, "
            "--ram, --disk, else the server's size, else the VNFD's (8 vCPUs, 16384 MB, 20 GB).",
        ),
    ] = None,
    image: ImageOption = None,
    port: PortOption = None,
    data_network: DataNetworkOption = None,
    mgmt_network: MgmtNetworkOption = None,
    port_security: Annotated[
        str,
        typer.Option(
            "--port-security",
            help="full: port security off and no security groups; allow-address-pairs: keep them, add "
            "pairs for --source (the VNFD's port-security-disable-strategy).",
        ),
    ] = "full",
    vcpus: Annotated[Optional[int], typer.Option("--vcpus", min=1, help="vCPUs of a flavor prepare creates.")] = None,
    ram: Annotated[Optional[int], typer.Option("--ram", min=1, help="RAM (MB) of a flavor prepare creates.")] = None,
    disk: Annotated[Optional[int], typer.Option("--disk", min=0, help="Disk (GB) of a flavor prepare creates.")] = None,
    no_huge_pages: NoHugePagesOption = False,
    source: SourceOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would change; change nothing.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Create or update the flavor's extra specs, the image's properties and the data-plane ports so
    that they meet the preconditions; a second run changes nothing and says so.

    Networks (their MTU) and the guest are left alone: check says what to do there.
    """
    if port_security not in PORT_SECURITY_STRATEGIES:
        fail(f"--port-security {port_security}: must be one of {', '.join(PORT_SECURITY_STRATEGIES)}", EXIT_BAD_INPUT)
    required = _requirements(no_huge_pages, source)
    reference = flavor if server is None else None  # with a server, --flavor is the one to write
    selection = Selection(server, reference, image, tuple(port or ()), tuple(data_network or ()), mgmt_network)
    options = Options(flavor, port_security, vcpus, ram, disk, required)
    try:
        connection = connect(cloud, clouds_file)
        changes = plan(connection, inspect(connection, selection), options)
        if not dry_run:
            apply(changes.changes)
    except OpenStackError as exc:
        fail(str(exc), EXIT_ENVIRONMENT)
    typer.echo(plan_json(changes, dry_run) if json_output else "\n".join(plan_lines(changes, dry_run)))


def _requirements(no_huge_pages: bool, sources: Optional[list[str]]) -> Requirements:
    for prefix in sources or ():
        try:
            ipaddress.ip_network(prefix, strict=False)
        except ValueError:
            fail(f"--source {prefix}: not an IPv4 or IPv6 prefix (e.g. 10.0.0.0/8)", EXIT_BAD_INPUT)
    return Requirements(huge_pages=not no_huge_pages, sources=tuple(sources) if sources else ANY_SOURCE)
