"""The PFCP benchmark (bench/pfcp.py), small runs: every establishment accepted by a real endpoint in
a process of its own (a refusal stops the run), the endpoint holding each one, the fast path taking
every timed one (the warm-up taught it the shape); with the data path, its applier reconciled at
start as `netapp serve` reconciles it (no bucket of dpp_upf_dl4 left to read by a change)."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import threading
import time
from typing import Optional

from bench import pfcp, pfcp_load
from bench.harness import REPO
from tests.bench.conftest import BASELINE_TIMEOUT
from netapp.upf.pfcp.ies import Cause, IEType, MsgType
from tests.utils.kernel import require_kernel


def _run(tmp_path, *args: str) -> dict:
    out = tmp_path / "pfcp.json"
    assert pfcp.main(["--out", str(out), "--sessions", "300", "--warmup", "20", *args]) == 0
    return json.loads(out.read_text())


def _check(result: dict) -> None:
    counters = result["endpoint"]["counters"]
    assert result["endpoint"]["sessions"] == 320 and counters["accepted"] == 320 + 1, "and the Association Setup"
    assert counters["accepted_from_template"] >= 300, "every timed one: the shape was learnt in the warm-up"
    assert result["latency"]["count"] == 300 and result["establishments_per_s"] > 0
    assert {target["name"] for target in result["targets"]} == {"establishments_per_s", "p99_ms"}


def test_a_small_run_without_a_data_path(tmp_path):
    result = _run(tmp_path, "--applier", "none", "--no-sdf")
    _check(result)
    assert not result["maps_in_figure"]


def test_a_small_run_with_the_maps(tmp_path):
    require_kernel()
    result = _run(tmp_path, "--applier", "dpp")
    _check(result)
    assert result["maps_in_figure"] and result["settings"]["sdf_filters"] is False


def test_a_small_run_with_the_sdf_filters_through_the_service_s_rule_machinery(tmp_path):
    """--applier dpp-sdf: every establishment, its SDF filters too (refused without the service's
    rule machinery), accepted and held; the full way (a session with classifier rules is never made
    from a template)."""
    require_kernel()
    result = _run(tmp_path, "--applier", "dpp-sdf")
    counters = result["endpoint"]["counters"]
    assert result["endpoint"]["sessions"] == 320 and counters["accepted"] == 320 + 1, "and the Association Setup"
    assert counters.get("accepted_from_template", 0) == 0
    assert result["maps_in_figure"] and result["settings"]["sdf_filters"] is True


def test_an_open_loop_sends_on_its_schedule_and_counts_from_the_due_times(tmp_path, monkeypatch):
    """--rate: the timed requests leave at the offered rate whatever comes back, and each latency
    counts from the time the request was due, so a sender held back shows in the figures."""
    sent_at: list[int] = []
    real_sendto = pfcp_load.socket.socket.sendto

    class Recording(pfcp_load.socket.socket):
        def sendto(self, *args):  # type: ignore[override]
            sent_at.append(pfcp_load.time.perf_counter_ns())
            return real_sendto(self, *args)

    starts: list[tuple[int, int]] = []  # (a time before the open loop's start, sends before it)
    drive = pfcp_load._drive_at_rate

    def watched(*args):  # type: ignore[no-untyped-def]
        starts.append((pfcp_load.time.perf_counter_ns(), len(sent_at)))
        return drive(*args)

    monkeypatch.setattr(pfcp.socket, "socket", Recording)
    monkeypatch.setattr(pfcp_load, "_drive_at_rate", watched)
    result = _run(tmp_path, "--applier", "none", "--no-sdf", "--rate", "2000")
    _check(result)
    before, first = starts[-1]
    timed = sent_at[first:]
    assert len(timed) >= 300
    # Request i is due i / rate after the loop's start, which came after `before`: never sent earlier.
    # (A span of the sends is no such bound: the first of a window may leave late, the last on time.)
    early = [i for i, at in enumerate(timed) if at - before < i * 1e9 / 2000]
    assert not early, f"never ahead of the schedule: requests {early[:5]} left before i / rate"
    schedule = result["latency"]["schedule"]
    assert schedule["offered_per_s"] == 2000 and schedule["most_outstanding"] >= 1
    assert result["settings"]["offered_per_s"] == 2000


def test_an_open_loops_latency_counts_from_the_due_time_not_the_send():
    """The SMF's first send held back 30 ms: the requests due meanwhile leave late, are answered at
    once, and their latency still counts from when they were due (coordinated omission)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as endpoint, HeldFirstSend() as smf:
        endpoint.bind(("127.0.0.1", 0))
        smf.bind(("127.0.0.1", 0))
        smf.settimeout(5.0)
        requests = pfcp.requests(20, 2, sdf=False)
        answering = threading.Thread(target=_answer_each, args=(endpoint, len(requests)))
        answering.start()
        try:
            _, latencies, schedule = pfcp_load.drive_at_rate(smf, endpoint.getsockname(), requests, 1000.0)
        finally:
            answering.join()
        assert smf.gettimeout() == 5.0, "the socket's timeout given back"
    assert len(latencies) == 20 and schedule["sent_late"] >= 19
    # requests 1-19 were due within 19 ms of the start and left after 30 ms: 11 ms late at least
    assert sorted(latencies)[0] >= 11 - 1e-3


def test_an_open_loop_counts_the_requests_never_answered_as_lost(monkeypatch):
    # the wait for the 8 never answered: long enough that the 12 answers come within it on a loaded machine
    monkeypatch.setattr(pfcp_load, "TIMEOUT_S", 2.0)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as endpoint, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as smf:
        endpoint.bind(("127.0.0.1", 0))
        smf.bind(("127.0.0.1", 0))
        requests = pfcp.requests(20, 2, sdf=False)
        answering = threading.Thread(target=_answer_each, args=(endpoint, 20, 12))
        answering.start()
        try:
            _, latencies, schedule = pfcp_load.drive_at_rate(smf, endpoint.getsockname(), requests, 1000.0)
        finally:
            answering.join()
    assert len(latencies) == 12 and schedule["lost"] == 8


class HeldFirstSend(socket.socket):
    def __init__(self) -> None:
        super().__init__(socket.AF_INET, socket.SOCK_DGRAM)
        self.sends = 0

    def sendto(self, *args):  # type: ignore[override]
        self.sends += 1
        if self.sends == 1:
            time.sleep(0.03)  # the sender held back: what is measured, not a wait for another thread
        return super().sendto(*args)


def _answer_each(endpoint: socket.socket, count: int, answered: Optional[int] = None) -> None:
    """Accept each of `count` requests as it comes (its sequence number, Cause Request accepted),
    the first `answered` of them only if given."""
    for index in range(count):
        data, peer = endpoint.recvfrom(65535)
        if answered is not None and index >= answered:
            continue
        cause = struct.pack("!HHB", IEType.CAUSE, 1, Cause.REQUEST_ACCEPTED)
        body = bytes(8) + data[12:15] + b"\x00" + cause
        endpoint.sendto(bytes([0x21, MsgType.SESSION_ESTABLISHMENT_RESPONSE]) + struct.pack("!H", len(body)) + body,
                        peer)


def test_the_applier_starts_reconciled_with_every_bucket_known():
    """A change reads the dpp_upf_dl4 buckets it does not know from the kernel; `netapp serve`'s
    reconcile at start reads the table whole, and the bench's applier must start the same way."""
    require_kernel()
    with pfcp.dpp_applier() as applier:
        assert applier._ways._known == set(range(1 << applier._ways.bits))


@BASELINE_TIMEOUT
def test_a_baseline_revision_is_timed_in_the_same_run_by_its_own_code(tmp_path, monkeypatch, shared_baselines):
    """--baseline: the revision's endpoint (its export's netapp, checked by the endpoint itself as it
    starts) answers the same requests; both sides' figures in one result, in pairs whose order
    alternates (the first pair the baseline first, the second HEAD first). Exported into the run's
    shared temporary directory (conftest.py), not bench/build/; without a data path, its data plane
    is not built here (the other --baseline tests build it)."""
    monkeypatch.setattr(pfcp, "prepare_baseline", shared_baselines)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    result = _run(tmp_path, "--applier", "none", "--no-sdf", "--sessions", "100", "--baseline", "HEAD",
                  "--pairs", "2")
    revision = result["baseline"]
    assert (revision["rev"], revision["commit"]) == ("HEAD", commit)
    assert [pair["order"] for pair in result["pairs"]] == [pfcp.BASELINE_FIRST, pfcp.HEAD_FIRST]
    for pair in result["pairs"]:
        for side in ("baseline", "head"):
            assert pair[side]["endpoint"]["sessions"] == 120 and pair[side]["latency"]["count"] == 100
            assert pair[side]["endpoint"]["counters"]["accepted_from_template"] >= 100
    assert result["endpoint"] == result["pairs"][0]["head"]["endpoint"]
    assert {order: [len(runs) for runs in sides.values()] for order, sides in result["by_order"].items()} == {
        pfcp.BASELINE_FIRST: [1, 1], pfcp.HEAD_FIRST: [1, 1]}
    table = pfcp.format_table(result)
    assert f"baseline  HEAD ({commit[:12]})" in table
    assert "pair 1 (baseline first): baseline " in table and "pair 2 (head first): head " in table


def test_pairs_alternate_which_side_is_timed_first():
    assert [pfcp.pair_order(index) for index in range(4)] == [
        pfcp.BASELINE_FIRST, pfcp.HEAD_FIRST, pfcp.BASELINE_FIRST, pfcp.HEAD_FIRST]
