"""FRER's service writing the maps of the FRER node's programs in the kernel
(dataplane/build/dpp_frer.bpf.o, loaded with libbpf), and frames run through its listener
(BPF_PROG_TEST_RUN, received on loopback): what the service writes is what the program acts on, and
what it reads back (the recovery slot under its lock, the ports' per-CPU encode errors) is what the
program counted. (The NetApp's pipeline, through libdpp: test_service_pipeline.py.)

The tables go to the object's maps by their file descriptors (`ObjectTables`, the calls of the
generic tables' adapter over libbpf), and FRER's other calls are `ObjectFrer`'s, over the same maps.
"""

from __future__ import annotations

import errno
import struct
from ctypes import c_uint32
from typing import Any, Iterator, Optional

import pytest

from bench.libbpf import BPF_F_LOCK, BpfObject, map_delete, map_keys, map_lookup, map_update
from bench.libbpf import test_run as run_once
from netapp.frer.abi import RTAG_ETHERTYPE, Gate, NullKey, Recovery
from netapp.frer.models import FrerStreamSpec
from netapp.frer.service import Frer
from netapp.frer.table import FrerMaps
from netapp.service.contract import Principal, Scope
from netapp.service.store import Store
from tests.utils.kernel import build_artifact, require_kernel
from tests.utils.object_tables import ObjectTables

XDP_DROP, XDP_PASS = 1, 2
LOOPBACK = 1
DMAC = "02:00:00:00:bb:01"
ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
BODY = bytes(range(46))


class ObjectFrer:
    """FRER's calls beyond tables over the object: recovery slots read with BPF_F_LOCK, dpp_frer_tx
    written slot by slot with the egress program."""

    def __init__(self, obj: BpfObject):
        self.obj = obj
        self.slots = 0
        self.kinds = Gate(0)

    def recovery_read(self, handles: list[int]) -> list[Recovery]:
        values = []
        for handle in handles:
            value = Recovery()
            map_lookup(self.obj.map_fd("dpp_frer_recovery"), c_uint32(handle), value, BPF_F_LOCK)
            values.append(value)
        return values

    def ports_set(self, ifindexes: list[int]) -> None:
        egress = self.obj.program_fd("dpp_frer_egress")
        for slot, ifindex in enumerate(ifindexes):
            map_update(self.obj.map_fd("dpp_frer_tx"), c_uint32(slot), (c_uint32 * 2)(ifindex, egress))
        for slot in range(len(ifindexes), self.slots):
            try:
                map_delete(self.obj.map_fd("dpp_frer_tx"), c_uint32(slot))
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    raise
        self.slots = len(ifindexes)

    def gate_set(self, kinds: Gate) -> None:
        """The object's programs are FRER's alone: they have no gate, every frame is theirs."""
        self.kinds = kinds

    def gate(self) -> Gate:
        return self.kinds


class Node:
    """The FRER object loaded, a store, and the service over them; `restart` opens the store and the
    service anew over the same maps (as pinned maps outlive the control plane)."""

    def __init__(self, path: Any):
        require_kernel()
        self.path = path
        self.obj = BpfObject(build_artifact("dpp_frer.bpf.o"))
        self.tables = ObjectTables(self.obj)
        self.store = Store.open(path, synchronous="NORMAL")
        self.frer = self._service()

    def _service(self) -> Frer:
        return Frer(self.store, FrerMaps(self.tables.table, ObjectFrer(self.obj)))

    def restart(self) -> None:
        self.store.close()
        self.store = Store.open(self.path, synchronous="NORMAL")
        self.frer = self._service()
        self.frer.reconcile()

    def close(self) -> None:
        self.store.close()
        self.obj.close()

    def run(self, packet: bytes) -> int:
        return run_once(self.obj.program_fd("dpp_frer_listener"), packet, 1, ifindex=LOOPBACK).retval


@pytest.fixture
def node(tmp_path) -> Iterator[Node]:
    node = Node(tmp_path / "netapp.db")
    yield node
    node.close()


def tagged(seq: int, dmac: str = DMAC) -> bytes:
    return bytes.fromhex(dmac.replace(":", "")) + bytes(6) + struct.pack("!HHHH", RTAG_ETHERTYPE, 0, seq, 0x88B5) + BODY


def listener(name: str = "l1", dmac: str = DMAC, history: int = 8, extra: Optional[str] = None) -> FrerStreamSpec:
    identities = [{"null": {"destination_mac": mac}} for mac in (dmac, extra) if mac]
    return FrerStreamSpec.model_validate({"name": name, "identification": identities,
                                          "recovery": {"history_length": history, "pop": False}})


def passed(node: Node, name: str = "l1") -> tuple[int, int]:
    counters = node.frer.stream_counters(ADMIN, name).recovery
    assert counters is not None
    return counters.frerCpsSeqRcvyPassedPackets, counters.frerCpsSeqRcvyDiscardedPackets


def test_the_program_eliminates_as_the_service_configured_and_the_service_reads_its_counters(node):
    node.frer.put_stream(ADMIN, "l1", listener())
    assert [node.run(tagged(seq)) for seq in (1, 1, 2, 3, 2)] == [XDP_PASS, XDP_DROP, XDP_PASS, XDP_PASS, XDP_DROP]
    assert passed(node) == (3, 2)


def test_a_replace_keeps_the_recovery_state_unless_its_parameters_change(node):
    node.frer.put_stream(ADMIN, "l1", listener())
    [node.run(tagged(seq)) for seq in (1, 2)]
    node.frer.put_stream(ADMIN, "l1", listener(extra="02:00:00:00:bb:02"))
    assert node.run(tagged(2, dmac="02:00:00:00:bb:02")) == XDP_DROP, "the new identity, the same history"
    assert passed(node) == (2, 1)
    node.frer.put_stream(ADMIN, "l1", listener(history=16))
    assert passed(node) == (0, 0)
    assert node.run(tagged(2)) == XDP_PASS, "taken as the first after the reset"
    assert node.run(tagged(2, dmac="02:00:00:00:bb:02")) == XDP_PASS, "no stream: passes as without FRER"
    assert passed(node) == (1, 0)


def test_a_restart_keeps_the_state_and_a_delete_leaves_the_frames_alone(node):
    node.frer.put_stream(ADMIN, "l1", listener())
    [node.run(tagged(seq)) for seq in (1, 2)]
    node.restart()
    assert passed(node) == (2, 0) and node.run(tagged(2)) == XDP_DROP, "the history kept over the restart"
    node.frer.delete_stream(ADMIN, "l1")
    assert [node.run(tagged(seq)) for seq in (2, 2)] == [XDP_PASS, XDP_PASS]
    assert map_keys(node.obj.map_fd("dpp_frer_null"), NullKey) == []


def test_the_ports_counters_are_the_programs(node):
    node.frer.put_stream(ADMIN, "l1", listener())
    assert node.run(tagged(1)[:16]) == XDP_DROP
    [port] = node.frer.port_counters(ADMIN)
    assert (port.ifindex, port.interface, port.frerCpsSeqEncErroredPackets) == (LOOPBACK, "lo", 1)
