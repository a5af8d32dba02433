"""The latency of a protected stream end to end: talker -> replicating node -> two paths ->
eliminating node -> listener on the FRER veth testbed (netapp/testbed/frer_site.py, programs and
configuration as tests/frer/test_two_paths.py has them), each frame from the talker's send (its
payload carries CLOCK_REALTIME) to the kernel's receive time at the listener (SO_TIMESTAMPNS). Twice:
on an idle machine, and with every CPU busy with a spinning process (background load on the nodes'
CPUs, the shape of the per-packet service protection paper's latency figures). The distribution is
plotted as CDFs.

    python -m bench.frer.latency [--frames 30000] [--pps 10000]

Writes bench/results/frer_latency.json and, with matplotlib, frer_latency.png. Both sides are user
space: the figures include a socket send and the stack's delivery to a packet socket, which a
frame through a NIC would not pay; the load's effect, not the absolute, is what they show."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Optional, Sequence

from bench.dataplane import machine_info
from bench.frer.testbed import StreamSpec, protected_site
from netapp.dataplane import binding
from netapp.frer.abi import Algo
from netapp.frer.model import RecoveryConfig

DEFAULT_OUT = Path("bench/results/frer_latency.json")
STREAMS = [StreamSpec(handle=1, dport=5001), StreamSpec(handle=2, dport=5002)]
RECOVERY = RecoveryConfig(algo=Algo.VECTOR, history_len=32, reset_ns=2_000_000_000)
PERCENTILES = (50, 90, 99, 99.9)


@contextlib.contextmanager
def background_load(on: bool) -> Iterator[None]:
    """A spinning process per CPU, when on."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)
    ] if on else []  # fmt: skip
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def percentile(values: list[int], p: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))])


def measure(obj: Path, frames: int, pps: float, loaded: bool) -> dict:
    with protected_site(obj, STREAMS, RECOVERY, cpu=0) as (site, a, b, talker, capture), background_load(loaded):
        talker.send(frames, pps)
        arrived = capture.wait_for(frames, timeout=60)
        latencies = list(capture.latencies)
    us = [value / 1000 for value in latencies]
    return {
        "load": "every CPU busy" if loaded else "idle",
        "frames": frames,
        "arrived": len(latencies),
        "all_arrived": arrived,
        **{f"p{p:g}_us": percentile(us, p) for p in PERCENTILES},  # type: ignore[arg-type]
        "max_us": max(us),
        "latencies_us": us,
    }


def plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(figsize=(7, 4))
    for row in rows:
        values = sorted(row["latencies_us"])
        axes.plot(values, [(k + 1) / len(values) for k in range(len(values))], label=row["load"])
    axes.set_xscale("log")
    axes.set_xlabel("latency, talker send to listener receive (µs)")
    axes.set_ylabel("fraction of frames")
    axes.set_title("FRER: replicate, two paths, eliminate (veth testbed)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return True


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.frer.latency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON; the plot goes next to it")
    parser.add_argument("--frames", type=int, default=30_000)
    parser.add_argument("--pps", type=float, default=10_000)
    args = parser.parse_args(argv)
    obj = Path(binding.find_libdpp()).parent / "dpp_frer.bpf.o"
    rows = [measure(obj, args.frames, args.pps, loaded) for loaded in (False, True)]
    for row in rows:
        print(f"{row['load']:<15} {row['arrived']}/{row['frames']} arrived  " + "  ".join(
            f"p{p:g} {row[f'p{p:g}_us']:.0f}" for p in PERCENTILES) + f"  max {row['max_us']:.0f} µs", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plotted = plot(rows, args.out.with_suffix(".png"))
    summary = [{key: value for key, value in row.items() if key != "latencies_us"} for row in rows]
    args.out.write_text(json.dumps({
        "benchmark": "frer_latency",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "pps": args.pps,
        "plot": args.out.with_suffix(".png").name if plotted else None,
        "results": summary,
    }, indent=2) + "\n")  # fmt: skip
    return 0 if all(row["all_arrived"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
