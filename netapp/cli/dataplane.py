"""`netapp dataplane ...`: drive the XDP data plane directly, without the REST API."""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
import time
from typing import Annotated, Any, Iterator, Optional

import typer


from netapp.cli.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_FAILED, fail, note, warn
from netapp.cli.serve import load_cli_settings
from netapp.core.config import CONFIG_ENV
from netapp.dataplane.binding import LOG as LIBDPP_LOG
from netapp.dataplane.binding import PIN_ROOT, DataplaneError, LibraryNotFoundError, load_libdpp, possible_cpus
from netapp.dataplane.facade import Dataplane, PacketOutcome, host_interfaces
from netapp.frer.models import FrerStreamSpec
from netapp.frer.replay import FrerReplay, load_streams
from netapp.intents.compiler import CompiledDocument, compile_document
from netapp.intents.errors import IntentError
from netapp.intents.loader import load_document
from netapp.intents.models import parse_document
from netapp.steering.models import CpuSpec

app = typer.Typer(help="Drive the XDP data plane directly (no REST API).", no_args_is_help=True)

# The keys of one --json line, in order; a frame that could not be run adds "error".
REPLAY_KEYS = ("index", "verdict", "action", "intent", "cpu", "reason", "route_path", "len")
# Verdicts whose frames leave the program (and so go to --out).
EMITTED_VERDICTS = frozenset({"PASS", "TX", "REDIRECT"})
# BPF_PROG_TEST_RUN refuses shorter frames (no NIC hands XDP less than an Ethernet header).
MIN_TEST_RUN_FRAME = 14


@app.command()
def replay(
    pcap: Annotated[Path, typer.Argument(help="Packets to run (pcap or pcapng, Ethernet).")],
    intents: Annotated[
        Optional[Path],
        typer.Option(
            "--intents",
            help="Intent document (JSON or YAML) to apply first. One that lists no cpus (a bare intent, "
            "the paper's message) gets the CPUs its steer intents name. Required unless --frer is given.",
        ),
    ] = None,
    frer: Annotated[
        Optional[Path],
        typer.Option(
            "--frer",
            help="FRER streams (JSON or YAML: a list, or {streams: [...]}) the node has: with --json each "
            "line gets the frame's stream, R-tag number and recovery decision, and a last line each stream's "
            "802.1CB counters.",
        ),
    ] = None,
    timing: Annotated[
        bool,
        typer.Option("--timing", help="Keep the pcap's gaps between frames (FRER recovery timeouts happen as on the wire)."),
    ] = False,
    out: Annotated[
        Optional[Path],
        typer.Option("--out", help="Write the frames that leave the program (PASS, TX, REDIRECT)."),
    ] = None,
    json_lines: Annotated[
        bool, typer.Option("--json", help="One JSON object per packet: " + ", ".join(REPLAY_KEYS) + ".")
    ] = False,
    interface: Annotated[
        Optional[str],
        typer.Option(
            "--interface",
            help="Ingress interface the packets pretend to arrive on. Default: the interface the "
            "intents match, when they match one; else none, and intents bound to one match nothing.",
        ),
    ] = None,
) -> None:
    """Run every packet of PCAP through a private, unattached instance and say what each one got.

    What it assumed, and each intent that can act on no packet, are said on stderr first.
    """
    if intents is None and frer is None:
        fail("give --intents, --frer or both: the node's intents and FRER streams", EXIT_BAD_INPUT)
    interfaces = host_interfaces()
    compiled = _compile_intents(intents, interfaces) if intents else compile_document(parse_document([]), interfaces)
    streams = _load_streams(frer) if frer else None
    chosen_ifindex = _interface_option(interface, interfaces)
    packets = _read_packets(pcap)
    _require_root()
    records, outcomes = [], []
    with _open_dataplane(None, trace=True, flow_cache=_replay_flow_cache()) as dataplane:
        # What replay assumes is said only now, so that a failure before it stays one line.
        source = intents or frer
        ingress_ifindex = _ingress_ifindex(chosen_ifindex, interfaces, compiled, source)
        compiled = _cpu_set(compiled, source)
        _apply(dataplane, compiled, source)
        frer_replay = _install_streams(dataplane, streams, interfaces, frer) if streams is not None else None
        for index, packet in _paced(packets, timing):
            outcome, record = _run_frame(dataplane, index, bytes(packet), ingress_ifindex, compiled)
            if frer_replay is not None:
                record["frer"] = frer_replay.observe(bytes(packet)) if outcome is not None else None
            if json_lines:  # as it comes: a later failure must not swallow what was already run
                typer.echo(json.dumps(record))
            records.append(record)
            if outcome is not None:
                outcomes.append((packet, outcome))
        frer_counters = frer_replay.counters() if frer_replay is not None else None
    if out is not None:
        _write_frames(out, outcomes)
    if json_lines and frer_counters is not None:
        typer.echo(json.dumps({"frer_streams": frer_counters}))
    if not json_lines:
        _print_table(records, frer_counters)


@app.command()
def unload(
    config: Annotated[
        Optional[Path],
        typer.Option("--config", help=f"Settings file (YAML) of the NetApp; default: ${CONFIG_ENV}.", dir_okay=False),
    ] = None,
) -> None:
    """Detach the settings' instance from every interface and remove its pins (program, maps, links).

    `netapp serve` leaves its instance pinned when it stops, so that traffic keeps flowing; this
    ends that, e.g. before the NetApp is uninstalled. Stop the service first: a running one keeps
    its handles. An instance that is not pinned is nothing to unload (exit 0).
    """
    instance = load_cli_settings(config).instance
    pins = Path(PIN_ROOT) / instance
    if not pins.exists():
        typer.echo(f"instance '{instance}' is not loaded ({pins} does not exist): nothing to unload")
        return
    if os.geteuid() != 0:
        fail(f"unload needs root (the pins under {PIN_ROOT})", EXIT_ENVIRONMENT)
    with _open_dataplane(instance) as dataplane:
        try:
            attached = len(dataplane.attached())
            dataplane.unpin()
        except DataplaneError as exc:
            fail(f"unload instance '{instance}': {exc}", EXIT_FAILED)
    typer.echo(f"instance '{instance}' unloaded: detached from {attached} interface(s), pins removed")


def _compile_intents(path: Path, interfaces: dict[str, int]) -> CompiledDocument:
    try:
        compiled = compile_document(load_document(path), interfaces)
    except IntentError as exc:
        fail(f"{path}: {exc.line()}", EXIT_BAD_INPUT)
    for conflict in compiled.ruleset.conflicts:
        warn(f"{path}: {conflict.kind} {conflict.intent_a!r} / {conflict.intent_b!r}: {conflict.reason}")
    return compiled


def _load_streams(path: Path) -> list[FrerStreamSpec]:
    try:
        return load_streams(path)
    except IntentError as exc:
        fail(f"{path}: {exc.line()}", EXIT_BAD_INPUT)


def _install_streams(
    dataplane: Dataplane, streams: list[FrerStreamSpec], interfaces: dict[str, int], path: Path
) -> FrerReplay:
    try:
        return FrerReplay(dataplane, streams, interfaces.get)
    except IntentError as exc:
        fail(f"{path}: {exc.line()}", EXIT_BAD_INPUT)
    except DataplaneError as exc:
        fail(f"{path}: the data plane refused the streams: {exc}", EXIT_FAILED)


def _paced(packets: list[Any], timing: bool) -> Iterator[tuple[int, Any]]:
    """The packets with their indexes; with `timing`, each only when as long has passed since the
    first as the capture says (its own clock: the frames' gaps, not their dates)."""
    start, first = time.monotonic(), (float(packets[0].time) if packets else 0.0)
    for index, packet in enumerate(packets):
        if timing:
            wait = start + (float(packet.time) - first) - time.monotonic()
            if wait > 0:
                time.sleep(wait)  # keeping the capture's schedule, not waiting on anything
        yield index, packet


def _interface_option(name: Optional[str], interfaces: dict[str, int]) -> Optional[int]:
    if name is None:
        return None
    if name not in interfaces:
        fail(
            f"--interface {name}: no such interface (known: {', '.join(sorted(interfaces))})", EXIT_BAD_INPUT
        )
    return interfaces[name]


def _ingress_ifindex(
    chosen: Optional[int], interfaces: dict[str, int], compiled: CompiledDocument, path: Path
) -> int:
    """The ifindex the packets arrive on: --interface, else the one interface the intents match
    (else none); each intent bound to another interface is warned about, as it can match nothing."""
    names = {index: interface for interface, index in interfaces.items()}
    rules = compiled.ruleset.rules
    bound = {rule.intent_id: rule.values["interface"] for rule in rules if "interface" in rule.values}
    if chosen is not None:
        ingress, arrival = chosen, f"{names[chosen]} (--interface)"
    elif len(set(bound.values())) == 1:
        ingress = next(iter(bound.values()))
        arrival = names[ingress]
        note(f"the packets arrive on {arrival}, the interface the intents match (--interface to change)")
    else:
        ingress, arrival = 0, "no interface (give --interface)"
    for intent_id, ifindex in bound.items():
        if ifindex != ingress:
            warn(
                f"{path}: intent {intent_id!r} matches interface {names[ifindex]}, but the packets "
                f"arrive on {arrival}: it matches none of them"
            )
    return ingress


def _cpu_set(compiled: CompiledDocument, path: Path) -> CompiledDocument:
    """The document's CPU set; when it lists none, the CPUs its steer intents name. Each intent
    that steers outside the set is warned about: its packets fall back (cpu_unavailable)."""
    host = possible_cpus()
    steers = {rule.intent_id: rule.arg for rule in compiled.ruleset.rules if rule.action == "steer"}
    if not compiled.cpus and steers:
        cpus = sorted({cpu for cpu in steers.values() if cpu < host})
        compiled = replace(compiled, cpus=tuple(CpuSpec(cpu=cpu) for cpu in cpus))
        if cpus:
            listed = ("CPUs " if len(cpus) > 1 else "CPU ") + ", ".join(map(str, cpus))
            note(f"{path} lists no cpus: replaying with {listed} enabled, as its steer intents name")
    enabled = {spec.cpu for spec in compiled.cpus}
    for intent_id, cpu in steers.items():
        if cpu in enabled:
            continue
        missing = f"this host has CPUs 0-{host - 1}" if cpu >= host else "it is not in the file's cpus"
        warn(
            f"{path}: intent {intent_id!r} steers to CPU {cpu}, but {missing}: its packets get the "
            f"fallback (its alternative group, else the default verdict), reason cpu_unavailable"
        )
    return compiled


def _read_packets(path: Path) -> list[Any]:
    import scapy.layers.l2  # noqa: F401 - registers Ethernet as the pcap link type's decoder
    from scapy.error import Scapy_Exception
    from scapy.utils import PcapReader

    try:
        with PcapReader(str(path)) as reader:
            return list(reader)
    except (OSError, Scapy_Exception) as exc:
        fail(f"{path}: cannot read packets: {exc}", EXIT_BAD_INPUT)


def _require_root() -> None:
    if os.geteuid() != 0:
        fail("replay needs root (BPF_PROG_TEST_RUN)", EXIT_ENVIRONMENT)


def _replay_flow_cache() -> bool:
    """Whether replay's data plane (opened with trace) has the flow cache: not on a kernel that
    takes trace only without it (6.2: dataplane/src/kernel.c), where replay says so and each packet
    is classified by the rules, as a flow's first packet always is."""
    try:
        lib = load_libdpp()
    except LibraryNotFoundError:
        return True  # the open says what is missing
    with _quiet(LIBDPP_LOG.name):  # the answer is said below; libdpp's reason would tell the user to act
        taken = lib.dpp_kernel_check_settings(None, True, True) == 0
        refused = lib.dpp_kernel_check_settings(None, False, True) != 0
    if taken or refused:
        return True  # taken, or refused whatever the cache: the open says why
    note("this kernel takes trace only without the flow cache: replaying without it")
    return False


@contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    """The logger's warnings held back for the block."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _open_dataplane(instance: Optional[str], trace: bool = False, flow_cache: bool = True) -> Dataplane:
    """The pinned `instance` (reopened), or an anonymous one for None."""
    try:
        return Dataplane.open(instance, trace=trace, flow_cache=flow_cache)
    except LibraryNotFoundError as exc:
        fail(str(exc), EXIT_ENVIRONMENT)
    except DataplaneError as exc:
        fail(f"cannot load the data plane: {exc}", EXIT_FAILED)


def _apply(dataplane: Dataplane, compiled: CompiledDocument, path: Path) -> None:
    try:
        dataplane.apply_compiled(compiled)
    except DataplaneError as exc:
        fail(f"{path}: the data plane refused the intents: {exc}", EXIT_FAILED)


def _run_frame(
    dataplane: Dataplane, index: int, frame: bytes, ingress_ifindex: int, compiled: CompiledDocument
) -> tuple[Optional[PacketOutcome], dict[str, Any]]:
    """One frame through the program: its outcome and record, or (None, a record saying why the
    kernel would not run it)."""
    if len(frame) < MIN_TEST_RUN_FRAME:
        return None, not_run_record(index, frame, _short_frame_error(len(frame), compiled.default_verdict))
    try:
        outcome = dataplane.test_run(frame, ingress_ifindex)
    except DataplaneError as exc:
        return None, not_run_record(index, frame, f"not run: {exc}")
    return outcome, replay_record(index, outcome)


def _short_frame_error(length: int, default_verdict: str) -> str:
    return (
        f"not run: {length} bytes, shorter than an Ethernet header; BPF_PROG_TEST_RUN refuses frames "
        f"under {MIN_TEST_RUN_FRAME} bytes (no NIC delivers them to XDP). The program would count it "
        f"trunc_eth and give it the default verdict ({default_verdict})"
    )


def replay_record(index: int, outcome: PacketOutcome) -> dict[str, Any]:
    values = {"index": index, **{key: getattr(outcome, key) for key in REPLAY_KEYS[1:]}}
    return {key: values[key] for key in REPLAY_KEYS}


def not_run_record(index: int, frame: bytes, error: str) -> dict[str, Any]:
    """The record of a frame the kernel refused: no outcome, and why."""
    return {"index": index, **{key: None for key in REPLAY_KEYS[1:]}, "len": len(frame), "error": error}


def _print_table(records: list[dict[str, Any]], frer_counters: Optional[list[dict[str, Any]]] = None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="replay")
    keys = REPLAY_KEYS + (("frer",) if frer_counters is not None else ())
    for key in keys:
        table.add_column(key, justify="right" if key in ("index", "cpu", "len") else "left")
    for record in records:
        cells = {**record, "verdict": "not run"} if "error" in record else dict(record)
        if cells.get("frer"):
            frer = cells["frer"]
            cells["frer"] = f"stream {frer['stream']} #{frer['seq']} {frer['decision']}"
        table.add_row(*("" if cells.get(key) is None else str(cells[key]) for key in keys))
    console = Console()
    console.print(table)
    for record in records:
        if "error" in record:
            console.print(f"frame {record['index']}: {record['error']}", markup=False)
    console.print(_summary(records))
    for row in frer_counters or ():
        details = ", ".join(f"{key} {value}" for key, value in row.items() if key != "stream")
        console.print(f"stream {row['stream']}: {details}", markup=False)


def _summary(records: list[dict[str, Any]]) -> str:
    run = [record for record in records if "error" not in record]
    by_action = Counter(record["action"] for record in run)
    by_intent = Counter(record["intent"] or "(no intent)" for record in run)
    not_run = len(records) - len(run)
    lines = [f"{len(records)} packets" + (f", {not_run} not run" if not_run else "")]
    lines.append("per action: " + ", ".join(f"{name} {count}" for name, count in sorted(by_action.items())))
    lines.append("per intent: " + ", ".join(f"{name} {count}" for name, count in sorted(by_intent.items())))
    return "\n".join(lines)


def _write_frames(path: Path, outcomes: list[tuple[Any, PacketOutcome]]) -> None:
    from scapy.layers.l2 import Ether
    from scapy.utils import PcapWriter

    try:
        with PcapWriter(str(path), linktype=1, sync=False) as writer:  # 1: DLT_EN10MB
            for packet, outcome in outcomes:
                if outcome.verdict in EMITTED_VERDICTS:
                    frame = Ether(outcome.data)
                    frame.time = packet.time
                    writer.write(frame)
    except OSError as exc:
        fail(f"--out {path}: {exc}", EXIT_BAD_INPUT)
