"""python -m bench.atsss.create: what creating an ATSSS session costs the control plane among N
stored sessions, from the service's call to its return (netapp.atsss.service.Atsss.create_session:
the store's transaction, the checks, the path slots given, ATSSS's maps written), over an anonymous
data-plane instance (loaded, attached nowhere) and a SQLite file store.

Per count of `--sessions`: that many sessions of two paths stored at once (bench.atsss.telemetry's,
over ten tenants) and reconciled into the maps, then `--creates` timed creates of new sessions of
two paths, each after a coin toss that deletes (untimed) one stored session first: about half of
the creates take the slots a delete freed, among the held ones, the rest slots never given, above
them. Every create's slots are checked in dpp_atsss_paths.

Each (side, count) runs in a process of its own, a fresh store and instance; with `--baseline REV`
the same creates (same seed, same sessions, same deletes) are timed with REV's code too
(bench.baseline: exported and built apart), the two sides of a count one after the other, in an
order that alternates from count to count. Prints and writes p50, p99 and the mean per (side,
count), and each count's p50 ratio of this checkout to REV.

    python -m bench.atsss.create --sessions 1000 5000 10000 --baseline main

Needs root and `make -C dataplane`. Methodology and results: bench/README.md ("bench/atsss").
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

DEFAULT_OUT = Path("bench/results/atsss_create.json")
REPO = Path(__file__).resolve().parents[2]
TENANTS = 10  # bench.atsss.telemetry.store_sessions spreads the sessions over ten tenants


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.atsss.create", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1000, 5000, 10000],
                        help="sessions stored before timing (one block of creates per count)")
    parser.add_argument("--creates", type=int, default=200, help="timed creates per count")
    parser.add_argument("--baseline", metavar="REV", help="also time git revision REV's service, in the same run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--worker", type=int, metavar="COUNT", help=argparse.SUPPRESS)  # one side's process
    return parser.parse_args(argv)


# --- one side, in its own process (this checkout's code or the baseline's, whichever is on the path) ---


def timed_creates(count: int, creates: int, seed: int) -> list[float]:
    """Milliseconds of each create among `count` stored sessions (the module's docstring)."""
    from bench.atsss.telemetry import path, store_sessions
    from netapp.atsss.models import AtsssSessionSpec
    from netapp.atsss.service import Atsss
    from netapp.atsss.table import address_words
    from netapp.dataplane.facade import Dataplane
    from netapp.service.contract import Principal, Scope
    from netapp.service.store import Store

    admin = Principal("operator", frozenset({Scope.ADMIN}))
    rng = random.Random(seed)
    stored_names = [f"t{i % TENANTS}/ue{i}" for i in range(count)]
    took = []
    with tempfile.TemporaryDirectory() as state, Dataplane.open() as dataplane:
        store = Store.open(Path(state) / "netapp.db", synchronous="NORMAL")
        try:
            store_sessions(store, count)
            atsss = Atsss.start(store, dataplane.table, program_fd=dataplane.program_fd)
            paths = dataplane.table("dpp_atsss_paths")
            for i in range(count, count + creates):
                if stored_names and rng.random() < 0.5:
                    atsss.delete_session(admin, stored_names.pop(rng.randrange(len(stored_names))))
                spec = AtsssSessionSpec.model_validate({
                    "name": f"new{i}", "ue": f"10.{60 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}", "mode": "weighted",
                    "paths": [path(1, i), path(2, i)]})
                started = time.perf_counter()
                session = atsss.create_session(admin, spec.name, spec)
                took.append((time.perf_counter() - started) * 1000)
                missing = [slot for slot, path_ in zip(session.slots, spec.paths)
                           if not holds(paths.get(slot_key(slot)), address_words(path_.peer))]
                if missing:
                    raise RuntimeError(f"session {spec.name}'s slots {missing} do not hold its paths in dpp_atsss_paths")
        finally:
            store.close()
    return took


def holds(value: Any, peer: tuple[int, ...]) -> bool:
    """Whether a slot's entry (an array's: never missing, zero when empty) is the path to `peer`."""
    return value is not None and tuple(value.peer) == tuple(peer)


def slot_key(slot: int) -> Any:
    from ctypes import c_uint32

    return c_uint32(slot)


# --- the run ----------------------------------------------------------------------------------------


def run_side(root: Path, count: int, args: argparse.Namespace, libdpp: Optional[Path] = None) -> list[float]:
    """The creates' milliseconds as the code under `root` does them, in a process of its own."""
    from netapp.dataplane.binding import LIBDPP_ENV

    env = dict(os.environ, PYTHONPATH=str(root))
    if libdpp is not None:
        env[LIBDPP_ENV] = str(libdpp)
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", str(count), "--creates", str(args.creates),
            "--seed", str(args.seed)]
    done = subprocess.run(argv, env=env, cwd=root, stdout=subprocess.PIPE, check=True, text=True)
    return json.loads(done.stdout)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        print(json.dumps(timed_creates(args.worker, args.creates, args.seed)))
        return 0
    from bench.baseline import prepare_baseline
    from bench.dataplane import machine_info
    from bench.frer.create import summary

    baseline = prepare_baseline(args.baseline)
    sides = [("HEAD", REPO, None)] + ([(baseline.rev, baseline.root, baseline.libdpp)] if baseline else [])
    rows: list[dict[str, Any]] = []
    for number, count in enumerate(args.sessions):
        p50 = {}
        for side, root, libdpp in sides if number % 2 == 0 else sides[::-1]:
            row = {"sessions": count, "side": side, **summary(run_side(root, count, args, libdpp))}
            rows.append(row)
            p50[side] = row["p50_ms"]
            print(f"{count:6} sessions  {side:<8}  p50 {row['p50_ms']:7.3f} ms  p99 {row['p99_ms']:7.3f} ms  "
                  f"mean {row['mean_ms']:7.3f} ms", flush=True)
        if baseline is not None:
            ratio = round(p50["HEAD"] / p50[baseline.rev], 3)
            rows.append({"sessions": count, "p50_ratio_to_baseline": ratio})
            print(f"{count:6} sessions  p50 HEAD / {baseline.rev}: {ratio}", flush=True)
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    result = {"benchmark": "atsss_create", "date": when, "machine": machine_info(), "seed": args.seed,
              "creates": args.creates, "baseline": baseline.commit if baseline else None, "results": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
