"""Replacing the running programs (libdpp's dpp_upgrade, the facade's reload, `dppctl upgrade`) on a
real veth pair: rules, counters and the attachment carry over, every frame sent while programs are
swapped is classified by one of them, and a failed upgrade leaves the running programs in place.
The instances trace, so every frame runs two programs: the XDP entry, then dpp_xdp_trace, which the
entry tail-calls through dpp_progs."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.dataplane import abi
from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import Dataplane, host_interfaces
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from netapp.testbed import netns
from netapp.testbed.traffic import Sender
from tests.utils.arrivals import counted_once
from tests.utils.hand_maps import header_define, pin_hand_map, refused_on_reopen_and_upgrade, struct_body
from tests.utils.kernel import veth_namespace
from tests.utils.maps import pinned_instance, second_handle

REPO = Path(__file__).resolve().parents[2]
DPPCTL = REPO / "dataplane" / "build" / "dppctl"
PIN_ROOT = Path(abi.PIN_ROOT)
# the pipeline's ATSSS programs: a REDUNDANT copy's per position (devmap), the control plane's writer of a
# session's words (in no slot), and the stage (tail call)
ATSSS_PROGS = ("dpp_atsss_copy_0", "dpp_atsss_copy_1", "dpp_atsss_copy_2", "dpp_atsss_copy_3", "dpp_atsss_session_set",
               "dpp_atsss_stage")
IFACE, PEER = "v1", "v0"  # the pipeline sits on v1; frames are written into v0
PORT = 5004


@pytest.fixture
def ns() -> Iterator[str]:
    with veth_namespace("dpp-upg", IFACE, PEER) as name:
        yield name


@pytest.fixture(params=[True], ids=["tail-call"])
def dataplane(ns: str, request: pytest.FixtureRequest) -> Iterator[tuple[Dataplane, str]]:
    """A pinned instance attached to v1, counting UDP to PORT under the intent "video"; tracing
    (through the tail-called program) unless a test asks for the entry alone."""
    with pinned_instance("upg", netns=ns) as instance, netns.entered(ns):
        dp = Dataplane.open(instance=instance, trace=request.param)
        try:
            dp.attach(IFACE, "native")
            document = {
                "intents": [
                    {
                        "id": "video",
                        "match": {"protocol": "udp", "dst_port": PORT},
                        "action": {"type": "pass"},
                    }
                ]
            }
            dp.apply_compiled(compile_document(parse_document(document), host_interfaces()))
            yield dp, instance
        finally:
            dp.close()


def frame() -> bytes:
    return bytes(
        Ether(dst="02:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(dport=PORT) / (b"x" * 18)
    )


def send(ns: str, count: int) -> int:
    sender = Sender(ns, PEER)
    try:
        return sender.send([frame()], rounds=count)
    finally:
        sender.close()


def video_packets(dp: Dataplane) -> int:
    return dp.rule_stats()["video"][0]


def xdp_prog_id(ns: str) -> int | None:
    shown = netns.run(["ip", "-n", ns, "-details", "link", "show", IFACE])
    found = re.search(r"prog/xdp id (\d+)", shown)
    return int(found.group(1)) if found else None


def pinned_programs(instance: str) -> list[dict]:
    """The instance's programs as another process finds them: from the pins, slots read from the
    pinned dpp_progs."""
    handle = second_handle(instance)
    try:
        return handle.programs()
    finally:
        handle.close()


def pinned_prog_id(instance: str) -> int:
    return pinned_programs(instance)[0]["id"]


def program_ids(dp: Dataplane) -> dict[str, int]:
    return {program["name"]: program["id"] for program in dp.status()["programs"]}


def tail_called(instance: str) -> int:
    """Packets the program in dpp_progs' trace slot ran on (dpp_prog_stats, summed over CPUs)."""
    bpftool = shutil.which("bpftool")
    if bpftool is None:
        pytest.skip("bpftool is needed to read dpp_prog_stats")
    pin = PIN_ROOT / instance / "maps" / "dpp_prog_stats"
    shown = subprocess.run(
        [bpftool, "-j", "map", "lookup", "pinned", str(pin), "key", "0", "0", "0", "0"],
        capture_output=True,
        text=True,
        check=True,
    )
    return sum(per_cpu["value"]["packets"] for per_cpu in json.loads(shown.stdout)["formatted"]["values"])


def test_a_reload_swaps_the_program_and_keeps_rules_counters_and_the_link(ns, dataplane):
    dp, instance = dataplane
    assert send(ns, 10) == 10
    assert counted_once(lambda: video_packets(dp), 10) == 10
    rules = dp.status()["rules"]
    programs = program_ids(dp)

    before, after = dp.reload()

    assert before != after == dp.program_id()
    assert xdp_prog_id(ns) == after  # the interface runs the new program
    assert pinned_prog_id(instance) == after  # and another process opening the instance finds it
    assert not (PIN_ROOT / instance / "next").exists()
    assert dp.status()["rules"] == rules
    assert video_packets(dp) == 10  # counters live in the maps, which stayed
    send(ns, 5)
    assert counted_once(lambda: video_packets(dp), 15) == 15  # the new program classifies with the same rules
    dp.test_run(frame())  # through the handle's program: the new one too
    assert video_packets(dp) == 16
    assert tail_called(instance) == 16  # the entry tail-called the trace program for each frame
    assert programs.keys() == program_ids(dp).keys() == {
        "dpp_xdp", "dpp_xdp_trace", "dpp_rss_worker", "dpp_frer_stage", "dpp_frer_egress", "dpp_dup_decap",
        "dpp_clock_start", *ATSSS_PROGS}


def test_a_reload_replaces_every_program_and_its_pin_and_slot(ns, dataplane):
    dp, instance = dataplane
    old = dp.status()["programs"]
    assert [(p["name"], p["kind"], p["slot"]) for p in old] == [
        ("dpp_xdp", "xdp", "entry"),
        *[(name, "devmap", None) for name in ATSSS_PROGS[:4]],
        ("dpp_atsss_session_set", "tail", None),
        ("dpp_atsss_stage", "tail", "atsss"),
        ("dpp_clock_start", "tail", None),  # libdpp's starter of the policers' clock timer (in no slot)
        ("dpp_dup_decap", "devmap", None),
        ("dpp_frer_egress", "devmap", None),
        ("dpp_frer_stage", "tail", "frer"),
        ("dpp_rss_worker", "cpumap", None),
        ("dpp_xdp_trace", "tail", "trace"),
    ]

    dp.reload()

    new = dp.status()["programs"]
    assert [p["name"] for p in new] == [p["name"] for p in old]
    assert not {p["id"] for p in new} & {p["id"] for p in old}  # both programs are new
    # Another process finds the new programs pinned, and the new tail-call target in the pinned
    # dpp_progs' slot (a slot is only named when the array holds that program's id).
    assert pinned_programs(instance) == new
    assert sorted(os.listdir(PIN_ROOT / instance / "progs")) == [
        *ATSSS_PROGS, "dpp_clock_start", "dpp_dup_decap", "dpp_frer_egress", "dpp_frer_stage", "dpp_rss_worker",
        "dpp_xdp_trace"]


@pytest.mark.parametrize(
    ("dataplane", "tracing"), [(False, False), (True, True)], ids=["entry-only", "tail-call"], indirect=["dataplane"]
)
def test_every_frame_sent_while_programs_are_swapped_is_classified(ns, dataplane, tracing):
    """A frame arriving between two programs would reach the stack unclassified and be missing
    from the count: the link switch must leave no such moment. With the trace on, a frame meeting
    an empty or stale dpp_progs slot would miss the tail-called program and its count. Traffic
    flows from before the first reload until after the last, however long reloads take on a
    loaded machine."""
    dp, instance = dataplane
    sent: list[int] = []
    flowing, stop = threading.Event(), threading.Event()

    def sending() -> None:
        while not stop.is_set():
            sent.append(send(ns, 2_000))
            flowing.set()

    sender = threading.Thread(target=sending)
    sender.start()
    try:
        assert flowing.wait(timeout=60), "no traffic"
        for _ in range(3):
            dp.reload()
    finally:
        stop.set()
        sender.join()
    assert counted_once(lambda: video_packets(dp), sum(sent)) == sum(sent)
    assert tail_called(instance) == (sum(sent) if tracing else 0)


def test_a_failed_upgrade_leaves_the_running_program_attached_and_pinned(ns, dataplane):
    dp, instance = dataplane
    running = dp.program_id()
    programs = dp.status()["programs"]
    blocker = PIN_ROOT / instance / "next" / "prog"
    blocker.mkdir(parents=True)  # where the new entry waits for the switch: a directory is in the way
    (blocker / "in_the_way").mkdir()
    try:
        with pytest.raises(DataplaneError):
            dp.reload()
    finally:
        (blocker / "in_the_way").rmdir()
        blocker.rmdir()
    assert dp.program_id() == running
    assert xdp_prog_id(ns) == running
    assert pinned_prog_id(instance) == running
    assert dp.status()["programs"] == pinned_programs(instance) == programs  # the tail target too
    send(ns, 3)
    assert counted_once(lambda: video_packets(dp), 3) == 3
    assert dp.reload()[1] != running  # nothing was left half done


def test_dppctl_upgrade_reports_both_program_ids(ns, dataplane):
    dp, instance = dataplane
    before = dp.program_id()
    result = subprocess.run(
        ["nsenter", f"--net=/run/netns/{ns}", str(DPPCTL), "-n", instance, "upgrade"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "LC_ALL": "C"},
    )
    assert (result.returncode, result.stderr) == (0, "")
    after = xdp_prog_id(ns)
    assert result.stdout.strip() == f"instance '{instance}' upgraded: program id {before} -> {after}"
    assert after != before


# --- instances pinned by a build with another ABI ------------------------------------------------


def replace_pinned_map(instance: str, name: str, kind: str, value_size: int, entries: int) -> None:
    """Put a map of another size where the instance's map `name` is pinned: what a build with
    another ABI (e.g. reasons before their per-function ranges: 24) would have left."""
    bpftool = shutil.which("bpftool")
    if bpftool is None:
        pytest.skip("bpftool is needed to pin a map of another layout")
    pin = PIN_ROOT / instance / "maps" / name
    pin.unlink()
    subprocess.run(
        [bpftool, "map", "create", str(pin), "type", kind, "key", "4", "value", str(value_size),
         "entries", str(entries), "name", name],
        check=True,
        capture_output=True,
    )


def test_an_instance_whose_reason_counters_are_numbered_otherwise_is_refused_not_reused(caplog):
    with pinned_instance("abi") as instance:
        Dataplane.open(instance=instance).close()
        replace_pinned_map(instance, "dpp_reasons", "percpu_array", 16, 24)
        with pytest.raises(DataplaneError) as refused:
            Dataplane.open(instance=instance)
        assert refused.value.errno == errno.EPROTO
        assert "map dpp_reasons has 24 slots, not DPP_REASON_MAX" in caplog.text
        assert "unpin the instance and load it again" in caplog.text
        shutil.rmtree(PIN_ROOT / instance)  # what the message asks for; pinned_instance unpins


def test_an_upgrade_over_a_map_of_another_size_is_refused_and_names_it(ns, dataplane, caplog):
    dp, instance = dataplane
    running = dp.program_id()
    replace_pinned_map(instance, "dpp_alt_groups", "array", 4 + 8 * 40, 32)
    with netns.entered(ns):
        other = Dataplane.open(instance=instance)  # sees the foreign map through the pin
    try:
        with pytest.raises(DataplaneError) as refused:
            other.reload()
    finally:
        other.close()
    assert refused.value.errno == errno.EPROTO
    assert "map dpp_alt_groups of instance" in caplog.text and "with 32 entries" in caplog.text
    assert "cannot be upgraded in place" in caplog.text
    assert xdp_prog_id(ns) == running == pinned_prog_id(instance)


SWAPPED = ("\t__u64 passed;\n", "\t__u64 discarded;\n")  # two members of one type, one after the other


def pin_map_of_another_layout(instance: str, tmp_path: Path) -> None:
    """dpp_frer_recovery pinned laid out as the header's but for SWAPPED in each other's place (the
    same size: what a build that moved a field leaves pinned)."""
    body = struct_body("nf/frer.h", "dpp_frer_recovery")
    pair = "".join(SWAPPED)
    assert pair in body, f"dpp_frer_recovery no longer has {SWAPPED} one after the other"
    pin_hand_map(instance, tmp_path, "dpp_frer_recovery", body.replace(pair, SWAPPED[1] + SWAPPED[0]),
                 entries=header_define("nf/frer.h", "DPP_MAX_FRER_STREAMS"), flags="BPF_F_MMAPABLE")


def test_an_instance_whose_frer_slots_are_laid_out_otherwise_at_the_same_size_is_refused(
    tmp_path, caplog
):
    with pinned_instance("btf") as instance:
        Dataplane.open(instance=instance).close()
        pin_map_of_another_layout(instance, tmp_path)
        refused, upgrade = refused_on_reopen_and_upgrade(instance)
    assert refused.errno == errno.EPROTO
    said = re.search(r"map dpp_frer_recovery: member 'passed' at bit (\d+), the new build's at bit (\d+): "
                     r"the ABI changed: unpin the instance and load it again", caplog.text)
    assert said, caplog.text
    assert int(said.group(1)) == int(said.group(2)) + 64  # it follows discarded, a __u64, in the pin
    assert upgrade.returncode != 0 and "member 'passed' at bit" in upgrade.stderr
