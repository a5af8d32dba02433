"""python -m bench.atsss.replace: what a PUT that replaces a session's first path (another subflow:
its peer port changed) costs the control plane among N stored sessions of two paths
(bench.atsss.telemetry's), over an anonymous instance with the session writer (loaded, attached
nowhere) and a SQLite file store: `Atsss.put_session` from call to return, and the maps' sync in it
(`AtsssMaps.sync`), medians and quartiles of `--changes` PUTs of sessions drawn at random; and how
many of them kept the session's path slots (its pair: netapp.atsss.admission.replaced_slots). Run it
from each checkout to compare (PYTHONPATH=<checkout>); no packet runs meanwhile.

    python -m bench.atsss.replace --sessions 10000 --changes 200

Needs root and `make -C dataplane`. Results: bench/README.md ("A path replaced in its session's pair").
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.atsss.replace", description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10000, help="sessions stored")
    parser.add_argument("--changes", type=int, default=200, help="timed PUTs")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def stored_service(store: Any, dataplane: Any, admin: Any, sessions: int) -> Any:
    """The service over `dataplane` (netapp.atsss.service.Atsss) with `sessions` sessions stored
    (bench.atsss.telemetry's) and reconciled into its maps, their ten tenants site-wide (the
    changes' checks pass)."""
    from bench.atsss.telemetry import store_sessions
    from netapp.atsss.service import Atsss
    from netapp.tenancy.models import TenantSpec
    from netapp.tenancy.service import TenantService

    store_sessions(store, sessions)
    for tenant in range(10):
        TenantService(lambda: store).put_tenant(admin, f"t{tenant}", TenantSpec.model_validate({"site": True}))
    return Atsss.start(store, dataplane.table, program_fd=dataplane.program_fd)


def main(argv: Optional[Sequence[str]] = None) -> int:
    from bench.atsss.change import Clock
    from netapp.atsss.models import AtsssSessionSpec
    from netapp.dataplane.facade import Dataplane
    from netapp.service.contract import Principal, Scope
    from netapp.service.store import Store

    args = parse_args(argv)
    admin = Principal("operator", frozenset({Scope.ADMIN}))
    rng = random.Random(args.seed)
    names = [f"t{i % 10}/ue{i}" for i in range(args.sessions)]
    calls, syncs, kept = [], [], 0
    with tempfile.TemporaryDirectory() as state, Dataplane.open() as dataplane:
        store = Store.open(Path(state) / "netapp.db", synchronous="NORMAL")
        try:
            atsss = stored_service(store, dataplane, admin, args.sessions)
            sync = Clock(atsss._maps, ("sync",))
            for number in range(args.changes):
                name = rng.choice(names)
                current = atsss.get_session(admin, name)
                body = current.model_dump(include=set(AtsssSessionSpec.model_fields), mode="json")
                body["paths"][0]["peer_port"] = 20000 + number  # a new subflow in the first path's place
                sync.spent = 0.0
                started = time.perf_counter()
                after, _ = atsss.put_session(admin, name, AtsssSessionSpec.model_validate(body))
                calls.append((time.perf_counter() - started) * 1e6)
                syncs.append(sync.spent * 1e6)
                kept += after.slots == current.slots
        finally:
            store.close()
    for what, values in (("call", calls), ("sync", syncs)):
        low, median, high = statistics.quantiles(values, n=4)
        print(f"replace first path  {what} {median:8.1f} us [{low:.1f}, {high:.1f}]"
              + (f"  ({1e6 / median:.0f}/s)" if what == "call" else ""))
    print(f"slots kept (the session's pair): {kept} of {args.changes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
