"""TEST DOUBLE: FRER's service over a fake data plane (netapp.dataplane.fake.FakeDpp), for the tests
of the store, the service, the REST API and the CLI, which need no kernel (the real data plane's:
tests/frer/test_service_pipeline.py). FRER's calls beyond plain tables (the recovery slots read
under their lock, dpp_frer_tx with its egress program, the gate) are TableFrerCalls's, over the
fake's dicts. Interfaces are names in a dict (`INTERFACES`), not the kernel's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from netapp.dataplane.abi import MAPS
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.frer.service import Frer
from netapp.frer import abi as frer_abi
from netapp.frer.table import FrerMaps, TableFrerCalls
from netapp.service.store import Store

INTERFACES = {"pa1": 11, "pa2": 12, "la0": 13, "pb1": 21, "lb0": 22}
FRER_MAPS = tuple(name for name in frer_abi.MAPS if name != "dpp_frer_tx")  # tx: `groups`


class FakeFrerNode:
    """A store and a fake data plane's FRER maps, and the Frer service over them; `restart` opens
    the store and the service anew, over the same maps (pinned) or new ones (`lost=True`)."""

    def __init__(self, path: Path, store: Optional[Store] = None):
        self.path = path
        self.store = store or Store.open(path, synchronous="NORMAL")
        self._own_store = store is None
        self.dpp = FakeDpp()
        self.open_service()

    def open_service(self) -> None:
        dataplane = Dataplane(self.dpp)
        self.frer_calls = TableFrerCalls(dataplane.table)
        self.maps = FrerMaps(dataplane.table, self.frer_calls)
        self.frer = Frer(self.store, self.maps, ifindex=INTERFACES.get, ifname=self.ifname)

    @staticmethod
    def ifname(ifindex: int) -> Optional[str]:
        return next((name for name, index in INTERFACES.items() if index == ifindex), None)

    def restart(self, lost: bool = False) -> None:
        if self._own_store:
            self.store.close()
            self.store = Store.open(self.path, synchronous="NORMAL")
        if lost:
            self.dpp = FakeDpp()
        groups, kinds = self.frer_calls.groups, self.frer_calls.kinds
        self.open_service()
        if not lost:  # dpp_frer_tx and the gate are pinned with the rest
            self.frer_calls.groups, self.frer_calls.kinds = groups, kinds
        self.frer.reconcile()

    def close(self) -> None:
        if self._own_store:
            self.store.close()

    def snapshot(self) -> dict[str, Any]:
        """Every FRER map's raw entries, and the groups: to compare before and after."""
        return {**{name: dict(self.dpp.tables.get(name, {})) for name in FRER_MAPS},
                "dpp_frer_tx": {handle: dict(group) for handle, group in self.frer_calls.groups.items()},
                "gate": self.frer_calls.kinds}

    def entries(self, name: str) -> Any:
        """An array's written slots (index -> value); a hash map's (key, value) pairs."""
        if MAPS[name].array:
            return self.dpp.entries(name)
        return list(Dataplane(self.dpp).table(name).items())
