"""What ATSSS's telemetry costs each poll at N sessions of two paths: the sessions stored in one
transaction and reconciled into an anonymous data-plane instance's ATSSS maps (loaded, attached
nowhere: the reads are the same), then, seven times, the paths read (Atsss.readings: one batched
lookup per map), one poll of the point source (netapp.atsss.telemetry: readings, rates and
points), its line protocol (what the InfluxDB sink formats) and its /metrics text with the paths
(telemetry.atsss_path_metrics) and as a scrape makes it by default (no path read); medians.

    python -m bench.atsss.telemetry --sessions 10000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from netapp.atsss import store as stored
from netapp.atsss.models import AtsssSession
from netapp.atsss.service import Atsss
from netapp.atsss.telemetry import AtsssPoints
from netapp.dataplane.facade import Dataplane
from netapp.service.store import Store
from netapp.telemetry.prometheus import exposition

ROUNDS = 7


def path(n: int, i: int) -> dict[str, Any]:
    return {"access": "3GPP" if n == 1 else "non-3GPP", "local": f"192.0.2.{n}",
            "peer": f"100.{64 + n}.{(i >> 8) & 255}.{i & 255}", "local_port": 5000 + n, "peer_port": 6000 + n,
            "source_mac": "02:00:00:00:aa:01", "next_hop_mac": "02:00:00:00:bb:01", "rtt_us": 10_000 * n}


def store_sessions(store: Store, count: int) -> None:
    """`count` weighted sessions of two paths, over ten tenants, written straight to the store."""
    now = datetime.now(timezone.utc)
    with store.transaction():
        slots = stored.free_slots(store, 2 * count)
        assert slots is not None, "more paths than the node's slots"
        for i in range(count):
            stored.save_session(store, AtsssSession.model_validate({
                "name": f"ue{i}", "tenant": f"t{i % 10}", "ue": f"10.{60 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}",
                "mode": "weighted", "effective_mode": "weighted", "paths": [path(1, i), path(2, i)],
                "slots": slots[2 * i: 2 * i + 2], "revision": 1, "updated_at": now}))


def median_ms(work: Callable[[], Any]) -> tuple[float, Any]:
    """The median of ROUNDS runs of `work` in milliseconds, and its last result."""
    times, result = [], None
    for _ in range(ROUNDS):
        started = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, result


def run(count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, Dataplane.open() as dataplane:
        store = Store.open(Path(tmp) / "netapp.db", synchronous="NORMAL")
        try:
            store_sessions(store, count)
            atsss = Atsss.start(store, dataplane.table)
            source = AtsssPoints(atsss.readings, "edge-1")
            polls = iter(range(1, 10 * ROUNDS))
            readings_ms, _ = median_ms(atsss.readings)
            poll_ms, points = median_ms(lambda: source.poll(next(polls) * 1_000_000_000))
            lines_ms, _ = median_ms(lambda: "\n".join(point.line() for point in points))
            metrics_ms, text = median_ms(lambda: exposition(points, load={}))
            scrape_ms, scraped = median_ms(lambda: exposition(source.snapshot(time.time_ns()), load={}))
        finally:
            store.close()
    return {"sessions": count, "paths": len(points), "readings_ms": readings_ms, "poll_ms": poll_ms,
            "line_protocol_ms": lines_ms, "metrics_ms": metrics_ms, "metrics_bytes": len(text),
            "default_scrape_ms": scrape_ms, "default_scrape_bytes": len(scraped)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    result = run(parser.parse_args().sessions)
    print(", ".join(f"{name} {value:.0f}" for name, value in result.items()))


if __name__ == "__main__":
    main()
