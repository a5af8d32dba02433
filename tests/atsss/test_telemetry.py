"""ATSSS's paths in the telemetry: sessions put through the service into the maps of the downlink
program in the kernel (xdp_atsss.bpf.o, tests/atsss/atsss.py), UE packets run through it
(BPF_PROG_TEST_RUN), and the collector's polls and the Prometheus exposition checked against what
the frames the program emitted say (each decoded by the draft's layout: which path, how many bytes),
not against the program's counters. A tenant sees its own paths only; /metrics has them only when
asked (telemetry.atsss_path_metrics)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from netapp.atsss import store as stored
from netapp.atsss.models import AtsssSessionPatch, AtsssSessionSpec
from netapp.atsss.service import Atsss, path_key
from netapp.atsss.table import AtsssMaps
from netapp.atsss.telemetry import AtsssPoints
from netapp.service.contract import Principal, Scope
from netapp.service.store import Store
from netapp.telemetry.collector import Collector
from netapp.telemetry.poll import ATSSS_PATH, PointFilter
from netapp.telemetry.prometheus import scrape
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
from tests.api.conftest import NoCounters
from tests.atsss.atsss import (XDP_DROP, XDP_TX, AtsssProgram, PathSpec, decode, delete_every_session, ethernet,
                               ue_packet)  # fmt: skip
from tests.atsss.test_poll_races import at_the_polls_read
from tests.atsss.uplink import ACK, RECEIVED, ack_vector, mp_seq_option, uplink_frame
from tests.utils.object_tables import ObjectTables

ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
CAROL = Principal("carol", frozenset({Scope.READ, Scope.INTENTS_WRITE}))
DAVE = Principal("dave", frozenset({Scope.READ, Scope.INTENTS_WRITE}))
GRANTS = {"carol": "10.60.0.0/24", "dave": "10.70.0.0/24"}
NODE = "edge-1"
S = 1_000_000_000


def path(n: int, **overrides: Any) -> dict[str, Any]:
    return {"access": "3GPP" if n % 2 else "non-3GPP", "local": f"192.0.2.{n}", "peer": f"198.51.100.{n}",
            "local_port": 5000 + n, "peer_port": 6000 + n, "source_mac": f"02:00:00:00:aa:0{n}",
            "next_hop_mac": f"02:00:00:00:bb:0{n}", **overrides}


def spec(name: str, ue: str, mode: str, paths: list[dict[str, Any]]) -> AtsssSessionSpec:
    return AtsssSessionSpec.model_validate({"name": name, "ue": ue, "mode": mode, "paths": paths})


class Node:
    """The service over a store and the downlink program's maps, its paths a collector's source."""

    def __init__(self, program: AtsssProgram, store: Store, netns: str):
        self.program = program
        self.atsss = Atsss(store, AtsssMaps(ObjectTables(program.obj).table), netns=netns)
        self.collector = Collector(NoCounters(), node=NODE, clock_ns=self._now)
        self.collector.add_source(AtsssPoints(self.atsss.readings, NODE, path_metrics=True,
                                              served=self.atsss.served_paths))
        self.time_ns = S
        self.sent: Counter[tuple[str, int]] = Counter()  # (peer on the path, what) -> how many, from the frames

    def _now(self) -> int:
        self.time_ns += S  # one second between polls, whatever the machine's load
        return self.time_ns

    def send(self, ue: str, sizes: list[int]) -> None:
        """UE packets of these payload sizes through the downlink; what each frame carried, by path."""
        for size in sizes:
            verdict, frame = self.program.run(ethernet(ue_packet(ue, bytes(size))))
            assert verdict == XDP_TX
            decoded = decode(frame)
            self.sent[(decoded.dst, 0)] += 1
            self.sent[(decoded.dst, 1)] += len(decoded.inner)


@pytest.fixture
def node(atsss: AtsssProgram, tmp_path, node_ns) -> Iterator[Node]:
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    tenants = TenantService(lambda: store)
    for tenant, prefix in GRANTS.items():
        tenants.put_tenant(ADMIN, tenant, TenantSpec.model_validate({"traffic": [{"dst": prefix}]}))
    node = Node(atsss, store, node_ns)
    try:
        yield node
    finally:
        delete_every_session(node.atsss, ADMIN)
        store.close()


def path_points(points: Any) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(tenant, session, path) -> tags and fields of the poll's dpp_atsss_path points."""
    return {(p.tags["tenant"], p.tags["session"], p.tags["path"]): {**p.tags, **p.fields}
            for p in points if p.measurement == ATSSS_PATH}


def test_each_path_reports_what_its_frames_carried_with_rates_and_the_split(node):
    node.atsss.create_session(CAROL, "ue5", spec("ue5", "10.60.0.5", "weighted", [path(1, weight=3), path(2)]))
    node.atsss.create_session(DAVE, "ue6", spec("ue6", "10.70.0.6", "round_robin", [path(3), path(4)]))
    node.send("10.60.0.5", [100 + n for n in range(8)])
    node.send("10.70.0.6", [50, 60])
    first = path_points(node.collector.poll_once().points())
    node.send("10.60.0.5", [200] * 4)
    second = path_points(node.collector.poll_once().points())

    assert sorted(second) == [("carol", "ue5", "0"), ("carol", "ue5", "1"), ("dave", "ue6", "0"),
                              ("dave", "ue6", "1")]
    for (tenant, name, index), fields in second.items():
        peer = f"198.51.100.{int(index) + (1 if name == 'ue5' else 3)}"
        assert (fields["packets"], fields["bytes"]) == (node.sent[(peer, 0)], node.sent[(peer, 1)]), (name, index)
        before = first[(tenant, name, index)]
        assert fields["packets_rate"] == fields["packets"] - before["packets"], "per second: polls 1 s apart"
        assert fields["bytes_rate"] == fields["bytes"] - before["bytes"]
        assert "packets_rate" not in before, "no rate on the first poll"
        assert (fields["node"], fields["up"], fields["rtt_us"]) == (NODE, True, 0)
    ue5 = [second[("carol", "ue5", str(i))] for i in range(2)]
    assert [p["packets"] for p in ue5] == [9, 3], "weighted 3:1 over 12 packets"
    assert [p["share"] for p in ue5] == [9 / 12, 3 / 12]
    assert [(p["weight"], p["access"]) for p in ue5] == [(3, "3GPP"), (1, "non-3GPP")]


def test_a_patched_path_state_is_in_the_next_poll_and_in_prometheus_in_seconds(node):
    node.atsss.create_session(CAROL, "ue5", spec("ue5", "10.60.0.5", "weighted", [path(1), path(2)]))
    node.atsss.patch_session(CAROL, "ue5", AtsssSessionPatch.model_validate(
        {"paths": [{"index": 0, "rtt_us": 12500, "weight": 4}, {"index": 1, "up": False, "rtt_us": 40000}]}))
    polled = path_points(node.collector.poll_once().points())
    assert [(polled[("carol", "ue5", i)]["up"], polled[("carol", "ue5", i)]["rtt_us"],
             polled[("carol", "ue5", i)]["weight"]) for i in "01"] == [(True, 12500, 4), (False, 40000, 1)]
    assert "share" not in polled[("carol", "ue5", "0")], "nothing sent: no split to tell"

    samples = {(s.name, s.labels["path"]): s.value for family in text_string_to_metric_families(
        scrape(node.collector, None).decode()) for s in family.samples if s.name.startswith("dpp_atsss_path")}
    assert math.isclose(samples[("dpp_atsss_path_rtt_seconds", "0")], 0.0125)
    assert samples[("dpp_atsss_path_up", "1")] == 0 and samples[("dpp_atsss_path_weight", "0")] == 4
    assert samples[("dpp_atsss_path_packets_total", "0")] == 0


def test_a_tenant_sees_its_own_paths_only_in_polls_and_scrapes(node):
    node.atsss.create_session(CAROL, "ue5", spec("ue5", "10.60.0.5", "round_robin", [path(1), path(2)]))
    node.atsss.create_session(DAVE, "ue6", spec("ue6", "10.70.0.6", "round_robin", [path(3)]))
    node.send("10.70.0.6", [10])
    poll = node.collector.poll_once()
    assert {key[0] for key in path_points(poll.points(PointFilter(tenant="carol")))} == {"carol"}
    assert set(path_points(poll.points(PointFilter(tenant="dave")))) == {("dave", "ue6", "0")}
    assert set(path_points(poll.points(PointFilter(tenant="erin")))) == set()
    text = scrape(node.collector, "dave").decode()
    tenants = {s.labels["tenant"] for family in text_string_to_metric_families(text) for s in family.samples
               if s.name.startswith("dpp_atsss_path")}
    assert tenants == {"dave"}


def test_the_polls_follow_every_change_of_the_sessions_having_loaded_them_once(node, monkeypatch):
    loads = []
    load_sessions = stored.load_sessions
    monkeypatch.setattr(stored, "load_sessions", lambda *args: loads.append(args) or load_sessions(*args))
    node.atsss.create_session(CAROL, "ue5", spec("ue5", "10.60.0.5", "weighted", [path(1), path(2)]))
    node.atsss.create_session(CAROL, "ue7", spec("ue7", "10.60.0.7", "round_robin", [path(3)]))
    assert set(path_points(node.collector.poll_once().points())) == {
        ("carol", "ue5", "0"), ("carol", "ue5", "1"), ("carol", "ue7", "0")}

    node.atsss.patch_session(CAROL, "ue5", AtsssSessionPatch.model_validate({"paths": [{"index": 1, "weight": 9}]}))
    node.atsss.delete_session(CAROL, "ue7")
    node.atsss.create_session(DAVE, "ue6", spec("ue6", "10.70.0.6", "round_robin", [path(4)]))
    node.atsss.put_session(CAROL, "ue5", spec("ue5", "10.60.0.8", "weighted", [path(1), path(2, weight=9)]))
    node.send("10.60.0.8", [10])
    polled = path_points(node.collector.poll_once().points())
    assert set(polled) == {("carol", "ue5", "0"), ("carol", "ue5", "1"), ("dave", "ue6", "0")}
    assert [polled[("carol", "ue5", i)]["weight"] for i in "01"] == [1, 9]
    assert sum(polled[("carol", "ue5", i)]["packets"] for i in "01") == 1, "the session moved to its new UE"
    assert len(loads) == 1, "loaded at the first poll, then kept up to date by the changes"


def test_by_default_the_scrape_has_no_path_series_and_reads_no_path_while_the_poll_has_them(node):
    reads = []
    collector = Collector(NoCounters(), node=NODE)
    collector.add_source(AtsssPoints(lambda: reads.append(1) or node.atsss.readings(), NODE))
    node.atsss.create_session(CAROL, "ue5", spec("ue5", "10.60.0.5", "round_robin", [path(1), path(2)]))
    node.send("10.60.0.5", [10, 20])
    text = scrape(collector, None).decode()
    assert not [s for family in text_string_to_metric_families(text) for s in family.samples
                if s.name.startswith("dpp_atsss_path")], text
    assert reads == [], "a scrape reads no path"
    polled = path_points(collector.poll_once().points())
    assert sorted(polled) == [("carol", "ue5", "0"), ("carol", "ue5", "1")]
    assert [polled[("carol", "ue5", i)]["packets"] for i in "01"] == [1, 1], "InfluxDB keeps every path"


def acks_from_the_ue(node: Node, n: int, states: dict[int, int], acks: list[int]) -> None:
    """The UE's Acks on path(n) of a session, each with the Ack Vector of the last 64 numbers."""
    spec = PathSpec(f"192.0.2.{n}", f"198.51.100.{n}", sport=5000 + n, dport=6000 + n)
    for seq, ack in enumerate(acks, start=1):
        options = mp_seq_option(seq) + ack_vector(ack, states, 64)
        verdict, _ = node.program.run(uplink_frame(spec, b"", seq=seq, kind=ACK, ack=ack, options=options))
        assert verdict == XDP_DROP, "an Ack of a known path is consumed"


def test_each_path_reports_the_loss_the_ues_ack_vectors_tell_per_poll_window_and_since_its_start(node):
    """Path 0's UE loses every 4th number of 0-199, then every 2nd of 200-399; path 1 hears no vector."""
    node.atsss.create_session(CAROL, "ue5", spec("ue5", "10.60.0.5", "round_robin", [path(1), path(2)]))
    states = {n: RECEIVED for n in range(0, 400) if (n % 4 if n < 200 else n % 2)}
    acks_from_the_ue(node, 1, states, [3, *range(23, 204, 20)])  # judges 1..200
    first = path_points(node.collector.poll_once().points())[("carol", "ue5", "0")]
    acks_from_the_ue(node, 1, states, list(range(223, 404, 20)))  # judges 201..400
    polled = path_points(node.collector.poll_once().points())

    second = polled[("carol", "ue5", "0")]
    assert (first["delivered"], first["lost"]) == (150, 50) and "loss" not in first, "no window on a first poll"
    assert (second["delivered"], second["lost"]) == (250, 150)
    assert second["loss"] == 100 / 200, "the window's: every 2nd of 201..400"
    assert (polled[("carol", "ue5", "1")]["lost"], "loss" in polled[("carol", "ue5", "1")]) == (0, False)
    counters = node.atsss.session_counters(CAROL, "ue5").paths
    assert [(p.delivered, p.lost, p.loss) for p in counters] == [(250, 150, 150 / 400), (0, 0, None)]
    samples = {(s.name, s.labels["path"]): s.value for family in text_string_to_metric_families(
        scrape(node.collector, None).decode()) for s in family.samples if s.name.startswith("dpp_atsss_path_")}
    assert (samples[("dpp_atsss_path_delivered_total", "0")], samples[("dpp_atsss_path_lost_total", "0")]) == (250, 150)


def polled_while(node: Node, monkeypatch, change: Any) -> dict[tuple[str, str, str], dict[str, Any]]:
    """A poll during which `change` runs, once the poll has taken the served sessions and before it
    reads their slots (tests/utils/interleave.py): the readings of the session it touched dropped."""
    second = at_the_polls_read(node.atsss, monkeypatch, change)
    polled = path_points(node.collector.poll_once().points())
    second.join()
    monkeypatch.undo()
    return polled


def test_a_path_whose_reading_was_dropped_as_its_session_changed_has_rates_and_window_over_both_polls(
        node, monkeypatch):
    """ue5 PATCHed while the second poll read its slots: its points missing from that poll only;
    the third poll's rates and loss window span both polls' 2 s, from the counters of the first
    (forgotten, the third poll had neither, and the path's window of 201..400 was never told)."""
    node.atsss.create_session(CAROL, "ue5", spec("ue5", "10.60.0.5", "round_robin", [path(1), path(2)]))
    states = {n: RECEIVED for n in range(0, 400) if (n % 4 if n < 200 else n % 2)}
    node.send("10.60.0.5", [100] * 4)
    acks_from_the_ue(node, 1, states, [3, *range(23, 204, 20)])  # judges 1..200
    first = path_points(node.collector.poll_once().points())
    node.send("10.60.0.5", [100] * 4)
    acks_from_the_ue(node, 1, states, list(range(223, 404, 20)))  # judges 201..400
    rtt = AtsssSessionPatch.model_validate({"paths": [{"index": 0, "rtt_us": 500}]})
    assert polled_while(node, monkeypatch, lambda: node.atsss.patch_session(CAROL, "ue5", rtt)) == {}
    node.send("10.60.0.5", [100] * 2)
    third = path_points(node.collector.poll_once().points())

    for index in "01":
        before, after = first[("carol", "ue5", index)], third[("carol", "ue5", index)]
        assert (before["packets"], after["packets"]) == (2, 5), index
        assert after["packets_rate"] == (5 - 2) / 2, "over both polls' 2 s"
        assert after["bytes_rate"] == (after["bytes"] - before["bytes"]) / 2
    assert third[("carol", "ue5", "0")]["loss"] == 100 / 200, "the window of both polls: every 2nd of 201..400"
    assert third[("carol", "ue5", "0")]["rtt_us"] == 500, "the PATCH in the data path"


@pytest.mark.parametrize("who, name, ue", [(CAROL, "ue5", "10.60.0.5"), (DAVE, "ue6", "10.70.0.6")],
                         ids=["the-same-again", "another-tenants"])
def test_a_path_whose_session_was_deleted_while_the_poll_read_it_forgets_its_counters(node, monkeypatch, who,
                                                                                       name, ue, slots_given_again):
    """ue5 deleted while the second poll read its slots, then a session created in those slots (ue5
    again, or another tenant's): the slots' counters were zeroed, and its first poll has no rates,
    not rates from ue5's old counters (kept, the same ue5's would be 1 packet a second)."""
    node.atsss.create_session(CAROL, "ue5", spec("ue5", "10.60.0.5", "round_robin", [path(1), path(2)]))
    slots = node.atsss.get_session(CAROL, "ue5").slots
    node.send("10.60.0.5", [100] * 4)
    assert ("carol", "ue5", "0") in path_points(node.collector.poll_once().points())
    assert polled_while(node, monkeypatch, lambda: node.atsss.delete_session(CAROL, "ue5")) == {}
    node.atsss.create_session(who, name, spec(name, ue, "round_robin", [path(1), path(2)]))
    assert node.atsss.get_session(who, name).slots == slots, "the case this test is about: the same slots"
    node.send(ue, [100] * 8)
    polled = path_points(node.collector.poll_once().points())

    for index in "01":
        fields = polled[(who.tenant, name, index)]
        assert fields["packets"] == 4, "counted from zero in the slot"
        assert "packets_rate" not in fields and "bytes_rate" not in fields, "its rates start over"


def test_a_path_given_the_slot_of_one_removed_between_two_polls_starts_fresh(node, slots_given_again):
    """ue5's first path removed by a PUT and another added by a second, between two polls: the new
    path is given the removed one's slot (the lowest free), its counters zeroed. Its first poll has
    no rates (not rates from the removed path's counters: 6 packets against 4 would be 2 a second)
    and it has no measured loss (not the removed path's)."""
    node.atsss.create_session(CAROL, "ue5", spec("ue5", "10.60.0.5", "round_robin", [path(1), path(2)]))
    old = node.atsss.get_session(CAROL, "ue5")
    node.send("10.60.0.5", [100] * 8)
    assert path_points(node.collector.poll_once().points())[("carol", "ue5", "0")]["packets"] == 4
    node.atsss.note_losses({path_key(old, 0): 0.5})
    node.atsss.put_session(CAROL, "ue5", spec("ue5", "10.60.0.5", "round_robin", [path(2)]))
    new, _ = node.atsss.put_session(CAROL, "ue5", spec("ue5", "10.60.0.5", "round_robin", [path(2), path(3)]))
    assert new.slots[1] == old.slots[0], "the case this test is about: the removed path's slot"
    node.send("10.60.0.5", [100] * 12)
    fields = path_points(node.collector.poll_once().points())[("carol", "ue5", "1")]

    assert fields["packets"] == 6, "counted from zero in the slot"
    assert "packets_rate" not in fields and "bytes_rate" not in fields, "its rates start over"
    assert node.atsss.measured_losses(new) == [None, None], "the removed path's loss is not the new one's"
