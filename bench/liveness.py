"""Detection time of a dead alternative node: how long after a peer NetApp's GTP-U echo end point
dies its prober shows it down, at the service's default settings (netapp.core.config
LivenessSettings: 100 ms x 3).

Two node namespaces joined by a veth pair (netapp.testbed.topology.PeerSite, without traffic): A's
monitor probes B's, as two `netapp serve` would (netapp.forwarding.liveness, the same class). Each
trial starts B, waits until A shows it up, closes B's socket (what the death of B's process does)
at a random point of the probe cycle, and measures from then to the state change A shows. No data
plane is loaded: the map write on a state change is a BPF map update of microseconds, which the
integration test (tests/integration/test_scale_out.py) covers with real `netapp serve` processes.

    sudo python -m bench.liveness --trials 20
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from netapp.core.config import LivenessSettings
from netapp.core.netns import entered
from netapp.forwarding.liveness import DOWN, UP, LivenessMonitor
from netapp.testbed.topology import PeerSite

GROUP = 0
TIMEOUT_S = 10.0


def _monitor(ns: str, settings: LivenessSettings) -> LivenessMonitor:
    monitor = LivenessMonitor(settings.interval_ms / 1000, settings.detect_multiplier, lambda groups: None)
    with entered(ns):
        monitor.open(bind6=None)
    monitor.start()
    return monitor


def _wait(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("timed out: the peer never changed state")
        time.sleep(0.002)


def trial(site: PeerSite, prober: LivenessMonitor, settings: LivenessSettings, rng: random.Random) -> float:
    """Seconds from B's death to A showing it down. B dies at a random point of the probe cycle
    (a death right after an answer is the slowest to detect, one just before a probe the fastest)."""
    peer = _monitor(site.ns("b"), settings)
    try:
        _wait(lambda: prober.view(GROUP, 1)[0].state == UP)
        time.sleep(rng.uniform(0, settings.interval_ms / 1000))
    finally:
        peer.close()
        died = datetime.now(timezone.utc)
    _wait(lambda: prober.view(GROUP, 1)[0].state == DOWN)
    since = prober.view(GROUP, 1)[0].since
    assert since is not None
    return (since - died).total_seconds()


def run(trials: int, seed: int = 1) -> dict:
    settings = LivenessSettings()
    with PeerSite() as site:
        prober = _monitor(site.ns("a"), settings)
        try:
            prober.watch({GROUP: [(site.b_alt.ip, prober.port)]})
            rng = random.Random(seed)
            times = [trial(site, prober, settings, rng) for _ in range(trials)]
        finally:
            prober.close()
    ms = sorted(t * 1000 for t in times)
    return {
        "settings": settings.model_dump(),
        "trials": trials,
        "detection_ms": {
            "median": round(statistics.median(ms), 1),
            "p95": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 1),
            "max": round(ms[-1], 1),
            "min": round(ms[0], 1),
        },
        "samples_ms": [round(t, 1) for t in ms],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1, help="of the death's place in the probe cycle")
    parser.add_argument("--out", type=Path, default=None, help="also write the result here (JSON)")
    args = parser.parse_args(argv)
    logging.getLogger("netapp.forwarding.liveness").setLevel(logging.ERROR)  # a line per change otherwise
    result = run(args.trials, args.seed)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
