"""Start-up cost of the UPF's stored sessions: `netapp serve`'s two reconciles (the service's, with the
SDF rules of the stored sessions, and start_pfcp's, with their entries) over N stored sessions,
compiling each session twice (as before netapp.upf.runtime.StartupCompile) and once (now).

    python -m bench.upf_startup --sessions 100000

The data plane is netapp.dataplane.fake (no kernel: what is measured is the control plane's load,
parse and compile, and the reconcile's reads and writes of a map in memory), its UPF maps sized
for the sessions. Each session has an uplink and a downlink PDR, two FARs (one an N3 tunnel) and
a QER, no SDF filter. Both modes run on one store, in one process, one after the other; each
starts from the maps as the other left them (full), as a restart does.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import tempfile
import time
from pathlib import Path
from typing import Callable

from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.service.store import Store
from netapp.upf import runtime
from netapp.upf import store as rows
from netapp.upf.abi import Output, Role
from netapp.upf.applier import BpfApplier, compile_stored, iface_entries
from netapp.upf.compiler import Site
from netapp.upf.models import (
    Far, ForwardingParameters, FSeid, FTeid, OuterHeaderCreation, Pdi, Pdr, Qer, Session, UeIpAddress,
)
from netapp.upf.peers import Destinations
from netapp.upf.pfcp.ies import Interface
from netapp.upf.sessions import Upf

N3 = "10.30.0.1"
SITE = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3, output=Output.PASS)
ALLOWED = Destinations(["10.31.0.0/16"])


def session(seid: int) -> Session:
    ue = str(ipaddress.IPv4Address("10.128.0.0") + seid)
    to_gnb = Far(id=2, apply_action=frozenset({"FORW"}), forwarding=ForwardingParameters(
        destination_interface=Interface.ACCESS,
        outer_header_creation=OuterHeaderCreation(kind="gtpu-ipv4", teid=seid, address="10.31.0.2")))
    to_core = Far(id=1, apply_action=frozenset({"FORW"}),
                  forwarding=ForwardingParameters(destination_interface=Interface.CORE))
    pdrs = {
        1: Pdr(id=1, precedence=10, far_id=1, outer_header_removal=0, qer_ids=(1,),
               pdi=Pdi(source_interface=Interface.ACCESS, local_fteid=FTeid(teid=seid, ipv4=N3))),
        2: Pdr(id=2, precedence=10, far_id=2, qer_ids=(1,),
               pdi=Pdi(source_interface=Interface.CORE, ue_ip=UeIpAddress(ipv4=ue, destination=True))),
    }
    return Session(seid=seid, node_id="smf", remote=FSeid(seid=seid, ipv4="10.40.0.2"), pdrs=pdrs,
                   fars={1: to_core, 2: to_gnb}, qers={1: Qer(id=1, qfi=9)})


def twice(store: Store, applier: BpfApplier) -> None:
    """Before: the service's reconcile compiles every stored session for its rules, start_pfcp's
    reconcile compiles every one again."""
    with store.transaction():
        for stored, _ in rows.load_sessions(store):
            try:
                compile_stored(stored, SITE)
            except Exception:  # noqa: BLE001 - left out, as stored_rules does
                continue
    upf = Upf(store, applier, n3_ipv4=N3, destinations=ALLOWED)
    refused = applier.reconcile(upf.sessions.values())
    assert not refused, refused


def once(store: Store, applier: BpfApplier) -> None:
    """Now: one compile, kept from the service's reconcile for start_pfcp's."""
    startup = runtime.StartupCompile(SITE, ALLOWED)
    with store.transaction():
        for stored, body in rows.load_sessions(store):
            startup.add(stored, body)
    upf = Upf(store, applier, n3_ipv4=N3, destinations=ALLOWED)
    refused = runtime._reconcile(upf, applier, startup, ALLOWED)
    assert not refused, refused


def timed(run: Callable[[Store, BpfApplier], None], store: Store, applier: BpfApplier) -> dict[str, float]:
    """Wall and CPU seconds (on a shared machine the CPU time is the steadier of the two)."""
    wall, cpu = time.perf_counter(), time.process_time()
    run(store, applier)
    return {"wall_s": round(time.perf_counter() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    args = parser.parse_args()
    sizes = {"dpp_upf_uplink": args.sessions + 1, "dpp_upf_downlink": args.sessions + 1}
    applier = BpfApplier(Dataplane(FakeDpp(map_sizes=sizes)).table, SITE, iface_entries({5: (Role.N3, 0)}, N3, None))
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "netapp.db", synchronous="NORMAL")
        with store.transaction():
            for seid in range(1, args.sessions + 1):
                rows.put_session(store, session(seid))
        applier.reconcile([])  # empty maps: the first run fills them, as after a reboot; the next finds them full
        results = {"sessions": args.sessions, "fill": timed(once, store, applier)}
        results["twice"] = timed(twice, store, applier)
        results["once"] = timed(once, store, applier)
        store.close()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
