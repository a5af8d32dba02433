"""Delivered rate against time, per policer algorithm: the picture an operator wants when a
subscriber complains. The link of bench/qos/accuracy.py (xdp_police on the receiving end of a veth
pair, dpp-pktgen offering frames that name the policer), one algorithm after the other at the same
configured rate and burst: twice the rate offered for `--on` seconds, nothing for `--off` seconds
(the bucket refills, the windows empty), then twice the rate again and nothing again, each stretch
from the end of the one before (the generator may run late on a loaded machine); the policer's own
counters sampled every `--step` ms, the rate of each step plotted.

    python -m bench.qos.timeline --out bench/results/qos_timeline.json    # and qos_timeline.png

What to read in the plot: the token bucket lets its burst through at each start and then holds the
rate; the fixed window passes a window's allowance at the start of each window and nothing after
it; the sliding window spreads it over the window. Averaged over a second all three give the rate
(bench/qos/accuracy.py measures how closely)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from bench.harness import write_results
from bench.qos.accuracy import ALGORITHMS, FRAME, Case, Link, policed_link

DEFAULT_OUT = Path("bench/results/qos_timeline.json")


def offer(link: Link, generator, pcap: Path, pps: float, seconds: float) -> subprocess.Popen:  # noqa: ANN001
    frames = max(int(pps * seconds), 1)
    return subprocess.Popen(generator.command(pcap, frames, pps), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def sample(link: Link, until: float, step: float, start: float, points: list[tuple[float, float]],
           busy: Callable[[], bool] = lambda: False) -> None:
    """(time since start, delivered bit/s over the step before) every `step` s until `until`, and on
    while `busy()`."""
    last_time, (last_bytes, _, _) = time.monotonic(), link.counters()
    while last_time < until or busy():
        time.sleep(step)  # the sampling period of a measurement, not a wait for anything
        now, (passed, _, _) = time.monotonic(), link.counters()
        points.append((now - start, (passed - last_bytes) * 8 / (now - last_time)))
        last_time, last_bytes = now, passed


def timeline(link: Link, generator, pcap: Path, case: Case, on: float, off: float, step: float) -> dict:  # noqa: ANN001
    """One algorithm: on, off, on, off; the delivered rate step by step."""
    link.configure(case)
    pps = 2 * case.rate / (8 * FRAME)
    points: list[tuple[float, float]] = []
    start = time.monotonic()
    for _ in range(2):
        # Each stretch from the moment the one before ended, not from a schedule: on a loaded machine
        # the generator may start or end late, and its frames must all fall in the stretch offered,
        # the silence after it stay silent.
        proc = offer(link, generator, pcap, pps, on)
        try:
            sample(link, time.monotonic() + on, step, start, points, busy=lambda: proc.poll() is None)
            _, err = proc.communicate(timeout=on + 60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if proc.returncode != 0:
            raise RuntimeError(f"dpp-pktgen: {err.strip()}")
        sample(link, time.monotonic() + off, step, start, points)
    return {
        "algorithm": case.algo.name.lower(),
        "rate_bps": case.rate,
        "burst_bytes": case.burst,
        "offered_bps": 2 * case.rate,
        "step_s": step,
        "points": [[round(t, 4), round(rate)] for t, rate in points],
    }


def plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(len(rows), 1, figsize=(8, 2.2 * len(rows)), sharex=True, squeeze=False)
    for ax, row in zip(axes[:, 0], rows):
        times = [t for t, _ in row["points"]]
        rates = [rate / 1e6 for _, rate in row["points"]]  # each over the step that ends at its time
        ax.plot(times, rates, drawstyle="steps-pre", label="delivered")
        ax.axhline(row["rate_bps"] / 1e6, color="black", linestyle="--", linewidth=0.8, label="configured")
        ax.set_ylabel("Mb/s")
        ax.set_title(f"{row['algorithm'].replace('_', ' ')}: {row['rate_bps'] / 1e6:g} Mb/s, burst "
                     f"{row['burst_bytes']} B, offered {row['offered_bps'] / 1e6:g} Mb/s when on", fontsize=9)
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel(f"time (s), {rows[0]['step_s'] * 1000:g} ms steps")
    axes[0, 0].legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return True


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.qos.timeline", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON; the plot beside it (.png)")
    parser.add_argument("--rate", type=float, default=1e8, help="configured rate, bit/s")
    parser.add_argument("--burst-ms", type=float, default=20.0, help="burst: this many ms at the rate")
    parser.add_argument("--on", type=float, default=2.0, help="seconds of each offered stretch")
    parser.add_argument("--off", type=float, default=1.0, help="seconds of silence between them")
    parser.add_argument("--step", type=float, default=0.02, help="sampling step, s")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    rows = []
    with policed_link() as (link, generator, pcap):
        for algo in ALGORITHMS:
            row = timeline(link, generator, pcap, Case(algo, int(args.rate), args.burst_ms), args.on, args.off, args.step)
            rows.append(row)
            rates = [rate for t, rate in row["points"] if 0.5 <= t <= args.on]
            print(f"{row['algorithm']:<15} {len(row['points'])} steps, steady delivered "
                  f"{sum(rates) / max(len(rates), 1) / 1e6:.1f} Mb/s of {args.rate / 1e6:g}", flush=True)
    write_results(args.out, "qos_timeline", 1, 0, rows)
    if plot(rows, args.out.with_suffix(".png")):
        print(f"plot: {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
