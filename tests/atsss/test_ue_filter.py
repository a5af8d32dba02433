"""The UE filter (dpp_atsss_ues) kept by a count of sessions per bit: sessions put through the
service into the maps of the downlink program in the kernel (xdp_atsss.bpf.o), two UEs whose
addresses hash to one bit found by the ABI's hash; deleting one leaves the bit to the other, whose
packets the program still steers (BPF_PROG_TEST_RUN), and a delete reads no other session."""

from __future__ import annotations

import ipaddress
from ctypes import c_uint32
from typing import Any, Iterator

import pytest

from netapp.atsss.abi import ue_filter_bit
from netapp.atsss.models import AtsssSessionSpec
from netapp.atsss.service import Atsss
from netapp.atsss.table import AtsssMaps, address_words
from netapp.service.contract import Principal, Scope
from netapp.service.store import Store
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
from tests.atsss.atsss import XDP_TX, AtsssProgram, delete_every_session, ethernet, ue_packet
from tests.utils.object_tables import ObjectTables

ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
CAROL = Principal("carol", frozenset({Scope.READ, Scope.INTENTS_WRITE}))
POOL = ipaddress.ip_network("10.80.0.0/16")


def bit_of(ue: str) -> int:
    return ue_filter_bit(address_words(ipaddress.ip_address(ue)))


def colliding_pair() -> tuple[str, str]:
    """Two addresses of the pool whose hashes are one bit of the filter."""
    seen: dict[int, str] = {}
    for address in POOL.hosts():
        bit = bit_of(str(address))
        if bit in seen:
            return seen[bit], str(address)
        seen[bit] = str(address)
    raise AssertionError("no two addresses of the pool share a bit")


def session(name: str, ue: str, n: int) -> AtsssSessionSpec:
    path: dict[str, Any] = {"access": "3GPP", "local": "192.0.2.1", "peer": f"198.51.{n // 250}.{n % 250 + 1}",
                            "local_port": 5001, "peer_port": 6001, "source_mac": "02:00:00:00:aa:01",
                            "next_hop_mac": "02:00:00:00:bb:01"}
    return AtsssSessionSpec.model_validate({"name": name, "ue": ue, "mode": "round_robin", "paths": [path]})


class CountingItems:
    """A table whose walks over every entry are counted (what an O(sessions) delete would do)."""

    def __init__(self, table: Any):
        self._table, self.walks = table, 0

    def items(self):
        self.walks += 1
        return self._table.items()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


@pytest.fixture
def node(atsss: AtsssProgram, tmp_path, node_ns) -> Iterator[tuple[Atsss, CountingItems]]:
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    TenantService(lambda: store).put_tenant(ADMIN, "carol", TenantSpec.model_validate({"traffic": [{"dst": str(POOL)}]}))
    tables = ObjectTables(atsss.obj).table
    counted = CountingItems(tables("dpp_atsss_sessions"))
    service = Atsss(store, AtsssMaps(lambda name: counted if name == "dpp_atsss_sessions" else tables(name)),
                    netns=node_ns)
    try:
        yield service, counted
    finally:
        delete_every_session(service, ADMIN)
        store.close()


def filter_bit_set(atsss: AtsssProgram, ue: str) -> bool:
    bit = bit_of(ue)
    return bool(int(ObjectTables(atsss.obj).table("dpp_atsss_ues").get(c_uint32(bit // 64))) >> (bit % 64) & 1)


def test_a_bit_two_sessions_share_is_cleared_when_the_last_of_them_goes(node, atsss):
    service, _ = node
    first, second = colliding_pair()
    service.create_session(CAROL, "first", session("first", first, 1))
    service.create_session(CAROL, "second", session("second", second, 2))

    service.delete_session(CAROL, "first")
    assert filter_bit_set(atsss, second), "the other session still has the bit"
    assert atsss.run(ethernet(ue_packet(second)))[0] == XDP_TX, "its packets still steered"
    service.delete_session(CAROL, "second")
    assert not filter_bit_set(atsss, second)


def test_a_delete_reads_no_other_session(node, atsss):
    service, counted = node
    for n in range(40):
        service.create_session(CAROL, f"ue{n}", session(f"ue{n}", str(POOL[n + 1]), n))
    walks = counted.walks
    for n in range(0, 40, 2):
        service.delete_session(CAROL, f"ue{n}")
    assert counted.walks == walks, "no walk over the sessions map to delete"
    assert walks <= 2, "the map read whole once by the index at start (its sessions to move in), once for the counts"
    assert [filter_bit_set(atsss, str(POOL[n + 1])) for n in range(6)] == [False, True] * 3
