"""`netapp dataplane replay` end to end: a pcap and an intents file in, one JSON line per packet and
the emitted frames out, run by the real XDP program (BPF_PROG_TEST_RUN). Run in-process through
typer's CliRunner and as the installed command would be, in a subprocess."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import RawPcapReader, wrpcap
from typer.testing import CliRunner

from netapp.cli import dataplane as cli_dataplane
from netapp.cli.main import app
from netapp.core import netns
from netapp.dataplane.binding import load_libdpp
from netapp.dataplane.facade import Dataplane
from tests.utils import packets
from tests.utils.intents import paper_message
from tests.utils.kernel import require_kernel, veth_namespace

REPO = Path(__file__).resolve().parents[2]
PAPER_EXAMPLE = REPO / "api" / "examples" / "paper-legacy.json"  # binds n3, steers to CPU 1, no cpus
PAPER_INTERFACE = "n3"  # the demo's RAN-side interface, which the example names
KEYS = ["index", "verdict", "action", "intent", "cpu", "reason", "route_path", "len"]
EMITTED = {"PASS", "TX", "REDIRECT"}
# The paper steers to rx_queue 1; a single-CPU host can only steer to CPU 0.
STEER_CPU = 1 if (os.cpu_count() or 1) > 1 else 0
LEGACY_ID = "legacy-e918d704"  # "legacy-" + the message's flow_hash
DROP_PORT = 9999
FIRST_TIMESTAMP = 1_700_000_000


def paper_flow_frame() -> bytes:
    """The paper's flow: VXLAN VNI 0x445 / inner IPv4 / UDP / GTP-U TEID 0x8894D0D4 / UE IPv4 from
    192.168.0.140 / UDP to 5004."""
    ue = packets.ue_udp("192.168.0.140", "10.45.0.1", 40000, 5004)
    message = packets.gtpu(0x8894D0D4, inner=ue)
    vxlan = packets.vxlan(0x445, packets.inner_gtpu_frame(message))
    return bytes(packets.outer_udp(vxlan, dport=packets.VXLAN_PORT))


def plain_udp_frame(dport: int) -> bytes:
    return bytes(packets.ether(packets.ue_udp("10.0.0.1", "10.0.0.2", 40000, dport)))


PAPER_FLOW = paper_flow_frame()
FRAMES = {
    "paper flow": PAPER_FLOW,
    "dropped": plain_udp_frame(DROP_PORT),
    "truncated": PAPER_FLOW[:60],  # cut inside the inner Ethernet header
    "unmatched": plain_udp_frame(53),
}


def legacy_message(**action: str) -> dict[str, Any]:
    """The paper's message, on loopback (eth0 need not exist here) and steering to STEER_CPU."""
    message = paper_message()
    message["Params"][0]["paramValue"] = "lo"
    message["Action"]["rx_queue"] = str(STEER_CPU)
    message["Action"].update(action)
    return message


def intents_document(message: dict[str, Any]) -> dict[str, Any]:
    drop = {
        "id": "drop-9999",
        "match": {"protocol": "udp", "dst_port": DROP_PORT},
        "action": {"type": "drop"},
    }
    return {"intents": [drop, message], "cpus": [{"cpu": cpu} for cpu in sorted({0, STEER_CPU})]}


def expected_records() -> list[dict[str, Any]]:
    """What each packet gets; the truncated one's reason is checked by prefix (None here)."""
    rows = [
        ("REDIRECT", "steer", LEGACY_ID, STEER_CPU, None, FRAMES["paper flow"]),
        ("DROP", "drop", "drop-9999", None, None, FRAMES["dropped"]),
        ("PASS", "default", None, None, None, FRAMES["truncated"]),
        ("PASS", "pass", None, None, None, FRAMES["unmatched"]),
    ]
    return [
        dict(zip(KEYS, (index, verdict, action, intent, cpu, reason, None, len(frame))))
        for index, (verdict, action, intent, cpu, reason, frame) in enumerate(rows)
    ]


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    pcap = tmp_path / "in.pcap"
    frames = []
    for index, frame in enumerate(FRAMES.values()):
        packet = Ether(frame)
        packet.time = FIRST_TIMESTAMP + index
        frames.append(packet)
    wrpcap(str(pcap), frames, linktype=1)
    intents = tmp_path / "intents.json"
    intents.write_text(json.dumps(intents_document(legacy_message())))
    return {"pcap": pcap, "intents": intents, "out": tmp_path / "out.pcap", "dir": tmp_path}


# --- two ways to run the command: (exit code, stdout, stderr) ------------------------------------


def invoke(args: list[str], namespace: str | None = None) -> Any:
    """typer's result of the command run in this process (inside `namespace` when given)."""
    with netns.entered(namespace) if namespace else contextlib.nullcontext():
        result = CliRunner().invoke(app, ["dataplane", "replay", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def run_in_process(args: list[str], namespace: str | None = None) -> tuple[int, str, str]:
    result = invoke(args, namespace)
    return result.exit_code, result.stdout, result.stderr


def run_subprocess(args: list[str], namespace: str | None = None) -> tuple[int, str, str]:
    inside = ["ip", "netns", "exec", namespace] if namespace else []
    proc = subprocess.run(
        [*inside, sys.executable, "-m", "netapp.cli.main", "dataplane", "replay", *args],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode, proc.stdout, proc.stderr


RUNNERS: dict[str, Callable[..., tuple[int, str, str]]] = {
    "cli-runner": run_in_process,
    "subprocess": run_subprocess,
}
runners = pytest.mark.parametrize("run", RUNNERS.values(), ids=RUNNERS.keys())


def read_frames(path: Path) -> tuple[int, list[bytes], list[int]]:
    """(link type, frames, whole-second timestamps) of a pcap, without dissecting anything."""
    with RawPcapReader(str(path)) as reader:
        records = list(reader)
        linktype = reader.linktype
    return linktype, [data for data, _ in records], [meta.sec for _, meta in records]


# --- the happy path ---------------------------------------------------------------------------


@runners
def test_replay_reports_each_packet_as_one_json_line_and_writes_the_emitted_frames(inputs, run):
    require_kernel()
    args = [str(inputs["pcap"]), "--intents", str(inputs["intents"]), "--json",
            "--out", str(inputs["out"]), "--interface", "lo"]

    code, stdout, stderr = run(args)

    assert (code, stderr) == (0, "")
    records = [json.loads(line) for line in stdout.splitlines()]
    assert [list(record) for record in records] == [KEYS] * len(FRAMES)
    truncated = records[2]
    assert truncated["reason"].startswith("trunc_"), truncated
    assert records == [
        {**expected, "reason": truncated["reason"]} if expected["index"] == 2 else expected
        for expected in expected_records()
    ]

    linktype, written, seconds = read_frames(inputs["out"])
    frames = list(FRAMES.values())
    emitted = [record["index"] for record in records if record["verdict"] in EMITTED]
    assert emitted == [0, 2, 3]
    assert linktype == 1
    assert written == [frames[index] for index in emitted]
    assert seconds == [FIRST_TIMESTAMP + index for index in emitted]


# --- failures: one line on stderr, a non-zero exit --------------------------------------------


@runners
def test_given_an_out_of_range_vni_in_the_legacy_message_then_exit_2_and_one_line_naming_it(inputs, run):
    message = legacy_message()
    message["Resources"][0]["encapsulationID1"] = "01000000"  # VXLAN VNIs have 24 bits
    bad = inputs["dir"] / "bad.json"
    bad.write_text(json.dumps(intents_document(message)))

    code, stdout, stderr = run([str(inputs["pcap"]), "--intents", str(bad), "--json"])

    assert code == 2
    assert stdout == ""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"netapp: {bad}: ")
    assert "intents[1].Resources[0].encapsulationID1" in lines[0]
    assert not inputs["out"].exists()


@runners
def test_given_a_missing_pcap_then_a_non_zero_exit_and_one_line_naming_it(inputs, run):
    missing = inputs["dir"] / "missing.pcap"

    code, stdout, stderr = run([str(missing), "--intents", str(inputs["intents"]), "--json",
                                "--out", str(inputs["out"])])

    assert code != 0
    assert stdout == ""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("netapp: ") and str(missing) in lines[0]
    assert not inputs["out"].exists()


# --- frames the kernel will not run: reported, and the run goes on -----------------------------


def write_pcap(path: Path, frames: list[bytes]) -> None:
    wrpcap(str(path), [Raw(load=frame) for frame in frames], linktype=1)


@runners
def test_a_frame_shorter_than_an_ethernet_header_is_reported_and_the_others_still_run(inputs, run):
    require_kernel()
    frames = [FRAMES["dropped"], b"\x01" * 9, FRAMES["unmatched"]]
    write_pcap(inputs["pcap"], frames)

    code, stdout, stderr = run([str(inputs["pcap"]), "--intents", str(inputs["intents"]), "--json",
                                "--interface", "lo"])

    assert (code, stderr) == (0, "")
    first, short, last = [json.loads(line) for line in stdout.splitlines()]
    assert (first["verdict"], first["intent"]) == ("DROP", "drop-9999")
    assert (last["verdict"], last["action"]) == ("PASS", "pass")
    assert list(short) == KEYS + ["error"]
    assert {key: short[key] for key in KEYS} == {**dict.fromkeys(KEYS), "index": 1, "len": 9}
    assert "shorter than an Ethernet header" in short["error"] and "BPF_PROG_TEST_RUN" in short["error"]
    assert "trunc_eth" in short["error"] and "default verdict (pass)" in short["error"]


def test_the_table_shows_a_short_frame_as_not_run_and_counts_it(inputs):
    require_kernel()
    write_pcap(inputs["pcap"], [b"\x01" * 13, FRAMES["unmatched"]])

    code, stdout, stderr = run_in_process([str(inputs["pcap"]), "--intents", str(inputs["intents"]),
                                           "--interface", "lo"])

    assert (code, stderr) == (0, "")
    assert "not run" in stdout and "frame 0: not run: 13 bytes" in stdout
    assert "2 packets, 1 not run" in stdout


# --- the paper's own example file: what replay assumes, and what it warns about -----------------


@pytest.fixture
def paper_namespace() -> Any:
    """A namespace holding the interface the example message binds (the host may have none)."""
    with veth_namespace("replay", PAPER_INTERFACE, f"{PAPER_INTERFACE}-peer") as name:
        yield name


def paper_pcap(directory: Path) -> Path:
    pcap = directory / "paper.pcap"
    wrpcap(str(pcap), [Ether(PAPER_FLOW)], linktype=1)
    return pcap


def steer_expectation() -> tuple[dict[str, Any], str]:
    """What the paper's flow gets from the example file, and what stderr says of its CPU: steered
    to CPU 1, enabled for it, where the host has one; else the fallback, and a warning."""
    if (os.cpu_count() or 1) > 1:
        note = (
            f"netapp: note: {PAPER_EXAMPLE} lists no cpus: replaying with CPU 1 enabled, as its steer "
            "intents name"
        )
        return {"verdict": "REDIRECT", "action": "steer", "cpu": 1, "reason": None, "route_path": None}, note
    warning = (
        f"netapp: warning: {PAPER_EXAMPLE}: intent '{LEGACY_ID}' steers to CPU 1, but this host has CPUs 0-0: "
        "its packets get the fallback (its alternative group, else the default verdict), reason cpu_unavailable"
    )
    fallback = {"verdict": "PASS", "action": "default", "cpu": None, "reason": "cpu_unavailable", "route_path": None}
    return fallback, warning


@runners
def test_the_papers_example_file_is_replayed_on_its_interface_and_cpu_and_stderr_says_so(
    tmp_path, paper_namespace, run
):
    pcap = paper_pcap(tmp_path)

    code, stdout, stderr = run([str(pcap), "--intents", str(PAPER_EXAMPLE), "--json"], paper_namespace)

    assert code == 0, stderr
    expected, cpu_line = steer_expectation()
    [record] = [json.loads(line) for line in stdout.splitlines()]
    assert record == {"index": 0, "intent": LEGACY_ID, "len": len(PAPER_FLOW), **expected}
    assert stderr.splitlines() == [
        f"netapp: note: the packets arrive on {PAPER_INTERFACE}, the interface the intents match "
        "(--interface to change)",
        cpu_line,
    ]


def test_what_replay_assumed_is_said_before_the_results(tmp_path, paper_namespace):
    pcap = paper_pcap(tmp_path)

    result = invoke([str(pcap), "--intents", str(PAPER_EXAMPLE), "--json"], paper_namespace)

    assert result.exit_code == 0, result.output
    *said, last = result.output.splitlines()  # stdout and stderr as they were written
    assert len(said) >= 2 and all(line.startswith("netapp: ") for line in said), result.output
    assert json.loads(last)["intent"] == LEGACY_ID


@runners
def test_given_another_interface_then_a_warning_names_the_intent_its_interface_and_the_ingress(
    tmp_path, paper_namespace, run
):
    pcap = paper_pcap(tmp_path)

    args = [str(pcap), "--intents", str(PAPER_EXAMPLE), "--json", "--interface", "lo"]

    code, stdout, stderr = run(args, paper_namespace)

    assert code == 0, stderr
    warning = (
        f"netapp: warning: {PAPER_EXAMPLE}: intent '{LEGACY_ID}' matches interface {PAPER_INTERFACE}, but the packets "
        "arrive on lo (--interface): it matches none of them"
    )
    assert warning in stderr.splitlines()
    [record] = [json.loads(line) for line in stdout.splitlines()]
    assert (record["verdict"], record["action"], record["intent"]) == ("PASS", "pass", None)


def test_given_intents_on_two_interfaces_and_no_interface_then_each_is_warned_about(inputs):
    require_kernel()
    on_lo = legacy_message()
    on_eth0 = {"id": "on-eth0", "match": {"interface": "eth0", "protocol": "udp"}, "action": {"type": "drop"}}
    inputs["intents"].write_text(json.dumps({"intents": [on_lo, on_eth0], "cpus": [{"cpu": STEER_CPU}]}))
    write_pcap(inputs["pcap"], [FRAMES["unmatched"]])
    with veth_namespace("replay", "eth0", "eth0-peer") as namespace:
        code, _, stderr = run_in_process([str(inputs["pcap"]), "--intents", str(inputs["intents"]), "--json"],
                                         namespace)

    assert code == 0, stderr
    arrival = "but the packets arrive on no interface (give --interface): it matches none of them"
    assert sorted(stderr.splitlines()) == [
        f"netapp: warning: {inputs['intents']}: intent '{LEGACY_ID}' matches interface lo, {arrival}",
        f"netapp: warning: {inputs['intents']}: intent 'on-eth0' matches interface eth0, {arrival}",
    ]


def test_given_a_cpu_set_without_the_steer_cpu_then_a_warning_names_the_intent_and_the_cpu(inputs):
    require_kernel()
    message = legacy_message(rx_queue="1")
    inputs["intents"].write_text(json.dumps({"intents": [message], "cpus": [{"cpu": 0}]}))
    write_pcap(inputs["pcap"], [PAPER_FLOW])

    code, stdout, stderr = run_in_process([str(inputs["pcap"]), "--intents", str(inputs["intents"]), "--json",
                                           "--interface", "lo"])

    assert code == 0, stderr
    missing = "it is not in the file's cpus" if (os.cpu_count() or 1) > 1 else "this host has CPUs 0-0"
    assert stderr.splitlines() == [
        f"netapp: warning: {inputs['intents']}: intent '{LEGACY_ID}' steers to CPU 1, but {missing}: its "
        "packets get the fallback (its alternative group, else the default verdict), reason cpu_unavailable"
    ]
    [record] = [json.loads(line) for line in stdout.splitlines()]
    assert (record["action"], record["intent"], record["reason"]) == ("default", LEGACY_ID, "cpu_unavailable")


# --- a kernel that takes trace only without the flow cache --------------------------------------


class KernelOf62:
    """The real libdpp, its settings check asked of Ubuntu 22.04's 6.2 in place of the running kernel
    (the flow cache and trace refused together, dataplane/src/kernel.c, with its log). That kernel
    cannot run here (the boot in tests/dataplane/test_old_kernel.py sees its verifier refuse them),
    so its release is stood in for; the replay itself runs on the real program."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib

    def dpp_kernel_check_settings(self, release: bytes | None, flow_cache: bool, trace: bool) -> int:
        assert release is None, "replay asks of the running kernel"
        return self.lib.dpp_kernel_check_settings(b"6.2.0-39-generic", flow_cache, trace)


def test_where_the_kernel_refuses_the_flow_cache_with_trace_replay_runs_without_it_and_says_so(
        inputs, monkeypatch, caplog):
    """Said once, by replay: libdpp's reason for the refusal ("open it with either off") is held
    back, as the user has nothing to do."""
    require_kernel()
    caplog.set_level(logging.WARNING, logger="netapp.dataplane")
    monkeypatch.setattr(cli_dataplane, "load_libdpp", lambda: KernelOf62(load_libdpp()))
    caches = []
    real_open = Dataplane.open

    def spied_open(*args: Any, **kwargs: Any) -> Dataplane:
        caches.append(kwargs.get("flow_cache", True))
        return real_open(*args, **kwargs)

    monkeypatch.setattr(Dataplane, "open", spied_open)
    args = [str(inputs["pcap"]), "--intents", str(inputs["intents"]), "--json", "--interface", "lo"]

    code, stdout, stderr = run_in_process(args)

    assert code == 0, stderr
    assert stderr == "netapp: note: this kernel takes trace only without the flow cache: replaying without it\n"
    assert caches == [False]
    assert "takes the data path with the flow cache or with trace" not in caplog.text
    records = [json.loads(line) for line in stdout.splitlines()]
    assert [{**record, "reason": None} for record in records] == expected_records()
