"""`netapp demo`: the NetApp on an emulated edge site (network namespaces, veth, real XDP)."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from netapp.cli.errors import EXIT_ENVIRONMENT, EXIT_FAILED, fail
from netapp.dataplane.binding import DataplaneError, LibraryNotFoundError
from netapp.testbed import scenario
from netapp.testbed.demo import Demo, Phase
from netapp.testbed.netns import TestbedError


def demo(
    frames: Annotated[int, typer.Option("--frames", min=64, help="Frames per service and phase.")] = 20000,
) -> None:
    """Build an edge site, attach the pipeline, apply the paper's intents, send its traffic, report."""
    if os.geteuid() != 0:
        fail("the demo needs root (network namespaces, XDP)", EXIT_ENVIRONMENT)
    console = Console()
    session = Demo()
    try:
        document = session.start()
        console.print(f"[bold]edge site[/] {session.site.tag}: ran ─ node (XDP on n3, "
                      f"instance {session.instance}) ─ core, alternative node on 'alt'")
        console.print(f"applied {len(document['intents'])} intents "
                      f"(one in the paper's legacy format), {session.cpus} CPUs, 1 alternative group")
        for phase in session.phases(frames):
            console.print(phase_table(phase))
    except (DataplaneError, LibraryNotFoundError) as exc:
        fail(str(exc), EXIT_FAILED)
    except TestbedError as exc:
        fail(f"testbed: {exc}", EXIT_FAILED)
    except KeyboardInterrupt:
        console.print("interrupted")
    finally:
        session.close()
        console.print("removed the site and its pins")


def phase_table(phase: Phase) -> Table:
    table = Table(title=phase.name, title_justify="left")
    table.add_column("counter")
    table.add_column("packets", justify="right")
    table.add_row(f"sent by the RAN side ({phase.pps / 1e6:.2f} Mpps)", str(phase.sent))
    for intent, packets in sorted(phase.intents.items()):
        table.add_row(f"intent {intent}", str(packets))
    for action, packets in phase.actions.items():
        table.add_row(f"action {action}", str(packets))
    for reason, packets in phase.reasons.items():
        table.add_row(f"reason {reason}", str(packets))
    table.add_row("received by the alternative node", str(phase.alternative_rx))
    table.caption = (f"{scenario.FLOWS} GTP-U services in VXLAN, {scenario.PRIORITY_FLOWS} "
                     "prioritised (steered to CPUs), the rest best effort")
    return table
