"""The loop closed over ATSSS: a weighted session put through the service into the downlink program's
maps in the kernel (xdp_atsss.bpf.o, tests/atsss/atsss.py), its paths' RTTs fed as a monitoring
module does, the collector's polls written by the InfluxDB sink into a real InfluxDB 1.8, the AI
loop reading them back (Flux) and PATCHing the weights through the real API (uvicorn), and the
UE packets run through the program afterwards (BPF_PROG_TEST_RUN) split as the new weights say,
counted from the emitted frames."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterator

import pytest

from netapp.ai.client import NetAppClient
from netapp.ai.loop import AiLoop, LoopSettings
from netapp.ai.policy import Policy
from netapp.ai.reader import InfluxReader
from netapp.ai.record import WEIGHT_MEASUREMENT, InfluxRecorder
from netapp.ai.weights import WeightPolicy
from netapp.atsss.models import AtsssSessionPatch, AtsssSessionSpec
from netapp.atsss.service import Atsss
from netapp.atsss.table import AtsssMaps
from netapp.atsss.telemetry import AtsssPoints
from netapp.service.contract import Principal, Scope
from netapp.service.store import Store
from netapp.telemetry.collector import Collector
from netapp.telemetry.influx import InfluxSink
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
from tests.ai.fakes import ADMIN_TOKEN
from tests.api.conftest import NoCounters
from tests.atsss.atsss import XDP_TX, AtsssProgram, decode, ethernet, ue_packet
from tests.utils.influxd import influx_settings
from tests.utils.kernel import addresses_namespace
from tests.utils.object_tables import ObjectTables

ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
CAROL = Principal("carol", frozenset({Scope.READ, Scope.INTENTS_WRITE}))
NODE = "edge-1"
UE = "10.60.0.5"
PEERS = ("198.51.100.1", "198.51.100.2")


def path(n: int) -> dict[str, Any]:
    return {"access": "3GPP" if n == 1 else "non-3GPP", "local": f"192.0.2.{n}", "peer": PEERS[n - 1],
            "local_port": 5000 + n, "peer_port": 6000 + n, "source_mac": f"02:00:00:00:aa:0{n}",
            "next_hop_mac": f"02:00:00:00:bb:0{n}"}


@pytest.fixture
def atsss(api_app, tmp_path) -> Iterator[tuple[Atsss, AtsssProgram]]:
    """The service over the program's maps, served by the session's API as `netapp serve` does, on
    a node (a namespace) whose addresses are the paths' local ones."""
    with addresses_namespace("dpp-weights", [path(n)["local"] for n in (1, 2)]) as node_ns:
        yield from _served(api_app, tmp_path, node_ns)


def _served(api_app, tmp_path, node_ns: str) -> Iterator[tuple[Atsss, AtsssProgram]]:
    program = AtsssProgram()
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    TenantService(lambda: store).put_tenant(ADMIN, "carol", TenantSpec.model_validate(
        {"traffic": [{"dst": "10.60.0.0/24"}]}))
    service = Atsss(store, AtsssMaps(ObjectTables(program.obj).table), netns=node_ns)
    api_app.state.atsss = service
    try:
        yield service, program
    finally:
        del api_app.state.atsss
        store.close()
        program.close()


def split(program: AtsssProgram, packets: int) -> list[int]:
    """Send `packets` UE packets through the downlink: how many left on each path, from the frames."""
    peers: Counter[str] = Counter()
    for n in range(packets):
        verdict, frame = program.run(ethernet(ue_packet(UE, n.to_bytes(4, "big"))))
        assert verdict == XDP_TX
        peers[decode(frame).dst] += 1
    return [peers[peer] for peer in PEERS]


def test_the_loop_weighs_the_paths_by_their_measured_rtts_and_the_data_path_splits_so(
        atsss, api_server, influxd, database, test_bucket, influx_client):
    service, program = atsss
    service.create_session(CAROL, "ue5", AtsssSessionSpec.model_validate(
        {"name": "ue5", "ue": UE, "mode": "weighted", "paths": [path(1), path(2)]}))
    assert split(program, 20) == [10, 10]
    # What a monitoring module feeds: path 0 three times as fast as path 1.
    service.patch_session(CAROL, "ue5", AtsssSessionPatch.model_validate(
        {"paths": [{"index": 0, "rtt_us": 10_000}, {"index": 1, "rtt_us": 30_000}]}))

    sink = InfluxSink(influx_settings(influxd, database))
    collector = Collector(NoCounters(), node=NODE, sinks=[sink])
    collector.add_source(AtsssPoints(service.readings, NODE))
    client = NetAppClient(api_server.url, ADMIN_TOKEN)
    try:
        collector.poll_once()
        collector.poll_once()
        assert sink.flush(10.0), sink.stats()
        loop = AiLoop(InfluxReader(influx_client, test_bucket, NODE), client, Policy(),
                      InfluxRecorder(influx_client, test_bucket, NODE), LoopSettings(window_s=300),
                      weights=WeightPolicy())
        assert loop.step() == [], "no CPU to decide about"
        (decision,) = loop.weight_decisions
        assert (decision.tenant, decision.session, decision.weights, decision.outcome) == (
            "carol", "ue5", (75, 25), "applied")

        held = program.session(UE)
        assert held is not None and list(held.weight[:2]) == [75, 25], "PATCHed into the kernel's map"
        assert split(program, 100) == [75, 25], "one cycle of the smooth weighted round-robin"

        assert loop.step() == [] and loop.weight_decisions == [], "weighed already: nothing more to do"
    finally:
        client.close()
        collector.stop(timeout_s=1.0)
        service.delete_session(ADMIN, "carol/ue5")

    recorded = influxd.query(f'SELECT "weight", "previous", "rtt_us", "outcome" FROM "{WEIGHT_MEASUREMENT}" '
                             'GROUP BY "path"', db=database)["results"][0]["series"]
    assert sorted((s["tags"]["path"], s["values"][0][1:]) for s in recorded) == [
        ("0", [75, 1, 10_000.0, "applied"]), ("1", [25, 1, 30_000.0, "applied"])]
