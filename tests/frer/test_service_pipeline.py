"""FRER's service over the NetApp's loaded data plane (libdpp, dpp.bpf.o with its FRER stage), frames
run through the pipeline (BPF_PROG_TEST_RUN): a stream put through the service is eliminated by the
stage, its counters read back through the service; deleted, its frames go through the pipeline as on
a node without FRER and the stage no longer runs; kept over a restart of the control plane (the maps
pinned, the service reconciling them from the store)."""

from __future__ import annotations

from typing import Iterator

import pytest

from netapp.frer.dataplane import FrerDataplane
from netapp.frer.models import FrerStreamSpec
from netapp.frer.service import Frer
from netapp.service.contract import Principal, Scope
from netapp.service.store import Store
from tests.frer import test_pipeline as pipeline
from tests.frer.test_pipeline import LISTENER, RECOVERED, TALKER, reasons, stage_runs, tagged, udp

ns, node = pipeline.ns, pipeline.node
ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
STREAM = FrerStreamSpec.model_validate({
    "name": "protected",
    "identification": [{"ip": {"source": TALKER, "destination": LISTENER, "protocol": "udp", "source_port": 4000,
                               "destination_port": RECOVERED}}],
    "recovery": {"pop": True, "reset_timeout_ms": 0},  # a restart between two copies may take over a second
})  # fmt: skip


@pytest.fixture
def frer(node, tmp_path) -> Iterator[Frer]:
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    try:
        yield Frer.start(store, node.table, FrerDataplane(node))
    finally:
        store.close()


def counted(frer: Frer) -> tuple[int, int]:
    recovery = frer.stream_counters(ADMIN, "protected").recovery
    assert recovery is not None
    return recovery.frerCpsSeqRcvyPassedPackets, recovery.frerCpsSeqRcvyDiscardedPackets


def test_a_stream_put_through_the_service_is_eliminated_by_the_pipeline(node, frer):
    assert node.test_run(tagged(udp(RECOVERED), 7)).reason == "not_ip", "no stream yet: the stage does not run"
    frer.put_stream(ADMIN, "protected", STREAM)
    first, duplicate = (node.test_run(tagged(udp(RECOVERED), 7)) for _ in range(2))
    assert (first.verdict, first.intent, first.data) == ("PASS", "protected", udp(RECOVERED))
    assert duplicate.verdict == "DROP" and reasons(node)["frer_eliminated"] == 1
    assert counted(frer) == (1, 1)
    frer.delete_stream(ADMIN, "protected")
    runs = stage_runs(node)
    assert node.test_run(tagged(udp(RECOVERED), 8)).reason == "not_ip" and stage_runs(node) == runs


def test_a_restart_of_the_control_plane_keeps_the_stream_and_its_state(node, frer, tmp_path):
    frer.put_stream(ADMIN, "protected", STREAM)
    node.test_run(tagged(udp(RECOVERED), 7))
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")  # a new control plane, the maps pinned
    try:
        again = Frer.start(store, node.table, FrerDataplane(node))
        assert counted(again) == (1, 0)
        assert node.test_run(tagged(udp(RECOVERED), 7)).verdict == "DROP", "its history kept"
    finally:
        store.close()
