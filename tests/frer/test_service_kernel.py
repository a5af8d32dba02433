"""FRER's service writing the maps of the FRER node's programs in the kernel
(dataplane/build/dpp_frer.bpf.o, loaded with libbpf), and frames run through its listener
(BPF_PROG_TEST_RUN, received on loopback): what the service writes is what the program acts on, and
what it reads back (the recovery slot under its lock, the ports' per-CPU encode errors) is what the
program counted. (The NetApp's pipeline, through libdpp: test_service_pipeline.py.)

The tables go to the object's maps by their file descriptors (`ObjectTables`, the calls of the
generic tables' adapter over libbpf), and FRER's other calls are `ObjectFrer`'s, over the same maps.
"""

from __future__ import annotations

import struct
from ctypes import c_uint32
from typing import Any, Iterator, Optional

import pytest
from scapy.layers.inet import IP, UDP

from bench.libbpf import BpfObject, inner_map_set, map_delete, map_keys, map_lookup
from bench.libbpf import test_run as run_once
from bench.frer.testbed import read_recovery
from netapp.dataplane.abi import MAPS, MapType
from netapp.frer.abi import MAX_PORTS, RTAG_ETHERTYPE, Gate, NullKey, Recovery
from netapp.frer.models import FrerStreamSpec
from netapp.frer.service import Frer
from netapp.frer.table import FrerMaps
from netapp.service.contract import DataplaneUnavailable, Principal, Scope
from netapp.service.store import Store
from tests.utils.kernel import build_artifact, require_kernel
from tests.utils.object_tables import ObjectTables

XDP_DROP, XDP_PASS = 1, 2
LOOPBACK = 1
DMAC = "02:00:00:00:bb:01"
ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
BODY = bytes(range(46))


class ObjectFrer:
    """FRER's calls beyond tables over the object: recovery slots read with BPF_F_LOCK, dpp_frer_tx's
    groups written as new inner maps (the egress program on the ports that name a VLAN id)."""

    def __init__(self, obj: BpfObject):
        self.obj = obj
        self.groups: dict[int, dict[int, bool]] = {}
        self.kinds = Gate(0)

    @property
    def ports(self) -> list[int]:
        return sorted(set().union(*self.groups.values())) if self.groups else []

    def recovery_read(self, handles: list[int]) -> list[Recovery]:
        return [read_recovery(self.obj, handle) for handle in handles]

    def groups_set(self, groups: dict[int, dict[int, bool]]) -> None:
        egress = self.obj.program_fd("dpp_frer_egress")
        for index, group in groups.items():
            inner_map_set(self.obj.map_fd("dpp_frer_tx"), index, MapType.DEVMAP_HASH, MAX_PORTS,
                          [(c_uint32(ifindex), (c_uint32 * 2)(ifindex, egress if program else 0))
                           for ifindex, program in group.items()], 4, 8)
            self.groups[index] = dict(group)

    def groups_clear(self, groups: list[int]) -> None:
        for index in groups:
            if self.groups.pop(index, None) is not None:
                map_delete(self.obj.map_fd("dpp_frer_tx"), c_uint32(index))

    def groups_held(self) -> list[int]:
        return sorted(self.groups)

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


def in_vlan(vlan: int, seq: int, dmac: str = DMAC, payload: bytes = BODY, ethertype: int = 0x88B5) -> bytes:
    """`tagged`'s frame in a VLAN (the 802.1Q tag before the R-tag)."""
    head = bytes.fromhex(dmac.replace(":", "")) + bytes(6) + struct.pack("!HH", 0x8100, vlan)
    return head + struct.pack("!HHHH", RTAG_ETHERTYPE, 0, seq, ethertype) + payload


# The recovery of the streams frames are run through: no reset timeout. A loaded machine may take
# longer than the default second between two frames of one test, and a reset would let a duplicate
# through.
NEVER_RESET = {"pop": False, "reset_timeout_ms": 0}


def listener(name: str = "l1", dmac: str = DMAC, history: int = 8, extra: Optional[str] = None) -> FrerStreamSpec:
    identities = [{"null": {"destination_mac": mac}} for mac in (dmac, extra) if mac]
    return FrerStreamSpec.model_validate({"name": name, "identification": identities,
                                          "recovery": {**NEVER_RESET, "history_length": history}})


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


def mac(number: int) -> str:
    return f"02:00:00:00:{number >> 8:02x}:{number & 0xFF:02x}"


def maps_now(node: Node) -> dict[str, dict[bytes, bytes]]:
    """Every entry of FRER's tables as the kernel holds them (states and counters too), read with
    libbpf apart from the service's calls."""
    held = {}
    for name in ("dpp_frer_null", "dpp_frer_ip", "dpp_frer_ip_masks", "dpp_frer_streams", "dpp_frer_recovery",
                 "dpp_frer_members"):
        spec, fd = MAPS[name], node.obj.map_fd(name)
        keys = ([c_uint32(index) for index in range(node.tables.map_info(name)["max_entries"])] if spec.array
                else map_keys(fd, spec.key))
        entries = {}
        for key in keys:
            value = spec.value()
            map_lookup(fd, key, value)
            entries[bytes(key)] = bytes(value)
        held[name] = entries
    return held


def writes(node: Node) -> dict[tuple[str, str], int]:
    """The entries each map had written or deleted since the calls were last cleared."""
    counted: dict[tuple[str, str], int] = {}
    for call, name, count in node.tables.calls:
        if call in ("update", "delete") and count:
            counted[call, name] = counted.get((call, name), 0) + count
    return counted


def dumped(node: Node) -> list[str]:
    return [name for call, name, _ in node.tables.calls if call == "dump"]


def test_a_change_writes_only_the_entries_it_touches(node):
    for number in range(12):
        node.frer.put_stream(ADMIN, f"l{number}", listener(f"l{number}", dmac=mac(number)))
    assert [node.run(tagged(seq, mac(3))) for seq in (1, 2)] == [XDP_PASS, XDP_PASS]
    node.tables.calls.clear()
    node.frer.put_stream(ADMIN, "new", listener("new", dmac=mac(99)))
    assert dumped(node) == [], "no map read whole"
    assert writes(node) == {("update", "dpp_frer_streams"): 1, ("update", "dpp_frer_recovery"): 1,
                            ("update", "dpp_frer_cpu_counts"): 1, ("update", "dpp_frer_null"): 1}
    assert [node.run(tagged(7, mac(99))) for _ in range(2)] == [XDP_PASS, XDP_DROP], "the new stream eliminates"
    assert node.run(tagged(2, mac(3))) == XDP_DROP and passed(node, "l3") == (2, 1), "another's history kept"
    node.tables.calls.clear()
    node.frer.delete_stream(ADMIN, "new")
    assert dumped(node) == [] and writes(node) == {("delete", "dpp_frer_null"): 1, ("update", "dpp_frer_streams"): 1,
                                                   ("update", "dpp_frer_recovery"): 1,
                                                   ("update", "dpp_frer_cpu_counts"): 1}
    assert node.run(tagged(7, mac(99))) == XDP_PASS and node.run(tagged(7, mac(99))) == XDP_PASS, "no stream"


def test_a_refused_write_puts_back_what_the_change_touched(node):
    node.frer.put_stream(ADMIN, "l1", listener())
    [node.run(tagged(seq)) for seq in (1, 2)]
    before = maps_now(node)
    node.tables.calls.clear()
    node.tables.refuse("dpp_frer_null")  # after the new stream's slots are written
    with pytest.raises(DataplaneUnavailable):
        node.frer.put_stream(ADMIN, "l2", listener("l2", dmac=mac(2), history=4))
    assert maps_now(node) == before, "its slots emptied again, l1's state as it was"
    assert dumped(node) == [] and [stream.name for stream in node.frer.list_streams(ADMIN)] == ["l1"]
    node.frer.put_stream(ADMIN, "l2", listener("l2", dmac=mac(2), history=4))
    assert [node.run(tagged(5, mac(2))) for _ in range(2)] == [XDP_PASS, XDP_DROP]
    assert node.run(tagged(2)) == XDP_DROP and passed(node) == (2, 1)


def test_when_the_put_back_is_refused_too_the_maps_are_synced_whole_to_the_store(node):
    node.frer.put_stream(ADMIN, "l1", listener())
    node.run(tagged(1))
    before = maps_now(node)
    node.tables.calls.clear()
    node.tables.refuse("dpp_frer_null")
    node.tables.refuse("dpp_frer_streams", 2)  # the new slot written, its emptying by the put back refused
    with pytest.raises(DataplaneUnavailable):
        node.frer.put_stream(ADMIN, "l2", listener("l2", dmac=mac(2)))
    assert set(dumped(node)) >= {"dpp_frer_streams", "dpp_frer_recovery", "dpp_frer_null"}, "read whole"
    assert maps_now(node) == before and node.run(tagged(1)) == XDP_DROP
    assert node.run(tagged(1, mac(2))) == XDP_PASS and passed(node) == (1, 1)


def test_the_maps_hold_the_same_whichever_way_a_change_is_written(node):
    """A change written incrementally leaves what a full sync of the same streams would (the
    tables compared in the kernel, the IP masks renumbered by a new set of compared fields)."""
    ip = {"source": "10.1.0.1", "destination": "10.1.0.2", "protocol": "udp", "destination_port": 5000}
    node.frer.put_stream(ADMIN, "l1", listener())
    node.frer.put_stream(ADMIN, "i1", FrerStreamSpec.model_validate(
        {"name": "i1", "identification": [{"ip": ip}], "recovery": {}}))
    node.frer.put_stream(ADMIN, "i2", FrerStreamSpec.model_validate(
        {"name": "i2", "identification": [{"ip": {**ip, "destination": "10.2.0.0/16", "destination_port": None}}],
         "recovery": {"algorithm": "match"}}))
    node.frer.delete_stream(ADMIN, "l1")
    incremental = maps_now(node)
    assert len([mask for mask in incremental["dpp_frer_ip_masks"].values() if any(mask)]) == 2
    assert node.frer._maps.held is not None
    node.frer._maps.held = None  # as after a refused put back: the next write reads the maps whole
    node.frer.reconcile()
    assert maps_now(node) == incremental


def test_an_identity_without_a_vlan_takes_frames_of_any_vlan_and_one_of_the_frames_vlan_wins(node):
    node.frer.put_stream(ADMIN, "any", listener("any"))
    node.frer.put_stream(ADMIN, "v7", FrerStreamSpec.model_validate({
        "name": "v7", "identification": [{"null": {"destination_mac": DMAC, "vlan": 7}}],
        "recovery": NEVER_RESET}))
    assert node.run(tagged(1)) == XDP_PASS, "untagged"
    assert node.run(in_vlan(5, 1)) == XDP_DROP, "VLAN 5: the same stream, a duplicate"
    assert node.run(in_vlan(7, 1)) == XDP_PASS, "VLAN 7: its own stream"
    assert passed(node, "any") == (1, 1) and passed(node, "v7") == (1, 0)


def test_an_ip_identity_without_a_vlan_takes_the_flows_frames_of_any_vlan(node):
    ip = {"source": "10.9.0.1", "destination": "10.9.0.2", "protocol": "udp", "destination_port": 5000}
    node.frer.put_stream(ADMIN, "flow", FrerStreamSpec.model_validate(
        {"name": "flow", "identification": [{"ip": ip}], "recovery": NEVER_RESET}))
    packet = bytes(IP(src="10.9.0.1", dst="10.9.0.2") / UDP(sport=4000, dport=5000) / (b"x" * 32))
    other = bytes(IP(src="10.9.0.1", dst="10.9.0.3") / UDP(sport=4000, dport=5000) / (b"x" * 32))
    assert [node.run(in_vlan(vlan, 3, payload=packet, ethertype=0x0800)) for vlan in (5, 9)] == [XDP_PASS, XDP_DROP]
    assert node.run(in_vlan(5, 3, payload=other, ethertype=0x0800)) == XDP_PASS
    assert passed(node, "flow") == (1, 1), "the other flow's frame is no stream's"


FLOW = bytes(IP(src="10.9.0.1", dst="10.9.0.2") / UDP(sport=4000, dport=5000) / (b"x" * 32))
IP_FLOW = {"source": "10.9.0.1", "destination": "10.9.0.2", "protocol": "udp", "destination_port": 5000}
VLANS = (None, 0, 5, 6)  # untagged, priority-tagged (VLAN id 0), VLAN 5, VLAN 6


def frame_in(vlan: Optional[int], seq: int) -> bytes:
    """An R-tagged frame of FLOW to DMAC, untagged (None) or with an 802.1Q tag of `vlan`."""
    if vlan is None:
        return bytes.fromhex(DMAC.replace(":", "")) + bytes(6) + struct.pack("!HHHH", RTAG_ETHERTYPE, 0, seq, 0x0800) + FLOW
    return in_vlan(vlan, seq, payload=FLOW, ethertype=0x0800)


# (tagged, vlan) of an identity -> the frames of VLANS it takes
TAKEN = {
    ("tagged", 5): [5],
    ("priority", None): [None, 0],
    ("all", None): [None, 0, 5, 6],
    (None, 5): [5],  # the default with a VLAN: tagged
    (None, None): [None, 0, 5, 6],  # the default without: all
}


@pytest.mark.parametrize("kind", ["null", "ip"])
def test_an_identity_s_tagged_says_which_vlans_frames_it_takes(node, kind):
    seq, took = 0, {}
    for case, (tagged, vlan) in enumerate(TAKEN):
        identity = {"destination_mac": DMAC} if kind == "null" else dict(IP_FLOW)
        identity.update({name: value for name, value in (("tagged", tagged), ("vlan", vlan)) if value is not None})
        name = f"s{case}"
        node.frer.put_stream(ADMIN, name, FrerStreamSpec.model_validate(
            {"name": name, "identification": [{kind: identity}], "recovery": NEVER_RESET}))
        took[tagged, vlan] = []
        for frame_vlan in VLANS:
            seq += 1  # each frame a new number: passed when it is the stream's
            before = passed(node, name)
            assert node.run(frame_in(frame_vlan, seq)) == XDP_PASS
            if passed(node, name) != before:
                took[tagged, vlan].append(frame_vlan)
        node.frer.delete_stream(ADMIN, name)
    assert took == TAKEN
