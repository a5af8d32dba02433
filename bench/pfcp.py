"""Control-plane cost of the UPF's N4 endpoint: PFCP Session Establishments per second and the
latency of each, from an SMF in this process to a real endpoint in another one, over loopback UDP.

    python -m bench.pfcp --out bench/results/pfcp.json

Each request is the one the tests' SMF sends (tests/upf/smf.py: 4 PDRs, 2 FARs, 1 QER, 1 URR),
encoded once with pycrate, an independent codec; every copy gets its own sequence number and CP
SEID. `--inflight` requests are kept outstanding (closed loop), or, with `--rate`, the timed
requests leave at that rate whatever comes back (open loop, bench.pfcp_load); the latency of one is
from its sendto (open loop: from the time it was due) to the arrival of its response (Cause checked:
Request accepted). The endpoint answers once the session is
in the store (committed) and given to its data-path applier: `--applier dpp` (root) writes the
session's entries into the UPF's maps of a loaded data-plane instance (netapp.upf.applier), so the
figures contain the map writes; `--applier none` keeps no maps. `--baseline REV` also times the
endpoint of git revision REV (bench.baseline: exported and built apart) in the same run, with the
same requests, in `--pairs` pairs whose order alternates (the first pair times REV first, the second
HEAD first, ...), so that what the first of a pair meets or leaves behind (the disk's WAL, the
caches, the other engineers' load) falls on each side as often; the result has each pair and each
order's figures. Methodology: bench/README.md ("bench/pfcp.py").
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import ipaddress
import json
import multiprocessing
import os
import platform
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Optional, Sequence

from multiprocessing.connection import Connection

from bench.baseline import Baseline, prepare_baseline
from bench.harness import REPO
from bench.pfcp_load import SESSION_HEADER, TIMEOUT_S, drive, drive_at_rate, summary
from netapp.dataplane.binding import LIBDPP_ENV
from netapp.upf.pfcp.ies import IEType, MsgType
from netapp.upf.sessions import Applier, NoApplier
from tests.upf.smf import UE, Smf, establishment_ies, node_id, recovery

DEFAULT_OUT = Path("bench/results/pfcp.json")
N3 = "127.0.0.2"
UE_BASE = ipaddress.IPv4Address("10.64.0.0")  # every session's UE address is its own: UE_BASE + n
GNB, GNB_TEID = "192.0.2.10", 0x100  # the downlink FAR's tunnel in establishment_ies
GNB_BASE, GNBS = ipaddress.IPv4Address("192.0.2.1"), 64  # session n's gNB: GNB_BASE + n % GNBS
# Targets (issue 17), reported and never asserted.
TARGET_RATE = 10_000.0
TARGET_P99_MS = 5.0


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.pfcp", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result document (JSON)")
    parser.add_argument("--sessions", type=int, default=15_000,
                        help="timed establishments (with the warm-up, at most the 16,383 sessions the UPF's half of "
                             "dpp_policers holds at two policers each)")
    parser.add_argument("--warmup", type=int, default=500, help="untimed establishments before")
    parser.add_argument("--inflight", type=int, default=32,
                        help="requests outstanding at once (closed loop; the warm-up's window with --rate)")
    parser.add_argument("--rate", type=float, metavar="PER_S",
                        help="open loop: the timed requests sent at this rate whatever comes back, each one's latency "
                             "from the time it was due (bench.pfcp_load)")
    parser.add_argument("--applier", choices=sorted(APPLIERS), default="none", help="the endpoint's data path")
    parser.add_argument(
        "--gc", choices=("settled", "default"), default="settled",
        help="the endpoint's garbage collector: settled after start-up as `netapp serve` does, or Python's default",
    )
    parser.add_argument(
        "--no-sdf", action="store_true",
        help="PDRs without SDF filters (always so with --applier dpp: their classifier rules need the service's "
        "rule machinery, which --applier dpp-sdf runs and dpp does not)",
    )
    parser.add_argument(
        "--synchronous", choices=("FULL", "NORMAL"), default="FULL", help="the store's sync mode (serve: FULL)"
    )
    parser.add_argument(
        "--templates", choices=("on", "off"), default="on",
        help="the fast path of establishments of a known shape (netapp.upf.pfcp.templates), as `netapp serve` has it, "
        "or every establishment the full way",
    )
    parser.add_argument(
        "--baseline", metavar="REV",
        help="also time the endpoint of git revision REV (exported and built into bench/build/baseline-<commit>), "
        "in the same run, with the same requests",
    )
    parser.add_argument(
        "--pairs", type=int, default=2,
        help="with --baseline, how many pairs of runs (REV's and HEAD's): the first times REV first, the second HEAD "
        "first, alternating, so neither side is always the first of its pair",
    )
    return parser.parse_args(argv)


# --- the endpoint, in a process of its own ---------------------------------------------------------


@contextlib.contextmanager
def no_applier() -> Iterator[Applier]:
    yield NoApplier()


@contextlib.contextmanager
def dpp_applier() -> Iterator[Applier]:
    """The UPF's applier over an anonymous data-plane instance (loaded, attached nowhere: the map
    writes are the same), network instance "internet" as the request's PDRs name it, reconciled
    with the (empty) store as `netapp serve` reconciles it at start (netapp.upf.runtime): the
    reconcile reads dpp_upf_dl4 whole, so that a change reads none of its buckets again. Without the
    service's rules (netapp.service.function_rules), it refuses PDRs with SDF filters: `run` sends
    none to it."""
    from netapp.dataplane.facade import Dataplane
    from netapp.upf.applier import BpfApplier
    from netapp.upf.compiler import Site

    with Dataplane.open() as dataplane:
        site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3)
        applier = BpfApplier(dataplane.table, site, {})
        applier.reconcile([])
        yield applier


@contextlib.contextmanager
def dpp_sdf_applier() -> Iterator[Applier]:
    """`dpp_applier` with the service's rule machinery, as `netapp serve` composes them (a
    ServiceState over the instance, the UPF's FunctionRules): the PDRs' SDF filters become
    classifier rules in the one-write transaction of the intents' rules, and every UPF transaction
    takes the service's lock (`rules_lock`) before the store's. No intent changes meanwhile: the
    lock is never waited for."""
    from datetime import datetime, timezone

    from netapp.core.config import Settings
    from netapp.dataplane.facade import Dataplane
    from netapp.service.function_rules import FunctionRules
    from netapp.service.state import ServiceState
    from netapp.upf.abi import Role
    from netapp.upf.applier import BpfApplier, iface_entries
    from netapp.upf.compiler import Port, Site

    n3_port, n6_port = 2, 3  # ifindexes of an instance attached nowhere: the rules' ingress ports
    with Dataplane.open() as dataplane:
        state = ServiceState(Settings(auth_disabled=True), dataplane, None, lambda: datetime.now(timezone.utc))
        site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3,
                    ports=(Port(n3_port, Role.N3), Port(n6_port, Role.N6, "internet")))
        ifaces = iface_entries({n3_port: (Role.N3, 0), n6_port: (Role.N6, 1)}, N3, None)
        applier = BpfApplier(dataplane.table, site, ifaces, FunctionRules(state, "upf"))
        applier.reconcile([])
        applier.rules_lock = state.lock  # type: ignore[attr-defined] - read by `serve`
        yield applier


# The data-path appliers the endpoint can be given, by --applier: a context each, in the endpoint.
APPLIERS: dict[str, Callable[[], ContextManager[Applier]]] = {
    "none": no_applier, "dpp": dpp_applier, "dpp-sdf": dpp_sdf_applier}
SDF_APPLIERS = ("none", "dpp-sdf")  # those that take PDRs with SDF filters (sent unless --no-sdf)


def serve(db_path: str, applier: str, synchronous: str, settle: bool, templates: bool, pipe: Any) -> None:
    """A UPF over a fresh store and its PFCP server on a loopback port; its address goes up the pipe,
    its counters, session count and CPU seconds once the pipe says stop."""
    from netapp.service.store import Store
    from netapp.upf.pfcp.server import PfcpServer, settle_collector
    from netapp.upf.sessions import Upf

    store = Store.open(Path(db_path), synchronous=synchronous)
    with APPLIERS[applier]() as data_path, contextlib.closing(store):
        rules_lock = getattr(data_path, "rules_lock", None)
        server = PfcpServer(Upf(store, data_path, n3_ipv4=N3, rules_lock=rules_lock), "127.0.0.1", 0)
        if not templates:
            server.protocol.templates = None  # every establishment the full way
        server.start()
        if settle:
            settle_collector()  # as `netapp serve` does
        pauses = GcPauses()
        try:
            started = time.process_time()
            pipe.send(server.address)
            pipe.recv()
            cpu = time.process_time()
            sessions = len(server.upf.sessions)
            report = {"counters": server.counters, "sessions": sessions, "cpu_s": cpu,
                      # while serving (start-up left out), all threads: per establishment, warm-up's too
                      "serving_cpu_us_per_establishment": round((cpu - started) / max(sessions, 1) * 1e6, 1)}
            pipe.send({**report, "gc": pauses.report()})
        finally:
            gc.callbacks.remove(pauses)
            server.close()


class GcPauses:
    """The cyclic garbage collector's collections while serving, by generation, and their pauses
    (gc.callbacks)."""

    def __init__(self) -> None:
        self._started = 0
        self._pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter_ns()
        else:
            self._pauses[info["generation"]].append((time.perf_counter_ns() - self._started) / 1e6)

    def report(self) -> dict[str, Any]:
        return {
            "threshold": gc.get_threshold(),
            "tracked_objects": len(gc.get_objects()),
            "collections": {str(gen): len(pauses) for gen, pauses in self._pauses.items()},
            "longest_ms": {str(gen): round(max(pauses, default=0.0), 3) for gen, pauses in self._pauses.items()},
            "total_ms": round(sum(sum(pauses) for pauses in self._pauses.values()), 1),
        }


def serve_args(directory: str, args: argparse.Namespace) -> tuple[Any, ...]:
    """`serve`'s arguments but the pipe."""
    return (str(Path(directory) / "netapp.db"), args.applier, args.synchronous, args.gc == "settled",
            args.templates == "on")


class Endpoint:
    """HEAD's endpoint (`serve`), in a process of its own."""

    def __init__(self, directory: str, args: argparse.Namespace):
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=serve, args=(*serve_args(directory, args), child))
        self._process.start()
        self.address = started(self._pipe)

    def stop(self) -> dict[str, Any]:
        self._pipe.send("stop")
        report = self._pipe.recv()
        self._process.join(30)
        return report

    def kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


def started(pipe: Connection) -> tuple[str, int]:
    """The address an endpoint sends up its pipe once it serves."""
    if not pipe.poll(60):
        raise RuntimeError("the endpoint did not start within 60 s")
    return tuple(pipe.recv())  # type: ignore[return-value]


# The baseline's endpoint: its own bench.pfcp's `serve` on its own netapp and libdpp (this
# checkout's tests/ after them: its bench.pfcp imports the SMF from there), the pipe by its fd.
BASELINE_SERVE = """\
import sys
from multiprocessing.connection import Connection
import bench.pfcp, netapp
if not netapp.__file__.startswith(sys.argv[1]):
    raise SystemExit(f"the baseline's endpoint loaded netapp from {netapp.__file__}")
db, applier, synchronous, settle, templates, fd = sys.argv[2:]
bench.pfcp.serve(db, applier, synchronous, settle == "1", templates == "1", Connection(int(fd)))
"""


class BaselineEndpoint(Endpoint):
    """The --baseline revision's endpoint, in a process of its own running that revision's code."""

    def __init__(self, directory: str, args: argparse.Namespace, baseline: Baseline):
        self._pipe, child = multiprocessing.Pipe()
        root = str(baseline.root.resolve())
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, str(REPO)]), **{LIBDPP_ENV: str(baseline.libdpp)})
        argv = [str(int(value)) if isinstance(value, bool) else value for value in serve_args(directory, args)]
        try:
            self._process = subprocess.Popen(  # type: ignore[assignment]
                [sys.executable, "-c", BASELINE_SERVE, root, *argv, str(child.fileno())],
                pass_fds=[child.fileno()], env=env, cwd=root,
            )
        finally:
            child.close()
        self.address = started(self._pipe)

    def stop(self) -> dict[str, Any]:
        self._pipe.send("stop")
        report = self._pipe.recv()
        self._process.wait(30)  # type: ignore[attr-defined]
        return report

    def kill(self) -> None:
        if self._process.poll() is None:  # type: ignore[attr-defined]
            self._process.kill()
            self._process.wait()  # type: ignore[attr-defined]


# --- the SMF -----------------------------------------------------------------------------------


def fseid_offset(request: bytes) -> int:
    """Where the CP SEID of the request's F-SEID is (after its IE header and flags octet)."""
    offset = SESSION_HEADER
    while offset < len(request):
        ie_type, length = struct.unpack_from("!HH", request, offset)
        if ie_type == IEType.F_SEID:
            return offset + 5
        offset += 4 + length
    raise ValueError("the request has no F-SEID")


def requests(count: int, first_seq: int, sdf: bool = True) -> list[bytes]:
    """`count` establishment requests, pycrate's encoding of one, each with its own sequence number,
    CP SEID, UE address (the downlink PDRs' keys in the maps) and gNB tunnel (the downlink FAR's TEID,
    and one of GNBS gNB addresses): no two sessions' FARs are the same bytes, as in a real SMF's."""
    ies = establishment_ies(1, sdf=sdf)
    template = Smf.build(Smf.__new__(Smf), "PFCPSessionEstablishmentReq", ies, seid=0, seq=1)
    at = fseid_offset(template)
    ue = ipaddress.IPv4Address(UE).packed
    ue_at = [index for index in range(len(template)) if template.startswith(ue, index)]  # the 4 PDRs' UE IP
    tunnel = GNB_TEID.to_bytes(4, "big") + ipaddress.IPv4Address(GNB).packed
    tunnel_at = template.index(tunnel)  # the downlink FAR's outer header creation: TEID, then address
    built = []
    for n in range(count):
        data = bytearray(template)
        data[12:15] = ((first_seq + n) % (1 << 24)).to_bytes(3, "big")
        data[at : at + 8] = (0x1000_0000 + first_seq + n).to_bytes(8, "big")
        for offset in ue_at:
            data[offset : offset + 4] = (UE_BASE + first_seq + n).packed
        data[tunnel_at : tunnel_at + 4] = (GNB_TEID + first_seq + n).to_bytes(4, "big")
        data[tunnel_at + 4 : tunnel_at + 8] = (GNB_BASE + (first_seq + n) % GNBS).packed
        built.append(bytes(data))
    return built


def associate(sock: socket.socket, address: tuple[str, int]) -> None:
    smf = Smf.__new__(Smf)
    sock.sendto(Smf.build(smf, "PFCPAssociationSetupReq", [node_id(), recovery(1000)], seq=1), address)
    data, _ = sock.recvfrom(65535)
    if data[1] != MsgType.ASSOCIATION_SETUP_RESPONSE:
        raise RuntimeError(f"association setup answered with message type {data[1]}")


def timed_run(args: argparse.Namespace, open_endpoint: Callable[[str], Endpoint], warm: list[bytes],
              timed: list[bytes]) -> tuple[dict[str, Any], float, dict[str, Any]]:
    """One endpoint over a fresh store: set up, warmed, timed; (its report, the rate, the latency)."""
    with tempfile.TemporaryDirectory(prefix="bench-pfcp-") as directory:
        endpoint = open_endpoint(directory)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
                sock.bind(("127.0.0.1", 0))
                sock.settimeout(TIMEOUT_S)
                associate(sock, endpoint.address)
                drive(sock, endpoint.address, warm, args.inflight)
                if args.rate:
                    elapsed, latencies, schedule = drive_at_rate(sock, endpoint.address, timed, args.rate)
                else:
                    (elapsed, latencies), schedule = drive(sock, endpoint.address, timed, args.inflight), None
            report = endpoint.stop()
        finally:
            endpoint.kill()
    made = args.warmup + args.sessions - (schedule["lost"] if schedule else 0)
    if report["sessions"] != made:
        raise RuntimeError(f"the endpoint holds {report['sessions']} sessions, not {made}")
    return report, len(latencies) / elapsed, {**summary(latencies), **({"schedule": schedule} if schedule else {})}


def baseline_run(args: argparse.Namespace, baseline: Baseline, warm: list[bytes],
                 timed: list[bytes]) -> dict[str, Any]:
    """The --baseline revision's endpoint timed as HEAD's is."""
    report, rate, latency = timed_run(args, lambda directory: BaselineEndpoint(directory, args, baseline), warm, timed)
    described = baseline.describe()
    if args.applier == "none":
        del described["libdpp"]  # not built
    return {**described, "establishments_per_s": round(rate, 1), "latency": latency, "endpoint": report}


def head_run(args: argparse.Namespace, warm: list[bytes], timed: list[bytes]) -> dict[str, Any]:
    """HEAD's endpoint timed."""
    report, rate, latency = timed_run(args, lambda directory: Endpoint(directory, args), warm, timed)
    return {"establishments_per_s": round(rate, 1), "latency": latency, "endpoint": report}


BASELINE_FIRST, HEAD_FIRST = "baseline first", "head first"


def pair_order(index: int) -> str:
    """Which side pair `index` (from 0) times first: alternating, the baseline's in the first pair."""
    return BASELINE_FIRST if index % 2 == 0 else HEAD_FIRST


def timed_pair(args: argparse.Namespace, baseline: Baseline, order: str, warm: list[bytes],
               timed: list[bytes]) -> dict[str, Any]:
    """One pair of runs, REV's and HEAD's, in `order`."""
    if order == BASELINE_FIRST:
        base = baseline_run(args, baseline, warm, timed)
        head = head_run(args, warm, timed)
    else:
        head = head_run(args, warm, timed)
        base = baseline_run(args, baseline, warm, timed)
    return {"order": order, "head": head, "baseline": base}


def brief(run_result: dict[str, Any]) -> dict[str, Any]:
    """A run's headline figures: rate, median and p99 latency, CPU per establishment."""
    return {
        "establishments_per_s": run_result["establishments_per_s"],
        "median_ms": run_result["latency"]["median_ms"],
        "p99_ms": run_result["latency"]["p99_ms"],
        "cpu_us_per_establishment": run_result["endpoint"]["serving_cpu_us_per_establishment"],
    }


def by_order(pairs: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Each order's runs, each side's headline figures: what being timed first or second does."""
    orders: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for pair in pairs:
        side = orders.setdefault(pair["order"], {"head": [], "baseline": []})
        side["head"].append(brief(pair["head"]))
        side["baseline"].append(brief(pair["baseline"]))
    return orders


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.pairs < 1:
        raise SystemExit(f"--pairs must be at least 1, not {args.pairs}")
    load_before = os.getloadavg()[0]
    sdf = not args.no_sdf and args.applier in SDF_APPLIERS
    warm = requests(args.warmup, 2, sdf)
    timed = requests(args.sessions, 2 + args.warmup, sdf)
    baseline = prepare_baseline(args.baseline, dataplane=args.applier != "none") if args.baseline else None
    if baseline is None:
        pairs = []
        head = head_run(args, warm, timed)
    else:
        pairs = [timed_pair(args, baseline, pair_order(index), warm, timed) for index in range(args.pairs)]
        head = pairs[0]["head"]
    rate, latency = head["establishments_per_s"], head["latency"]
    load_after = os.getloadavg()[0]
    return {
        "benchmark": "pfcp",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": multiprocessing.cpu_count()},
        # 1-minute load average before and after: what else ran on the shared cores
        "load_average": {"start": round(load_before, 2), "end": round(load_after, 2)},
        "settings": {
            "sessions": args.sessions,
            "warmup": args.warmup,
            "inflight": args.inflight,
            "offered_per_s": args.rate,  # None: closed loop, `inflight` outstanding
            "applier": args.applier,
            "synchronous": args.synchronous,
            "gc": args.gc,
            "templates": args.templates,
            "request_bytes": len(timed[0]),
            "sdf_filters": sdf,
            "rules_per_session": {"pdr": 4, "far": 2, "qer": 1, "urr": 1},
            "pairs": len(pairs),
        },
        "maps_in_figure": args.applier != "none",
        # HEAD's run (with --baseline, that of the first pair; every pair's in `pairs`)
        "establishments_per_s": rate,
        "latency": latency,
        "endpoint": head["endpoint"],
        "targets": [
            {"name": "establishments_per_s", "value": rate, "limit": TARGET_RATE, "met": rate_met(args, rate, latency)},
            {"name": "p99_ms", "value": latency["p99_ms"], "limit": TARGET_P99_MS,
             "met": latency["p99_ms"] <= TARGET_P99_MS and not latency.get("schedule", {}).get("lost")},
        ],
        **({"baseline": pairs[0]["baseline"], "pairs": pairs, "by_order": by_order(pairs)} if pairs else {}),
    }


KEPT_UP = 0.99  # an open loop's endpoint kept up when it answered at this share of the offered rate or more


def rate_met(args: argparse.Namespace, rate: float, latency: dict[str, Any]) -> bool:
    """Closed loop: the rate reached. Open loop: the target rate offered and kept up with (answered
    requests over the run, from the first due time to the last response, which holds one latency
    more than the sending did: a rate kept up with exactly measures a little under the offered),
    none lost."""
    if args.rate:
        return args.rate >= TARGET_RATE and rate >= KEPT_UP * args.rate and not latency["schedule"]["lost"]
    return rate >= TARGET_RATE


def format_table(result: dict[str, Any]) -> str:
    latency = result["latency"]
    offered = result["settings"]["offered_per_s"]
    loop = f"offered {offered:,.0f}/s, open loop" if offered else f"{result['settings']['inflight']} in flight"
    lines = [
        f"PFCP session establishments ({loop}, "
        f"applier {result['settings']['applier']}, store synchronous={result['settings']['synchronous']})",
        f"  rate      {result['establishments_per_s']:>10,.0f} /s   (target >= {TARGET_RATE:,.0f}"
        + (f", kept up with: >= {KEPT_UP:.0%} of the offered)" if offered else ")"),
        f"  latency   median {latency['median_ms']} ms, p90 {latency['p90_ms']} ms, p99 {latency['p99_ms']} ms "
        f"(target <= {TARGET_P99_MS}), max {latency['max_ms']} ms",
        f"  gc        {result['endpoint']['gc']['collections']} collections by generation, longest "
        f"{result['endpoint']['gc']['longest_ms']} ms, {result['endpoint']['gc']['total_ms']} ms in all",
        f"  endpoint  {result['endpoint']['serving_cpu_us_per_establishment']} us of CPU per establishment; "
        f"load average {result['load_average']['start']} -> {result['load_average']['end']}",
    ]
    if offered:
        schedule = latency["schedule"]
        lines.append(f"  sending   {schedule['sent_late']:,} requests sent over {schedule['late_beyond_ms']} ms after "
                     f"their due time; at most {schedule['most_outstanding']:,} outstanding; {schedule['lost']:,} lost "
                     "(never answered)")
    counters = result["endpoint"]["counters"]
    lines.append(f"  path      {counters.get('accepted_from_template', 0):,} of {counters.get('accepted', 0):,} accepted "
                 "establishments made from a template (netapp.upf.pfcp.templates), the others the full way")
    if counters.get("groups"):
        lines.append(f"  groups    {counters['groups']:,} transactions, {counters.get('received', 0) / counters['groups']:.1f} "
                     "requests a group on average")
    if not result["maps_in_figure"]:
        lines.append("  the data-path apply (map writes) is not in these figures: no applier")
    if "baseline" in result:
        lines.append(f"  baseline  {result['baseline']['rev']} ({result['baseline']['commit'][:12]}), "
                     "pairs of runs in alternating order:")
        lines.extend(format_pair(number, pair) for number, pair in enumerate(result["pairs"], 1))
    return "\n".join(lines)


def format_pair(number: int, pair: dict[str, Any]) -> str:
    sides = ("baseline", "head") if pair["order"] == BASELINE_FIRST else ("head", "baseline")
    return f"    pair {number} ({pair['order']}): " + "; ".join(f"{side} {format_brief(brief(pair[side]))}" for side in sides)


def format_brief(figures: dict[str, Any]) -> str:
    return (f"{figures['establishments_per_s']:,.0f} /s, median {figures['median_ms']} ms, p99 {figures['p99_ms']} ms, "
            f"{figures['cpu_us_per_establishment']} us CPU")


def report(result: dict[str, Any], table: str, out: Path) -> None:
    """The result's table printed, its document written to `out` (bench.pfcp_process's too)."""
    print(table)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    result = run(args)
    report(result, format_table(result), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
