"""The latency of a protected stream end to end: talker -> replicating node -> two paths ->
eliminating node -> listener on the FRER veth testbed (netapp/testbed/frer_site.py, programs and
configuration as tests/frer/test_two_paths.py has them), each frame from the talker's send (its
payload carries CLOCK_REALTIME) to the kernel's receive time at the listener (SO_TIMESTAMPNS). Twice:
on an idle machine, and with every CPU busy with a spinning process (background load on the nodes'
CPUs, the shape of the per-packet service protection paper's latency figures), at each rate asked
for: 10,000 frames/s; "max", the Python talker without pacing (as fast as its socket takes
frames); and "live", the highest rate the machine carries: the talker and the listener are XDP
programs (bench/frer/fast.py: BPF_PROG_TEST_RUN in live-frame mode transmits the frames unpaced into
the talker's port; the listener's port checks every stream's numbers, exactly once and in order, and
drops), so no socket bounds the rate; its frames are --live-frames many. The rate each case reached is
in the results. The distribution is plotted as CDFs, a panel per rate.

    python -m bench.frer.latency [--frames 30000] [--live-frames 1000000] [--rates 10000 max live]

Writes bench/results/frer_latency.json (percentiles, frames arrived, rate reached), frer_latency.csv
(each case's CDF: the latency at every 0.5 % of its frames, and at 99.9 and 99.99 %) and, with
matplotlib (the bench extra), frer_latency.png. Both sides are user space: the figures include a
socket send and the stack's delivery to a packet socket, which a frame through a NIC would not pay;
the load's effect, not the absolute, is what they show. The "live" case's latency runs from the talker
program's clock read to the listener program's (1 µs buckets), the kernel's path alone; it is
counted only when every frame arrived once and in order."""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Optional, Sequence

from bench.dataplane import machine_info
from bench.frer.fast import FastTraffic, wait_until
from bench.frer.testbed import StreamSpec, protected_nodes, protected_site
from netapp.dataplane import binding
from netapp.frer.abi import Algo
from netapp.frer.model import RecoveryConfig

DEFAULT_OUT = Path("bench/results/frer_latency.json")
STREAMS = [StreamSpec(handle=1, dport=5001), StreamSpec(handle=2, dport=5002)]
RECOVERY = RecoveryConfig(algo=Algo.VECTOR, history_len=32, reset_ns=2_000_000_000)
PERCENTILES = (50, 90, 99, 99.9)
CDF_POINTS = tuple(k / 2 for k in range(201)) + (99.9, 99.99)  # the CSV's percentiles
MAX = "max"  # the rate of the Python talker without pacing
LIVE = "live"  # the rate of the XDP talker in live-frame mode, without pacing
TALKERS = {LIVE: "XDP live-frame talker"}  # how a rate's frames are made; otherwise the Python socket talker


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


def rate(text: str) -> str:
    if text not in (MAX, LIVE) and not (text.isdigit() and int(text) > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: a rate is frames/s (a positive integer), {MAX!r} or {LIVE!r}")
    return text


def measure(obj: Path, frames: int, rate_asked: str, loaded: bool) -> dict:
    if rate_asked == LIVE:
        return measure_live(obj, frames, loaded)
    pps = float("inf") if rate_asked == MAX else float(rate_asked)
    with protected_site(obj, STREAMS, RECOVERY, cpu=0) as (site, a, b, talker, capture), background_load(loaded):
        start = time.monotonic()
        talker.send(frames, pps, catch_up_s=None)  # the rate asked for kept, as measured before
        sent_pps = frames / (time.monotonic() - start)
        arrived = capture.wait_for(frames, timeout=60)
        latencies = list(capture.latencies)
    return row_of(rate_asked, sent_pps, loaded, frames, len(latencies), arrived, [value / 1000 for value in latencies])


def measure_live(obj: Path, frames: int, loaded: bool) -> dict:
    """The XDP talker's unpaced run through the testbed, every frame checked by the XDP listener."""
    with protected_nodes(obj, STREAMS, RECOVERY) as (site, _, _b), background_load(loaded):
        traffic = FastTraffic(obj.parent / "xdp_frer_traffic.bpf.o", site, STREAMS)
        try:
            took = traffic.send(frames)
            wait_until(lambda: sum(check.received for check in traffic.checks().values()) >= frames, 30)
            sent, checks, histogram = traffic.sent(), traffic.checks(), traffic.latency_us()
        finally:
            traffic.close()
    exact = all((check.received, check.in_order, check.next) == (sent[handle],) * 3 for handle, check in checks.items())
    us = [float(bucket) for bucket, count in enumerate(histogram) for _ in range(count)]
    return row_of(LIVE, frames / took, loaded, frames, sum(check.received for check in checks.values()), exact, us)


def row_of(rate_asked: str, sent_pps: float, loaded: bool, frames: int, arrived: int, all_arrived: bool,
           us: list[float]) -> dict:
    return {
        "rate": rate_asked,
        "talker": TALKERS.get(rate_asked, "Python packet socket"),
        "sent_pps": round(sent_pps),
        "load": "every CPU busy" if loaded else "idle",
        "frames": frames,
        "arrived": arrived,
        "all_arrived": all_arrived,
        **{f"p{p:g}_us": percentile(us, p) for p in PERCENTILES},  # type: ignore[arg-type]
        "max_us": max(us),
        "latencies_us": us,
    }


def rate_label(row: dict) -> str:
    asked = "highest rate" if row["rate"] in (MAX, LIVE) else f"{int(row['rate']):,} frames/s"
    return f"{asked}, {row['talker']} (sent {row['sent_pps']:,}/s)"


def write_csv(rows: list[dict], path: Path) -> None:
    """Each case's CDF: rate asked, rate reached, load, percentile, latency (µs)."""
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["rate", "sent_pps", "load", "percentile", "latency_us"])
        for row in rows:
            for p in CDF_POINTS:
                writer.writerow([row["rate"], row["sent_pps"], row["load"], p, f"{percentile(row['latencies_us'], p):.1f}"])


def plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rates = list(dict.fromkeys(row["rate"] for row in rows))
    figure, panels = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4), sharey=True, squeeze=False)
    for axes, rate_asked in zip(panels[0], rates):
        for row in (row for row in rows if row["rate"] == rate_asked):
            values = sorted(row["latencies_us"])
            axes.plot(values, [(k + 1) / len(values) for k in range(len(values))], label=row["load"])
        axes.set_xscale("log")
        axes.set_xlabel("latency, talker send to listener receive (µs)")
        axes.set_title(rate_label(next(row for row in rows if row["rate"] == rate_asked)))
        axes.grid(True, which="both", alpha=0.3)
        axes.legend()
    panels[0][0].set_ylabel("fraction of frames")
    figure.suptitle("FRER: replicate, two paths, eliminate (veth testbed)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return True


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.frer.latency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON; the plot goes next to it")
    parser.add_argument("--frames", type=int, default=30_000)
    parser.add_argument("--live-frames", type=int, default=1_000_000, help="frames of the XDP talker's run")
    parser.add_argument("--rates", type=rate, nargs="+", default=["10000", MAX, LIVE],
                        help=f"frames/s of the streams together, {MAX!r}: the Python talker without pacing, "
                        f"{LIVE!r}: the XDP live-frame talker without pacing")
    args = parser.parse_args(argv)
    obj = Path(binding.find_libdpp()).parent / "dpp_frer.bpf.o"
    rows = [measure(obj, args.live_frames if rate_asked == LIVE else args.frames, rate_asked, loaded)
            for rate_asked in args.rates for loaded in (False, True)]  # fmt: skip
    for row in rows:
        print(f"{rate_label(row):<64} {row['load']:<15} {row['arrived']}/{row['frames']} arrived  " + "  ".join(
            f"p{p:g} {row[f'p{p:g}_us']:.0f}" for p in PERCENTILES) + f"  max {row['max_us']:.0f} µs", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_csv(rows, args.out.with_suffix(".csv"))
    plotted = plot(rows, args.out.with_suffix(".png"))
    summary = [{key: value for key, value in row.items() if key != "latencies_us"} for row in rows]
    args.out.write_text(json.dumps({
        "benchmark": "frer_latency",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "rates": args.rates,
        "csv": args.out.with_suffix(".csv").name,
        "plot": args.out.with_suffix(".png").name if plotted else None,
        "results": summary,
    }, indent=2) + "\n")  # fmt: skip
    return 0 if all(row["all_arrived"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
