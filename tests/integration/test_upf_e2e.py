"""A real UE session through the UPF (netapp.testbed.upf):

    ue ── gnb1 / gnb2 (netapp.testbed.gnb: TUN + GTP-U) ── N3 ── upf (`netapp serve`, XDP on n3a,
    n3b, n6) ── N6 ── dn (an HTTP server, a UDP echo);  smf (tests/upf/smf_agent.py) ── N4 ── upf

A separate SMF process sets the session up over PFCP. Then:
- a 50 MB download from the data network to the UE over TCP arrives whole (sha256); halfway, the
  SMF moves the downlink to the second gNB (Update FAR, SNDEM): the download goes on through it, and
  the first gNB gets an End Marker with its TEID from the UPF's N3 address;
- the URR's volumes (dpp_upf_usage, read through a second handle on the pinned maps: nothing in
  netapp.upf exposes them yet) equal the bytes on the N6 wire (dn0's counters) less 14 bytes of
  Ethernet per frame, each way;
- `netapp serve` is killed with SIGKILL while a numbered UDP stream runs UE -> DN -> UE, and
  restarted: not one datagram is lost either way, with traffic flowing while no process runs;
  after the restart, the Recovery Time Stamp is the same, the session's entries are in the maps,
  a modification of the session is accepted and acted on (back to the first gNB, End Marker to the
  second), and a download still arrives whole.

Needs root, libdpp, nsenter and /dev/net/tun (skipped outside CI, a failure under CI).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from netapp.core.netns import NETNS_DIR, entered
from netapp.dataplane.abi import Reason, Verdict
from netapp.dataplane.tables import Table, open_table
from netapp.qos.applier import PolicerApplier
from netapp.testbed import netns
from netapp.testbed.upf import UpfSite
from netapp.upf.abi import QFI_ANY, DownlinkKey, PdrFlag, UplinkKey
from netapp.upf.compiler import words
from netapp.upf.ways import Ways
from tests.utils.kernel import build_artifact, require_kernel
from tests.utils.maps import pinned_instance, second_handle
from tests.utils.serve import REPO, ServeProcess, free_port, write_node_settings

DOWNLOAD_BYTES = 50 << 20
SMALL_DOWNLOAD_BYTES = 1 << 20
HTTP_PORT, ECHO_PORT = 8080, 7000
GNB1_TEID, GNB2_TEID = 0x100, 0x200
ETHERNET = 14
STREAM_PPS = 400
CATCH_UP = 32  # frames an EchoStream sends back to back at most (a round is 5 ms: 16 times the rate)
DEADLINE_S = 30.0  # the longest any one step may take on two loaded cores; none waits it out
ACCEPTED = 1


def _requirements() -> None:
    require_kernel()
    tools = (("nsenter (util-linux)", shutil.which("nsenter")), ("/dev/net/tun", os.path.exists("/dev/net/tun")))
    for what, there in tools:
        if not there:
            (pytest.fail if os.environ.get("CI") else pytest.skip)(f"needs {what}")


def wait_until(condition, what: str, timeout: float = DEADLINE_S) -> Any:
    """Poll `condition` until it is true (returns its value), or fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)


class LineProcess:
    """A child speaking one line per request and per answer on stdin/stdout."""

    def __init__(self, command: list[str], log: Path):
        self.log = log
        with log.open("w") as stderr:
            self.process = subprocess.Popen(
                command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True
            )

    def read_line(self) -> str:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], DEADLINE_S)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            raise AssertionError(f"{self.process.args[-2:]}: no answer; its log:\n{self.log.read_text()[-2000:]}")
        return line.strip()

    def send(self, line: str) -> None:
        """A request, its answer left to `read_line`."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def ask(self, line: str) -> str:
        self.send(line)
        return self.read_line()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def in_netns(name: str) -> list[str]:
    return ["nsenter", f"--net={NETNS_DIR}/{name}"]


# --- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture
def site() -> Iterator[UpfSite]:
    _requirements()
    with UpfSite() as built:
        built.ready_for_xdp(str(build_artifact("xdp_pass.bpf.o")))
        yield built


@pytest.fixture
def instance(site: UpfSite) -> Iterator[str]:
    with pinned_instance("upf", site.ns("upf")) as name:
        yield name


@pytest.fixture
def more_peer_networks() -> list[str]:
    """Where else than the gNBs the UPF may send (upf.peer_networks): a module's own peers."""
    return []


@pytest.fixture
def serve(site: UpfSite, instance: str, tmp_path: Path, more_peer_networks: list[str]) -> Iterator[ServeProcess]:
    interfaces = [site.n3a.ifname, site.n3b.ifname, site.n6.ifname]
    config, _token = write_node_settings(
        tmp_path, instance, site.ns("upf"), interfaces, "operator", max_rules=4096,
        telemetry={"enabled": False}, liveness={"enabled": False}, **site.upf_settings(more_peer_networks),
    )
    process = ServeProcess(config, free_port(), tmp_path, netns=site.ns("upf"))
    try:
        process.start()
        yield process
    finally:
        process.stop()


@pytest.fixture
def smf(site: UpfSite, serve: ServeProcess, tmp_path: Path) -> Iterator[LineProcess]:
    command = [*in_netns(site.ns("smf")), sys.executable, "-m", "tests.upf.smf_agent", site.n4.ip, site.smf.ip]
    agent = LineProcess(command, tmp_path / "smf.log")
    try:
        assert json.loads(agent.read_line()) == {"ready": True}
        yield agent
    finally:
        agent.close()


@pytest.fixture
def gnb(site: UpfSite, tmp_path: Path) -> Iterator[LineProcess]:
    cells = [{"name": port.host, "netns": site.ns(port.host), "address": port.ip} for port in (site.gnb1, site.gnb2)]
    config = {"ue_netns": site.ns("ue"), "ue_address": site.ue_address, "upf": site.n3_address, "cells": cells}
    ran = LineProcess([sys.executable, "-m", "netapp.testbed.gnb", json.dumps(config)], tmp_path / "gnb.log")
    try:
        assert ran.read_line() == "ready"
        yield ran
    finally:
        ran.close()


@pytest.fixture
def dn(site: UpfSite, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The data network's HTTP server (python's http.server, its own process) serving random blobs;
    name -> sha256."""
    served = tmp_path / "www"
    served.mkdir()
    digests = {}
    for name, size in (("big", DOWNLOAD_BYTES), ("small", SMALL_DOWNLOAD_BYTES)):
        blob = os.urandom(size)
        (served / name).write_bytes(blob)
        digests[name] = hashlib.sha256(blob).hexdigest()
    command = [*in_netns(site.ns("dn")), sys.executable, "-m", "http.server", "--bind", site.dn0.ip]
    with (tmp_path / "http.log").open("w") as log:
        server = subprocess.Popen([*command, "--directory", str(served), str(HTTP_PORT)], stdout=log, stderr=log)
    try:
        wait_until(lambda: _listening(site, server), "the data network's HTTP server listens")
        yield digests
    finally:
        server.kill()
        server.wait()


def _listening(site: UpfSite, server: subprocess.Popen) -> bool:
    assert server.poll() is None, "the HTTP server exited"
    with entered(site.ns("dn")):
        probe = socket.socket()
    with probe:
        return probe.connect_ex((site.dn0.ip, HTTP_PORT)) == 0


# --- the UE's traffic ------------------------------------------------------------------------------


class Download(threading.Thread):
    """GET /<name> from the UE's namespace over plain HTTP/1.0, hashed as it arrives. With `pause_at`,
    it stops reading once that many body bytes arrived (`paused` set) until `resume` is set."""

    def __init__(self, site: UpfSite, name: str, pause_at: Optional[int] = None):
        super().__init__(name=f"download-{name}", daemon=True)
        self.site, self.path, self.pause_at = site, name, pause_at
        self.received, self.digest, self.error = 0, hashlib.sha256(), None
        self.paused, self.resume = threading.Event(), threading.Event()

    def run(self) -> None:
        try:
            with entered(self.site.ns("ue")):
                sock = socket.create_connection((self.site.dn0.ip, HTTP_PORT), timeout=DEADLINE_S)
            with sock:
                sock.sendall(f"GET /{self.path} HTTP/1.0\r\n\r\n".encode())
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = sock.recv(4096)
                    assert chunk, "the server closed before its headers ended"
                    head += chunk
                head, body = head.split(b"\r\n\r\n", 1)
                assert head.startswith(b"HTTP/1.0 200"), head[:80]
                self._take(body)
                while chunk := sock.recv(1 << 16):
                    self._take(chunk)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def _take(self, chunk: bytes) -> None:
        self.digest.update(chunk)
        self.received += len(chunk)
        if self.pause_at is not None and self.received >= self.pause_at and not self.resume.is_set():
            self.paused.set()
            assert self.resume.wait(DEADLINE_S), "not resumed"

    def result(self) -> tuple[int, str]:
        self.join(DEADLINE_S * 2)
        assert not self.is_alive(), f"the download did not end: {self.received} bytes"
        assert self.error is None, f"the download failed after {self.received} bytes: {self.error!r}"
        return self.received, self.digest.hexdigest()


class EchoStream:
    """Numbered UDP datagrams UE -> DN, each echoed DN -> UE, paced by the clock: which numbers the
    DN received and which came back tell exactly what was lost on either way."""

    def __init__(self, site: UpfSite, rate_pps: int):
        with entered(site.ns("dn")):
            self.server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with entered(site.ns("ue")):
            self.client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for sock in (self.server, self.client):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            sock.settimeout(0.1)
        self.server.bind((site.dn0.ip, ECHO_PORT))
        self.client.connect((site.dn0.ip, ECHO_PORT))
        self.rate_pps, self.sent = rate_pps, 0
        self.at_dn: list[int] = []
        self.back: list[int] = []
        self._halt, self._drained = threading.Event(), threading.Event()
        self._threads = [threading.Thread(target=run, daemon=True) for run in (self._send, self._echo, self._receive)]

    def start(self) -> "EchoStream":
        for thread in self._threads:
            thread.start()
        return self

    def _send(self) -> None:
        started = time.monotonic()
        while not self._halt.is_set():
            # what is due, at most CATCH_UP a round: after a stall (the restart's start-up takes the
            # cores) what is owed goes out over some rounds, not as one burst into the TUN's queue
            due = min(int((time.monotonic() - started) * self.rate_pps), self.sent + CATCH_UP)
            while self.sent < due:
                self.client.send(self.sent.to_bytes(4, "big") * 16)
                self.sent += 1
            time.sleep(0.005)

    def _echo(self) -> None:
        self._loop(self.server, self.at_dn, echo=True)

    def _receive(self) -> None:
        self._loop(self.client, self.back, echo=False)

    def _loop(self, sock: socket.socket, numbers: list[int], echo: bool) -> None:
        while not self._drained.is_set():
            try:
                data, peer = sock.recvfrom(2048)
            except socket.timeout:
                continue
            numbers.append(int.from_bytes(data[:4], "big"))
            if echo:
                sock.sendto(data, peer)

    def stop(self) -> int:
        """Stop sending; wait until every datagram came back (or the deadline); returns the count."""
        self._halt.set()
        self._threads[0].join()
        with contextlib.suppress(AssertionError):
            wait_until(lambda: len(self.back) >= self.sent, "every datagram echoed")
        self._drained.set()
        for thread in self._threads[1:]:
            thread.join(DEADLINE_S)
        self.server.close()
        self.client.close()
        return self.sent


def losses(numbers: list[int], sent: int) -> str:
    missing = sorted(set(range(sent)) - set(numbers))
    return f"{len(missing)} of {sent} lost (first {missing[:10]}), {len(numbers) - len(set(numbers))} duplicated"


# --- what the UPF holds ----------------------------------------------------------------------------


class Maps:
    """The UPF's tables and usage, through a second handle on the pinned instance."""

    def __init__(self, instance: str):
        self.handle = second_handle(instance)

    def close(self) -> None:
        self.handle.close()

    def downlink(self, site: UpfSite) -> Any:
        """The UE address's entry: its way of dpp_upf_dl4 (an address the SMF gave) or dpp_upf_downlink's."""
        ways = Table(self.handle, "dpp_upf_dl4")
        slot = Ways(ways).slot((1, 4, socket.inet_aton(site.ue_address).ljust(16, b"\0")))
        if slot is not None:
            return ways.get(slot)
        key = DownlinkKey(net_instance=1, family=4, addr=tuple(words(site.ue_address)))
        return Table(self.handle, "dpp_upf_downlink").get(key)

    def uplink(self, teid: int) -> Any:
        """The TEID's own entry: its slot of dpp_upf_teids (a TEID the UPF chose) or dpp_upf_uplink's."""
        slot = Table(self.handle, "dpp_upf_teids").get(teid)
        if slot is not None and slot.flags & PdrFlag.ENTRY:
            return slot
        return Table(self.handle, "dpp_upf_uplink").get(UplinkKey(teid=teid, qfi=QFI_ANY))

    def usage(self, slot: int) -> tuple[int, int, int, int]:
        """(uplink packets, bytes, downlink packets, bytes) of a URR slot."""
        counts = Table(self.handle, "dpp_upf_usage").get(slot)
        return (counts.ul_packets, counts.ul_bytes, counts.dl_packets, counts.dl_bytes)

    def table(self, name: str) -> Table:
        """A map of the instance, per-CPU ones as such (as Dataplane.table gives them)."""
        return open_table(self.handle, name)

    def policed(self, policer: int) -> tuple[int, int]:
        """(packets, bytes) a policer dropped, every CPU's (0, 0 for no policer)."""
        if not policer:
            return 0, 0
        counters = PolicerApplier(self.table).counters(policer)
        return counters.dropped_packets, counters.dropped_bytes

    def outcomes(self) -> dict[str, int]:
        """Packets redirected (the FIB's egress), and packets of each way the UPF could not route."""
        reasons = self.handle.stats_reasons()
        counted = {"redirected": self.handle.stats_verdicts()[Verdict.REDIRECT][0]}
        for reason in (Reason.UPF_NO_ROUTE, Reason.UPF_NO_NEIGH, Reason.UPF_ENCAP_FAILED, Reason.UPF_TEID_MISS):
            counted[reason.name.lower()] = reasons[reason][0]
        return counted


def n6_wire(site: UpfSite) -> tuple[int, int, int, int]:
    """(packets, bytes) the data network received, then sent, on dn0: the N6 wire."""
    stats = netns.link_stats(site.ns("dn"), site.dn0.ifname)
    return stats["rx"]["packets"], stats["rx"]["bytes"], stats["tx"]["packets"], stats["tx"]["bytes"]


def ask(smf: LineProcess, **command: Any) -> dict[str, Any]:
    answer = json.loads(smf.ask(json.dumps(command)))
    assert answer["cause"] == ACCEPTED, answer
    return answer


def cells(gnb: LineProcess) -> dict[str, Any]:
    """The gNB's counters by cell."""
    return json.loads(gnb.ask("stats"))["cells"]


def end_markers(gnb: LineProcess, cell: str) -> dict[str, Any]:
    """The counters once `cell` has received an End Marker."""
    return wait_until(lambda: (now := cells(gnb))[cell]["end_markers"] and now, f"{cell} receives an End Marker")


# --- the test --------------------------------------------------------------------------------------


def test_a_ue_session_downloads_through_a_handover_and_survives_a_kill_of_the_upf(
    site, instance, serve, smf, gnb, dn
):
    ask(smf, op="associate")
    session = ask(smf, op="establish", ue=site.ue_address, gnb=site.gnb1.ip, teid=GNB1_TEID)
    seid, teid = session["seid"], session["teid"]
    assert gnb.ask(f"serve gnb1 {teid}") == "ok"
    maps = Maps(instance)
    try:
        slot = maps.downlink(site).urr
        assert maps.uplink(teid).urr == slot, "one URR counts both ways"
        usage_before, wire_before, outcomes_before = maps.usage(slot), n6_wire(site), maps.outcomes()
        dropped_before = maps.policed(maps.downlink(site).policer)

        # 50 MB down; halfway, the downlink moves to gNB 2 with an End Marker to gNB 1.
        download = Download(site, "big", pause_at=DOWNLOAD_BYTES // 2)
        download.start()
        assert download.paused.wait(DEADLINE_S), f"only {download.received} bytes arrived"
        ask(smf, op="move_downlink", seid=seid, gnb=site.gnb2.ip, teid=GNB2_TEID)
        assert gnb.ask(f"serve gnb2 {teid}") == "ok"
        moved = cells(gnb)
        download.resume.set()
        assert download.result() == (DOWNLOAD_BYTES, dn["big"])
        after = end_markers(gnb, "gnb1")
        assert after["gnb1"]["end_markers"] == [GNB1_TEID]
        assert after["gnb2"]["downlink_bytes"] - moved["gnb2"]["downlink_bytes"] > DOWNLOAD_BYTES // 3, after
        assert after["gnb1"]["malformed"] == after["gnb2"]["malformed"] == 0

        # The URR counted every UE packet of N6 each way that the session's QER let through (TS
        # 29.244: measured after QoS enforcement), by its IP length: uplink, what reached the wire;
        # downlink, what the wire brought less what the downlink's policer dropped (the QER's MBR
        # is 200 Mb/s, which a download on veth exceeds). The wire's frames are counted by veth
        # some with their Ethernet header and some without (by path and kernel).
        usage = [after - before for after, before in zip(maps.usage(slot), usage_before)]
        wire = [after - before for after, before in zip(n6_wire(site), wire_before)]
        dropped = [after - before for after, before in zip(maps.policed(maps.downlink(site).policer), dropped_before)]
        counts = f"URR {usage}, wire {wire}, downlink policed {dropped}"
        assert (usage[0], usage[2] + dropped[0]) == (wire[0], wire[2]), f"packets each way: {counts}"
        assert wire[1] - ETHERNET * usage[0] <= usage[1] <= wire[1], f"uplink bytes: {counts}"
        headers = wire[3] - dropped[1] - usage[3]  # the downlink frames' Ethernet headers veth counted
        assert 0 <= headers <= ETHERNET * (usage[2] + dropped[0]), f"downlink bytes: {counts}"
        assert usage[3] > DOWNLOAD_BYTES
        # Every one of them routed by XDP (bpf_fib_lookup's egress, redirected), none left to the kernel.
        outcomes = {name: count - outcomes_before[name] for name, count in maps.outcomes().items()}
        assert outcomes == {"redirected": usage[0] + usage[2], "upf_no_route": 0, "upf_no_neigh": 0,
                            "upf_encap_failed": 0, "upf_teid_miss": 0}, outcomes

        # kill -9 under a numbered stream: XDP carries it while no process runs; nothing is lost.
        recovery = ask(smf, op="heartbeat")["recovery"]
        stream = EchoStream(site, STREAM_PPS).start()
        try:
            wait_until(lambda: len(stream.back) >= STREAM_PPS // 2, "the stream flows")
            serve.kill()
            dead_from = len(stream.back)
            wait_until(lambda: len(stream.back) >= dead_from + STREAM_PPS // 2, "the stream flows, no UPF process")
            serve.start()
            ready_at = len(stream.back)
            wait_until(lambda: len(stream.back) >= ready_at + STREAM_PPS // 2, "the stream flows after the restart")
        finally:
            sent = stream.stop()
        assert sorted(stream.at_dn) == list(range(sent)), f"uplink: {losses(stream.at_dn, sent)}"
        assert sorted(stream.back) == list(range(sent)), f"downlink: {losses(stream.back, sent)}"

        # The restarted UPF has the session: same Recovery Time Stamp, its entries, and it acts on
        # a modification (back to gNB 1, End Marker to gNB 2) with traffic still flowing.
        assert ask(smf, op="heartbeat")["recovery"] == recovery
        assert maps.uplink(teid) is not None and maps.downlink(site) is not None
        ask(smf, op="move_downlink", seid=seid, gnb=site.gnb1.ip, teid=GNB1_TEID)
        assert gnb.ask(f"serve gnb1 {teid}") == "ok"
        before_small = cells(gnb)["gnb1"]["downlink_bytes"]
        small = Download(site, "small")
        small.start()
        assert small.result() == (SMALL_DOWNLOAD_BYTES, dn["small"])
        back = end_markers(gnb, "gnb2")
        assert back["gnb2"]["end_markers"] == [GNB2_TEID]
        assert back["gnb1"]["downlink_bytes"] - before_small > SMALL_DOWNLOAD_BYTES
    finally:
        maps.close()
    print(f"\nURR (ul packets, bytes, dl packets, bytes) {usage}, N6 wire {wire}; stream: {sent} datagrams each "
          f"way, none lost, {ready_at - dead_from} echoed with no UPF process")
