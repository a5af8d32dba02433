"""python -m bench.frer.create: what creating a protected stream costs the control plane, from the
service's call to its return (netapp.frer.service.Frer.create_stream: the store's transaction, the
node's streams compiled, FRER's maps written), over the NetApp's loaded data plane (an anonymous
instance opened by its own code) and a SQLite store, with `--streams` streams installed already.

Three ways, interleaved in one run (each create's way drawn at random, seeded):

- incremental: what a change does now: each stored stream parsed and compiled once and kept
  (netapp.frer.service: StreamCache, StreamParts), only the map entries the change touches written
  (`FrerMaps.change`);
- reparsed: as incremental, but every stored stream parsed and compiled again by the change (what
  every change did before they were kept), brought about by `Frer.forget` before the create;
- whole: as reparsed, and the maps read whole (the 4,096 slots of each array and every identity)
  and rewritten by difference (`FrerMaps.sync`, what every change did before that and the start's
  reconcile still does), brought about by forgetting what the maps hold too.

Each create is of a new recovered stream (its own destination MAC), deleted again untimed, so the
count of streams stays; after each, its slot is checked in dpp_frer_streams. Prints and writes p50,
p99 and the mean per (installed streams, way).

    python -m bench.frer.create --out bench/results/frer_create.json

Needs root and `make -C dataplane`. Methodology and results: bench/README.md ("bench/frer").
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import statistics
import sys
import tempfile
import time
from ctypes import c_uint32
from pathlib import Path
from typing import Any, Optional, Sequence

from bench.dataplane import machine_info
from netapp.dataplane.facade import Dataplane
from netapp.frer import store as stored
from netapp.frer.abi import Role
from netapp.frer.dataplane import FrerDataplane
from netapp.frer.models import FrerStreamSpec, StreamStatus
from netapp.frer.service import Frer
from netapp.service.contract import Principal, Scope
from netapp.service.store import Store

DEFAULT_OUT = Path("bench/results/frer_create.json")
ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
WAYS = ("incremental", "reparsed", "whole")
FILL_PER_TENANT = 200


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.frer.create", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--streams", type=int, nargs="+", default=[0, 1000, 4000],
                        help="streams installed before timing (one block of creates per count)")
    parser.add_argument("--creates", type=int, default=200, help="timed creates per count and way")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def listener(number: int) -> FrerStreamSpec:
    """A recovered stream identified by its own destination MAC."""
    mac = f"02:00:{number >> 24 & 0xFF:02x}:{number >> 16 & 0xFF:02x}:{number >> 8 & 0xFF:02x}:{number & 0xFF:02x}"
    return FrerStreamSpec.model_validate({"name": f"s{number}", "identification": [{"null": {"destination_mac": mac}}],
                                          "recovery": {"pop": True}})


def fill(store: Store, count: int) -> None:
    """`count` streams stored at once (handles 1..count), FILL_PER_TENANT to a tenant (within the
    default quota; the timed creates are the admin's own); the start's reconcile writes them."""
    now = datetime.datetime.now(datetime.timezone.utc)
    with store.transaction():
        store.execute("DELETE FROM frer_streams")
        for number in range(count):
            stored.save_stream(store, StreamStatus(**dict(listener(number)), tenant=f"fill{number // FILL_PER_TENANT}",
                                                   handle=number + 1, updated_at=now, revision=1))


def timed_creates(dataplane: Dataplane, frer: Frer, creates: int, rng: random.Random) -> dict[str, list[float]]:
    """Milliseconds of each create, by way; every create checked in the map, then deleted."""
    streams = dataplane.table("dpp_frer_streams")
    ways = [way for way in WAYS for _ in range(creates)]
    rng.shuffle(ways)
    took: dict[str, list[float]] = {way: [] for way in WAYS}
    for number, way in enumerate(ways, start=1 << 24):
        spec = listener(number)
        if way != "incremental":
            frer.forget()
        if way == "whole":
            frer._maps.held = None  # type: ignore[union-attr]  # not known: the change reads the maps whole
        started = time.perf_counter()
        status = frer.create_stream(ADMIN, spec.name, spec)
        took[way].append((time.perf_counter() - started) * 1000)
        slot = streams.get(c_uint32(status.handle))
        if slot is None or slot.role != Role.RECOVER:
            raise RuntimeError(f"stream {spec.name}'s slot {status.handle} is not in dpp_frer_streams")
        frer.delete_stream(ADMIN, spec.name)
    return took


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50_ms": round(statistics.median(ordered), 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
            "mean_ms": round(statistics.fmean(ordered), 2), "creates": len(ordered)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as state:
        store = Store.open(Path(state) / "netapp.db", synchronous="NORMAL")
        dataplane = Dataplane.open()
        try:
            for count in args.streams:
                fill(store, count)
                frer = Frer.start(store, dataplane.table, FrerDataplane(dataplane))
                took = timed_creates(dataplane, frer, args.creates, rng)
                for way in WAYS:
                    row = {"streams": count, "way": way, **summary(took[way])}
                    rows.append(row)
                    print(f"{count:5} streams  {way:<11}  p50 {row['p50_ms']:7.2f} ms  p99 {row['p99_ms']:7.2f} ms  "
                          f"mean {row['mean_ms']:7.2f} ms", flush=True)
        finally:
            dataplane.close()
            store.close()
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    result = {"benchmark": "frer_create", "date": when, "machine": machine_info(), "seed": args.seed, "results": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
