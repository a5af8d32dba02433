"""The bounds of MEC 015 flow filters (netapp.atsss.flows): what a filter, a session and a tenant may
take of the shared classifier, the refusals naming the field at fault, the weighted mode refused
where every path's weight is 0, and one lock order with the intents' transactions."""

from __future__ import annotations

import threading
from typing import Any

from netapp.atsss import store as stored
from netapp.atsss.models import SteeringMode
from netapp.atsss.service import Atsss
from netapp.service.function_rules import FunctionRules
from netapp.service.store import Store
from netapp.service.transaction import Transactions
from tests.atsss.test_flows import ADMIN, UE, VIDEO, node, rule_machinery, session, steer_flows  # noqa: F401
from tests.utils.service import grant_subnets

# Far more than either change takes on a loaded machine (only a deadlock reaches it), twice within
# the suite's timeout per test.
JOIN_SECONDS = 30


def clear(atsss: Atsss) -> None:
    """The test's MTS sessions and sessions out of the maps (the instance is the module's)."""
    for tenant, mts_id, _, _ in stored.load_mts(atsss.store):
        atsss.unsteer(tenant, mts_id)
    for found in atsss.list_sessions(ADMIN):
        atsss.delete_session(ADMIN, f"{found.tenant}/{found.name}")


def rules_of(atsss: Atsss) -> dict:
    assert atsss.rules is not None
    return dict(atsss.rules.rules)


# --- lock order -----------------------------------------------------------------------------------


class NoticedLock:
    """The service's lock, telling (`wanted`) when the MTS thread asks for it."""

    def __init__(self, lock: Any, wanted: threading.Event):
        self._lock, self._wanted = lock, wanted

    def __enter__(self) -> None:
        if threading.current_thread().name == "mts":
            self._wanted.set()
        self._lock.acquire()

    def __exit__(self, *_: Any) -> None:
        self._lock.release()


def test_an_mts_write_racing_an_intents_transaction_does_not_deadlock(node, node_ns, tmp_path):  # noqa: F811
    """The intents' transaction holds the service's lock and opens the store's only once the MTS
    write has asked for the service's lock: in the order the intents take them, the MTS write waits
    holding nothing, in the other it waits holding the store and neither ever goes on."""
    store = Store.open(tmp_path / "race.db", synchronous="NORMAL")  # not closed if deadlocked: its lock is held
    grant_subnets(store, {"tenant-a": (UE, ())})
    state = rule_machinery(node)
    wanted = threading.Event()
    state.lock = NoticedLock(state.lock, wanted)  # type: ignore[assignment]
    atsss = Atsss.start(store, node.table, netns=node_ns, rules=FunctionRules(state, "atsss"))
    atsss.create_session(ADMIN, "tenant-a/ue7", session())
    mts = threading.Thread(name="mts", daemon=True, target=lambda: steer_flows(
        atsss, "video", [VIDEO], SteeringMode.ACTIVE_STANDBY, tenant="tenant-a"))

    def store_once_mts_waits() -> Store:  # between the intents' lock and their store transaction
        mts.start()
        assert wanted.wait(JOIN_SECONDS)
        return store

    intents = Transactions(state.exclusive, store_once_mts_waits, lambda: None)
    writer = threading.Thread(daemon=True, target=lambda: intents.change(ADMIN, state.rule_change, lambda _: None))
    writer.start()
    writer.join(JOIN_SECONDS)
    mts.join(JOIN_SECONDS)

    deadlocked = writer.is_alive() or mts.is_alive()
    assert not deadlocked, "the intents' transaction and the MTS write wait on each other"
    assert len(rules_of(atsss)) == 1
    clear(atsss)
    store.close()
