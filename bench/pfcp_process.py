"""The PFCP endpoint's CPU per establishment in process: its protocol (netapp.upf.pfcp.server
.PfcpProtocol) fed groups of `--group` (32) Session Establishment Requests as datagrams, each group handled as
the endpoint handles what it reads together (one transaction, one COMMIT), no sockets and no event
loop; the responses kept, not sent. What is timed is the thread's CPU over the timed groups: the
handler's work alone (matching or decoding, the transaction, the applier's map writes, the store
and its COMMIT's sync, the responses made), without the SMF's, the loopback's or the loop's. The
COMMITs are timed apart, their thread CPU and their wall time: a COMMIT waits for its sync
(fdatasync) without using the CPU, which a sampling profiler may count as work.

    python -m bench.pfcp_process --applier dpp --baseline main --rounds 3

Each run is a process of its own over a fresh store (and, `--applier dpp`, a fresh data-plane
instance, root). `--baseline REV` runs REV's netapp (bench.baseline: exported and built apart) in
the same rounds, the order alternating (REV first in the first round); its figures then are the
baseline's, not a previous run's. Methodology and results: bench/README.md ("bench/pfcp.py").
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

DEFAULT_OUT = Path("bench/results/pfcp_process.json")
GROUP = 32  # requests handled together: what the endpoint reads at 32 in flight (an open loop's: 1-4)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.pfcp_process", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result document (JSON)")
    parser.add_argument("--sessions", type=int, default=6000, help="timed establishments (a run's store holds them)")
    parser.add_argument("--warmup", type=int, default=500, help="untimed establishments before")
    parser.add_argument("--applier", choices=("dpp", "none"), default="dpp", help="the endpoint's data path")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side, alternating with --baseline")
    parser.add_argument("--baseline", metavar="REV", help="also run git revision REV's endpoint, alternating")
    parser.add_argument("--group", type=int, default=GROUP, help="requests handled together (one transaction)")
    return parser.parse_args(argv)


# --- one run, in a process of its own (the code of the side's tree: its netapp, its bench.pfcp) ----


def run_side(sessions: int, warmup: int, applier: str, around: Any = None, group: int = GROUP) -> dict[str, Any]:
    """One endpoint over a fresh store, fed the warm-up then the timed establishments in groups of
    `group` (`around`: a context manager entered for the timed ones alone, bench.pfcp_pieces' timers)."""
    import contextlib
    import gc
    import tempfile
    import time

    from bench.pfcp import APPLIERS, N3, requests
    from netapp.service.store import Store
    from netapp.upf.pfcp.server import PfcpServer, settle_collector
    from netapp.upf.sessions import Upf
    from tests.upf.smf import Smf, node_id, recovery

    peer = ("127.0.0.1", 8805)
    with tempfile.TemporaryDirectory(prefix="bench-pfcp-process-") as directory, APPLIERS[applier]() as data_path:
        store = Store.open(Path(directory) / "netapp.db", synchronous="FULL")
        try:
            server = PfcpServer(Upf(store, data_path, n3_ipv4=N3), "127.0.0.1", 0)
            protocol, sent = server.protocol, Responses()
            protocol.transport, protocol._loop = sent, NoLoop()  # type: ignore[assignment]
            protocol.open_requests()

            def feed(datagrams: list[bytes]) -> None:
                for start in range(0, len(datagrams), group):
                    for data in datagrams[start : start + group]:
                        protocol.datagram_received(data, peer)
                    protocol._drain(whole=True)  # the group, as the loop's drain handles it

            feed([Smf.build(Smf.__new__(Smf), "PFCPAssociationSetupReq", [node_id(), recovery(1000)], seq=1)])
            feed(requests(warmup, 2, sdf=False))
            timed = requests(sessions, 2 + warmup, sdf=False)
            settle_collector()  # as `netapp serve` does once up
            collections = sum(stat["collections"] for stat in gc.get_stats())
            commits = CommitTimer()
            started, started_process = time.thread_time(), time.process_time()
            with commits, around or contextlib.nullcontext():
                feed(timed)
            cpu, process_cpu = time.thread_time() - started, time.process_time() - started_process
            accepted = protocol.counters["accepted"]
            if accepted != 1 + warmup + sessions or len(server.upf.sessions) != warmup + sessions:
                raise RuntimeError(f"{accepted} requests accepted, {len(server.upf.sessions)} sessions held")
            return {
                "cpu_us_per_establishment": round(cpu / sessions * 1e6, 1),
                # the process's threads: the handler's and the store's checkpoints (netapp.service.checkpoint)
                "process_cpu_us_per_establishment": round(process_cpu / sessions * 1e6, 1),
                "commit_cpu_us_per_establishment": round(commits.cpu / sessions * 1e6, 1),
                "commit_wall_us_per_establishment": round(commits.wall / sessions * 1e6, 1),
                "commits": commits.count,
                "from_template": protocol.counters["accepted_from_template"],
                "gc_collections": sum(stat["collections"] for stat in gc.get_stats()) - collections,
            }
        finally:
            store.close()


class CommitTimer:
    """While entered, every COMMIT of the store (netapp.service.store.Transaction.commit, in each
    side's tree) timed: the thread's CPU and the wall time it took, summed."""

    def __init__(self) -> None:
        self.count, self.cpu, self.wall = 0, 0.0, 0.0

    def __enter__(self) -> "CommitTimer":
        import time

        from netapp.service.store import Transaction

        self._commit = commit = Transaction.commit

        def timed(transaction: Any) -> None:
            cpu, wall = time.thread_time(), time.perf_counter()
            try:
                commit(transaction)
            finally:
                self.count += 1
                self.cpu += time.thread_time() - cpu
                self.wall += time.perf_counter() - wall

        Transaction.commit = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: Any) -> None:
        from netapp.service.store import Transaction

        Transaction.commit = self._commit  # type: ignore[method-assign]


class NoLoop:
    """The protocol's loop, which `_submit` asks to drain soon: the feeder drains each group itself."""

    def call_soon(self, *_: Any) -> None:
        pass


class Responses:
    """The protocol's transport: the responses kept (and counted), not sent."""

    def __init__(self) -> None:
        self.count = 0

    def sendto(self, data: bytes, peer: Any) -> None:
        self.count += 1

    def get_extra_info(self, name: str) -> Any:
        return None  # no socket: the drain reads nothing more


# --- the rounds ------------------------------------------------------------------------------------


def side_process(args: argparse.Namespace, root: Optional[Path], libdpp: Optional[Path],
                 script: str = __file__) -> dict[str, Any]:
    """`run_side` of `script` (this file's, or bench.pfcp_pieces') in a process of its own: this
    checkout's (`root` None), or a baseline's tree first on its path (this checkout's after it: the
    SMF of tests/) and its libdpp."""
    here = Path(__file__).resolve().parent.parent
    env = dict(os.environ)
    path = [str(root), str(here)] if root is not None else [str(here)]
    env["PYTHONPATH"] = os.pathsep.join(path)
    if libdpp is not None:
        from netapp.dataplane.binding import LIBDPP_ENV

        env[LIBDPP_ENV] = str(libdpp)
    code = ("import json, sys; sys.path[:0] = sys.argv[1].split(',') ; "
            "import importlib.util as u; spec = u.spec_from_file_location('side', sys.argv[2]); "
            "side = u.module_from_spec(spec); spec.loader.exec_module(side); "
            "print(json.dumps(side.run_side(int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], group=int(sys.argv[6]))))")
    result = subprocess.run(
        [sys.executable, "-c", code, ",".join(path), script, str(args.sessions), str(args.warmup), args.applier,
         str(getattr(args, "group", GROUP))],
        env=env, cwd=str(root or here), capture_output=True, text=True, timeout=600,
    )
    if result.returncode:
        raise RuntimeError(f"a run failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    baseline = None
    if args.baseline:
        from bench.baseline import prepare_baseline

        baseline = prepare_baseline(args.baseline, dataplane=args.applier != "none")
    rounds = []
    for index in range(args.rounds):
        runs: dict[str, Any] = {}
        order = ["baseline", "head"] if baseline is not None and index % 2 == 0 else ["head", "baseline"]
        for side in order:
            if side == "baseline" and baseline is None:
                continue
            runs[side] = side_process(args, baseline.root if side == "baseline" else None,  # type: ignore[union-attr]
                                      baseline.libdpp if side == "baseline" and args.applier == "dpp" else None)
        rounds.append({"order": [side for side in order if side in runs], **runs})
    sides = ["head", *(["baseline"] if baseline is not None else [])]
    cpu = {side: [each[side]["cpu_us_per_establishment"] for each in rounds] for side in sides}
    commit = {side: {measure: round(statistics.median(each[side][f"commit_{measure}_us_per_establishment"]
                                                      for each in rounds), 1) for measure in ("cpu", "wall")}
              for side in sides}
    result: dict[str, Any] = {
        "benchmark": "pfcp_process",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_average": {"start": round(load_before, 2), "end": round(os.getloadavg()[0], 2)},
        "settings": {"sessions": args.sessions, "warmup": args.warmup, "applier": args.applier, "group": args.group,
                     "rounds": args.rounds},
        "rounds": rounds,
        "cpu_us_per_establishment": {side: {"median": round(statistics.median(values), 1), "min": min(values),
                                            "max": max(values)} for side, values in cpu.items()},
        "commit_us_per_establishment": commit,
    }
    if baseline is not None:
        result["baseline"] = baseline.describe()
        result["ratio_head_to_baseline"] = [round(each["head"]["cpu_us_per_establishment"]
                                                  / each["baseline"]["cpu_us_per_establishment"], 3) for each in rounds]
    return result


def format_table(result: dict[str, Any]) -> str:
    lines = [f"PFCP establishments in process ({result['settings']['sessions']} timed after "
             f"{result['settings']['warmup']}, groups of {result['settings']['group']}, applier {result['settings']['applier']}); "
             f"load average {result['load_average']['start']} -> {result['load_average']['end']}"]
    for number, each in enumerate(result["rounds"], 1):
        lines.append(f"  round {number}: " + "; ".join(
            f"{side} {each[side]['cpu_us_per_establishment']} us "
            f"(COMMIT {each[side]['commit_cpu_us_per_establishment']} us CPU, "
            f"{each[side]['commit_wall_us_per_establishment']} us wall)" for side in each["order"]))
    for side, figures in result["cpu_us_per_establishment"].items():
        commit = result["commit_us_per_establishment"][side]
        lines.append(f"  {side}: median {figures['median']} us of CPU an establishment "
                     f"({figures['min']}-{figures['max']}); its COMMIT's median {commit['cpu']} us of CPU, "
                     f"{commit['wall']} us of wall time")
    if "ratio_head_to_baseline" in result:
        lines.append(f"  this checkout / {result['baseline']['rev']} by round: {result['ratio_head_to_baseline']}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    from bench.pfcp import report  # not at the top: a baseline's run loads this file on its own tree

    args = parse_args(argv)
    result = run(args)
    report(result, format_table(result), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
