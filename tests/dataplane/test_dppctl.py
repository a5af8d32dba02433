"""dppctl, the C operator CLI, on a real veth in a network namespace.

dppctl runs under `nsenter --net`, which switches only the network namespace: `ip netns exec`
would also remount /sys, and a fresh bpffs there would hide (and lose) the instance's pins.
Every test uses its own namespace and instance name; both are removed afterwards, pass or fail.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import time
from ctypes import c_uint32
from pathlib import Path

import pytest

from bench.libbpf import map_update
from netapp import __version__ as netapp_version
from netapp.dataplane.binding import PIN_ROOT, Action, Reason, Verdict, shape_id
from netapp.dataplane.facade import Dataplane
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from netapp.qos.abi import ClockTimer
from netapp.testbed import netns
from tests.utils import packets
from tests.utils.kernel import build_artifact, require_kernel, veth_namespace
from tests.utils.maps import pipeline_map_fd

IFACE = "veth0"  # where the program is attached
PEER = "veth1"  # where test frames are sent from


@pytest.fixture
def ns():
    """A namespace holding the veth pair veth0 <-> veth1, both up."""
    with veth_namespace("dppctl", IFACE, PEER) as name:
        yield name


@pytest.fixture
def instance(ns):
    """A unique instance name; unloaded afterwards (before the namespace goes), pins removed."""
    name = f"t-{secrets.token_hex(4)}"
    yield name
    dppctl(ns, "-n", name, "unload")
    shutil.rmtree(Path(PIN_ROOT) / name, ignore_errors=True)


@pytest.fixture
def attached(ns, instance):
    result = dppctl(ns, "-n", instance, "attach", "-i", IFACE, "-m", "native", "-c", "0")
    assert (result.returncode, result.stderr) == (0, ""), result
    return instance


def dppctl(ns: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["nsenter", f"--net=/run/netns/{ns}", str(build_artifact("dppctl")), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The single line a failing dppctl command prints, after checking that is all it printed."""
    assert result.returncode != 0, result
    assert result.stdout == "", result
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dppctl: "), lines[0]
    return lines[0]


def xdp_prog_id(ns: str, ifname: str) -> int | None:
    """The id of the XDP program on an interface, as iproute2 reports it (None: no program)."""
    shown = netns.run(["ip", "-n", ns, "-details", "link", "show", ifname])
    found = re.search(r"prog/xdp id (\d+)", shown)
    return int(found.group(1)) if found else None


def pin_dir(instance: str) -> Path:
    return Path(PIN_ROOT) / instance


# --- help and version (no kernel needed) -------------------------------------------------------

COMMANDS = ("attach", "detach", "status", "rules", "stats", "upgrade", "unload")


def dppctl_here(*args: str) -> subprocess.CompletedProcess:
    """dppctl in this process's namespaces (for what touches no interface)."""
    return subprocess.run([str(build_artifact("dppctl")), *args], capture_output=True, text=True, timeout=30)


def test_version_is_the_projects_with_the_libbpf_it_runs_on():
    result = dppctl_here("--version")

    assert (result.returncode, result.stderr) == (0, ""), result
    assert re.fullmatch(rf"dppctl {re.escape(netapp_version)} \(libbpf v\d+\.\d+\)\n", result.stdout), result.stdout


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_command_has_help_on_stdout_and_exits_0(command, flag):
    # Given after the command's other options too, and before any instance is opened.
    result = dppctl_here("-n", "no-such-instance", command, "-i", "x", flag)

    assert (result.returncode, result.stderr) == (0, ""), result
    usage, what, *options = result.stdout.splitlines()
    assert usage.startswith(f"usage: dppctl [-n INSTANCE] {command}") and what


def test_the_general_help_lists_every_command_and_the_version():
    result = dppctl_here("--help")

    assert result.returncode == 0
    assert [line.split()[3] for line in result.stdout.splitlines()[1:1 + len(COMMANDS)]] == list(COMMANDS)
    assert "dppctl --version" in result.stdout


# --- attach, status, detach, unload ------------------------------------------------------------


def test_attach_loads_a_pinned_instance_that_status_in_another_process_reuses(ns, attached):
    status = dppctl(ns, "-n", attached, "status")

    assert (status.returncode, status.stderr) == (0, ""), status
    lines = status.stdout.splitlines()
    assert lines[0] == f"instance   {attached} (reused)"
    program = re.fullmatch(r"program    id (\d+), dpp_xdp \(XDP entry\)", lines[1])
    assert program, lines[1]
    assert int(program.group(1)) == xdp_prog_id(ns, IFACE)
    for position in range(4):
        assert re.fullmatch(rf" {{11}}id \d+, dpp_atsss_copy_{position} \(DEVMAP ports' program\)",
                            lines[2 + position]), lines[2 + position]
    # the control plane's writer of a session's words (run by it, not called from the pipeline)
    assert re.fullmatch(r" {11}id \d+, dpp_atsss_session_set \(in no slot\)", lines[6]), lines[6]
    assert re.fullmatch(r" {11}id \d+, dpp_atsss_stage \(tail call, slot atsss\)", lines[7]), lines[7]
    # libdpp's starter of the policers' clock timer (run by it at each load)
    assert re.fullmatch(r" {11}id \d+, dpp_clock_start \(in no slot\)", lines[8]), lines[8]
    assert re.fullmatch(r" {11}id \d+, dpp_dup_decap \(DEVMAP ports' program\)", lines[9]), lines[9]
    assert re.fullmatch(r" {11}id \d+, dpp_frer_egress \(DEVMAP ports' program\)", lines[10]), lines[10]
    assert re.fullmatch(r" {11}id \d+, dpp_frer_stage \(tail call, slot frer\)", lines[11]), lines[11]
    assert re.fullmatch(r" {11}id \d+, dpp_rss_worker \(CPUMAP queues' program\)", lines[12]), lines[12]
    assert re.fullmatch(r" {11}id \d+, dpp_xdp_trace \(tail call, slot trace\)", lines[13]), lines[13]
    assert f"attached   {IFACE} (ifindex {netns.ifindex(ns, IFACE)})" in lines
    assert "rules      0 of 65536 (dpp_rules)" in lines
    assert "cpus       0: unmetered, ok" in lines
    assert (pin_dir(attached) / "prog").exists()


RUNNING_CLOCK = re.compile(r"clock      word \d+ us old")


def test_status_shows_the_policers_clock_and_a_timer_it_found_stopped(ns, attached):
    running = dppctl(ns, "-n", attached, "status")
    with netns.entered(ns), Dataplane.open(instance=attached) as dp:
        timer = pipeline_map_fd(dp, "dpp_clock")
    try:
        map_update(timer, c_uint32(0), ClockTimer())  # cancelled, as a write of the value does
    finally:
        os.close(timer)

    stopped = dppctl(ns, "-n", attached, "status")
    again = dppctl(ns, "-n", attached, "status")

    assert RUNNING_CLOCK.fullmatch(running.stdout.splitlines()[-1]), running.stdout
    assert stopped.stdout.splitlines()[-1] == (
        "clock      stopped: coarse policers read the helper; this command started it again"), stopped.stdout
    assert RUNNING_CLOCK.fullmatch(again.stdout.splitlines()[-1]), again.stdout


def test_the_first_attach_says_it_loaded_the_instance(ns, instance):
    result = dppctl(ns, "-n", instance, "attach", "-i", IFACE, "-m", "native", "-c", "0")

    assert (result.returncode, result.stderr) == (0, ""), result
    assert result.stdout == f"instance '{instance}' (loaded) attached to {IFACE} in native mode\n"
    assert xdp_prog_id(ns, IFACE) is not None


def test_rules_and_stats_name_every_verdict_action_and_reason(ns, attached):
    rules = dppctl(ns, "-n", attached, "rules")
    stats = dppctl(ns, "-n", attached, "stats")

    assert (rules.returncode, rules.stdout, rules.stderr) == (0, "no rules\n", "")
    assert (stats.returncode, stats.stderr) == (0, ""), stats
    sections = stats_sections(stats.stdout)
    assert list(sections) == ["verdict", "action", "reason"]
    assert list(sections["verdict"]) == [v.name.lower() for v in Verdict]
    assert list(sections["action"]) == [a.name.lower() for a in Action]
    assert list(sections["reason"]) == [r.name.lower() for r in Reason]


def stats_sections(text: str) -> dict[str, dict[str, tuple[int, int]]]:
    """`dppctl stats` as {section: {name: (packets, bytes)}}."""
    sections: dict[str, dict[str, tuple[int, int]]] = {}
    current: dict[str, tuple[int, int]] = {}
    for line in text.splitlines():
        header = re.fullmatch(r"(\w+(?: \w+)*)\s+packets\s+bytes", line)
        if header:
            current = sections.setdefault(header.group(1), {})
            continue
        name, pkts, size = line.split()
        current[name] = (int(pkts), int(size))
    return sections


def test_attaching_twice_fails_with_one_line(ns, attached):
    line = one_error_line(dppctl(ns, "-n", attached, "attach", "-i", IFACE, "-m", "native"))

    assert IFACE in line and "already attached" in line
    assert (pin_dir(attached) / "prog").exists(), "a failed attach must not unload a reused instance"


def test_detach_then_detach_again_says_not_attached(ns, attached):
    first = dppctl(ns, "-n", attached, "detach", "-i", IFACE)
    assert (first.returncode, first.stderr) == (0, ""), first
    assert first.stdout == f"instance '{attached}' detached from {IFACE}\n"
    assert xdp_prog_id(ns, IFACE) is None

    line = one_error_line(dppctl(ns, "-n", attached, "detach", "-i", IFACE))

    assert "not attached" in line and IFACE in line


def test_an_unknown_mode_is_a_usage_error(ns, instance):
    result = dppctl(ns, "-n", instance, "attach", "-i", IFACE, "-m", "turbo")

    line = one_error_line(result)
    assert "turbo" in line and "native" in line
    assert not pin_dir(instance).exists()
    # Usage errors exit 2, like dppctl's unknown commands and options; failed operations exit 1.
    assert result.returncode == 2


def test_unload_removes_the_pins_and_the_program(ns, attached):
    result = dppctl(ns, "-n", attached, "unload")

    assert (result.returncode, result.stderr) == (0, ""), result
    assert result.stdout == f"instance '{attached}' unloaded\n"
    assert not pin_dir(attached).exists()
    assert xdp_prog_id(ns, IFACE) is None
    assert "no instance" in one_error_line(dppctl(ns, "-n", attached, "status"))



# The pin root is shared by every instance on the machine (and by the other tests running beside
# this one), so whether the last unload removes it is watched on a bpffs of its own: a private mount
# namespace (and a network namespace for its veth pair) that vanish with the shell, pins and all.
def test_the_last_unload_removes_the_pin_root_and_not_before():
    require_kernel()
    dppctl_path = build_artifact("dppctl")
    script = f"""
set -e
mount -t bpf bpf /sys/fs/bpf
ip link add dpp0 type veth peer name dpp1
ip link set dpp0 up; ip link set dpp1 up
{dppctl_path} -n first attach -i dpp0 -m native -c 0 >/dev/null
{dppctl_path} -n second attach -i dpp1 -m native -c 0 >/dev/null
{dppctl_path} -n first unload >/dev/null
echo "after first: $(ls /sys/fs/bpf/dpp | tr '\\n' ' ')"
test -e /sys/fs/bpf/dpp/second/prog && echo "second's program pinned"
{dppctl_path} -n second unload >/dev/null
test -e /sys/fs/bpf/dpp && echo "root left" || echo "root removed"
"""
    result = subprocess.run(
        ["unshare", "--mount", "--net", "--propagation", "private", "--", "sh", "-c", script],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert (result.returncode, result.stderr) == (0, ""), result
    assert result.stdout.splitlines() == ["after first: second ", "second's program pinned", "root removed"]

# --- rules installed by the Python control plane --------------------------------------------------


def apply_intents(ns: str, instance: str, intents: list[dict]) -> None:
    """The control plane reopening the attached instance in the namespace and applying intents."""
    with netns.entered(ns):
        dp = Dataplane.open(instance=instance)
        try:
            assert dp.attached() == [socket.if_nametoindex(IFACE)]
            document = parse_document({"intents": intents, "cpus": [{"cpu": 0}]})
            dp.apply_compiled(compile_document(document, {IFACE: socket.if_nametoindex(IFACE)}))
        finally:
            dp.close()


def send(ns: str, frames: list[bytes]) -> None:
    """Frames out of the peer, so they arrive on the attached interface."""
    with netns.entered(ns):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    with sock:
        sock.bind((PEER, 0))
        for frame in frames:
            sock.send(frame)


def wait_for_verdict(ns: str, instance: str, verdict: str, packets_wanted: int) -> dict:
    deadline = time.monotonic() + 30  # generous: each look starts dppctl; returns once counted
    while True:
        sections = stats_sections(dppctl(ns, "-n", instance, "stats").stdout)
        if sections["verdict"][verdict][0] >= packets_wanted or time.monotonic() > deadline:
            return sections
        time.sleep(0.05)


def test_a_rule_installed_through_python_is_listed_with_its_counters(ns, attached):
    intent = {"id": "rtp", "match": {"protocol": "udp", "dst_port": 5004}, "action": {"type": "drop"}}
    apply_intents(ns, attached, [intent])
    frame = bytes(packets.ether(packets.ue_udp("10.0.0.1", "10.0.0.2", 40000, 5004)))
    send(ns, [frame] * 3)
    stats = wait_for_verdict(ns, attached, "drop", 3)

    rules = dppctl(ns, "-n", attached, "rules")

    assert (rules.returncode, rules.stderr) == (0, ""), rules
    assert stats["verdict"]["drop"] == (3, 3 * len(frame))
    assert stats["action"]["drop"] == (3, 3 * len(frame))
    compiled = compile_document(parse_document(intent), {}).ruleset
    expected_shape = shape_id(compiled.rules[0].shape)
    assert rules.stdout.splitlines() == [
        f"slot 0 prio 100 shape {expected_shape}: proto=udp dport=5004 -> drop; 3 pkts {3 * len(frame)} bytes"
    ]


def test_stats_lists_the_packets_steered_to_each_cpu(ns, attached):
    intent = {"id": "rtp", "match": {"protocol": "udp", "dst_port": 5004}, "action": {"type": "steer", "cpu": 0}}
    apply_intents(ns, attached, [intent])
    frame = bytes(packets.ether(packets.ue_udp("10.0.0.1", "10.0.0.2", 40000, 5004)))
    send(ns, [frame] * 3)

    stats = wait_for_verdict(ns, attached, "redirect", 3)

    assert stats["action"]["steer"] == (3, 3 * len(frame))
    assert stats["steered to cpu"] == {"0": (3, 3 * len(frame))}, "only CPUs that were steered to"


def test_rules_shows_the_prefix_length_of_an_address_match(ns, attached):
    intent = {
        "id": "from-ran",
        "match": {"src": "10.0.0.0/8", "protocol": "udp", "dst_port": 5004},
        "action": {"type": "steer", "cpu": 0},
    }
    apply_intents(ns, attached, [intent])

    rules = dppctl(ns, "-n", attached, "rules")

    assert (rules.returncode, rules.stderr) == (0, ""), rules
    [line] = rules.stdout.splitlines()
    assert "family=ipv4 proto=udp dport=5004" in line
    assert "-> steer cpu 0" in line
    assert " src=10.0.0.0/8 " in line, line


def test_native_mode_on_a_driver_without_xdp_suggests_generic_mode(ns, instance):
    netns.run(["ip", "-n", ns, "link", "add", "br0", "type", "bridge"])
    netns.run(["ip", "-n", ns, "link", "set", "br0", "up"])

    native = dppctl(ns, "-n", instance, "attach", "-i", "br0", "-m", "native", "-c", "0")
    line = one_error_line(native)
    assert "native XDP not supported" in line and "generic" in line, line
    assert xdp_prog_id(ns, "br0") is None

    generic = dppctl(ns, "-n", instance, "attach", "-i", "br0", "-m", "generic", "-c", "0")
    assert (generic.returncode, generic.stderr) == (0, ""), generic
    assert xdp_prog_id(ns, "br0") is not None
