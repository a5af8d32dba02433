"""Fixtures of the UPF tests: a store in tmp_path, an applier that records and can refuse, the PFCP
endpoint on an ephemeral loopback port, and an SMF speaking the other codec."""

from __future__ import annotations

from typing import Any, Iterator, Optional

import pytest

from netapp.service.store import Store
from netapp.upf.models import Session
from netapp.upf.peers import Destinations, SmfPeers
from netapp.upf.pfcp import codec, rules
from netapp.upf.pfcp.server import PfcpServer
from netapp.upf.pools import Pools
from netapp.upf.sessions import Upf
from tests.upf.smf import Smf, node_id, recovery

N3 = "127.0.0.2"


class RecordingApplier:
    """Records every (old, new) it is given; refuses them all while `fail` is set. It counts on
    `urr_slots` usage slots (set before the Upf is made, as `Endpoint.restart` does)."""

    urr_slots = 0

    def __init__(self) -> None:
        self.calls: list[tuple[Optional[Session], Optional[Session]]] = []
        self.fail = False

    def apply(self, old: Optional[Session], new: Optional[Session]) -> None:
        if self.fail:
            raise RuntimeError("the data path is full")
        self.calls.append((old, new))


class Endpoint:
    """A UPF (store, applier, tables) and its PFCP server, with the allow-lists if given (None:
    anyone, anywhere) and the service's lock (`rules_lock`) if given; `restart()` makes a new one over the same store file, as a restarted service
    would (with `peers`: with these pfcp.peers)."""

    def __init__(self, path: Any, peers: Optional[SmfPeers] = None, destinations: Optional[Destinations] = None,
                 ue_pools: Optional[dict[str, str]] = None, rules_lock: Any = None):
        self.path, self.ue_pools, self.rules_lock = path, ue_pools, rules_lock
        self.applier = RecordingApplier()
        self.peers, self.destinations = peers, destinations
        self._open()

    def _open(self) -> None:
        self.store = Store.open(self.path, synchronous="NORMAL")
        self.upf = Upf(self.store, self.applier, n3_ipv4=N3, destinations=self.destinations,
                       ue_pools=Pools(self.ue_pools), rules_lock=self.rules_lock)
        self.server = PfcpServer(self.upf, "127.0.0.1", 0, peers=self.peers)
        self.server.start()

    def close(self) -> None:
        self.server.close()
        self.store.close()

    def restart(self, peers: Optional[SmfPeers] = None) -> None:
        self.close()
        self.peers = peers or self.peers
        self._open()

    def rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every UPF row in the store, for comparing before and after."""
        return {
            table: self.store.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("upf_associations", "upf_sessions", "upf_counters")
        }


@pytest.fixture
def fresh_caches(monkeypatch) -> None:
    """Empty caches of decoded IEs and read rules for one test. A test that checks what they share
    needs them: in the shared ones, an entry an earlier test left is found by the first decode and
    can be the oldest put, forgotten among that decode's own entries before the second."""
    monkeypatch.setattr(codec, "_SEEN", codec.Recent())
    for name in ("_CREATED", "_SHAPES", "_PARTS"):
        monkeypatch.setattr(rules, name, codec.Recent())


@pytest.fixture
def endpoint(tmp_path) -> Iterator[Endpoint]:
    endpoint = Endpoint(tmp_path / "netapp.db")
    try:
        yield endpoint
    finally:
        endpoint.close()


@pytest.fixture
def smf(endpoint) -> Iterator[Smf]:
    client = Smf(endpoint.server.address)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def associated(endpoint, smf) -> Smf:
    """An SMF with an association (node id 10.0.0.1)."""
    response = smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])
    assert response[1][1]["Data"].get_val() == 1
    return smf
