"""The slots of dpp_atsss_flow_state the node gives MTS sessions with flow filters in round-robin or
weighted (netapp.atsss.flows.STATEFUL_MODES): the scheduler state of their flows, which their rules
name (nf/atsss/flows.h). Stored with the sessions (netapp.atsss.store, atsss_mts_states), so that a
restart's rules name the slots the pinned maps' rules did.

A session is given a fresh slot each time it is written, so that a replaced session's flows start
afresh, zeroed in the map before its rules name it (its own again, zeroed, when no other is free). Never a slot freed since the last wait for the
programs' runs: a run that read a rule naming it before the rule was taken out could still move the
new holder's state (another tenant's, maybe); the wait, when one is needed, makes every slot freed
before it free. After a restart none is pending: its reconcile's rules came far later than any run
of the old ones."""

from __future__ import annotations

from typing import Optional

from netapp.atsss import store as stored
from netapp.atsss.abi import MAX_FLOW_STATES
from netapp.atsss.flows import STATEFUL_MODES
from netapp.atsss.models import SteeringMode
from netapp.atsss.table import AtsssMaps
from netapp.service.contract import DataplaneFull
from netapp.service.store import Store


class FlowStates:
    """The flow state slots of one node's MTS sessions; `maps`: the pipeline's (None: only stored)."""

    def __init__(self, store: Store, maps: Optional[AtsssMaps]):
        self._store = store
        self._maps = maps
        self._retired: set[int] = set()  # freed since the last wait for the programs' runs

    def give(self, tenant: str, mts_id: str, mode: Optional[SteeringMode], field: str) -> int:
        """The slot for the MTS session's flows in `mode` (None: it has no flow filters), 0 when the
        mode keeps no state; its earlier slot freed (retire it once its rules are out). In the
        caller's transaction. DataplaneFull naming `field` (the mode) when every slot is held."""
        slot = stored.free_state_slot_of(self._store) if mode in STATEFUL_MODES else 0
        earlier = stored.free_state_slot(self._store, tenant, mts_id)
        if slot is None and not earlier:
            raise DataplaneFull(f"{field}: the node's {MAX_FLOW_STATES - 1} scheduler states of MTS sessions with flow "
                                "filters in round-robin or weighted are all held: delete one, or ask another mode",
                                field=field)
        slot = earlier if slot is None else slot
        if not slot:
            return 0
        stored.hold_state_slot(self._store, slot, tenant, mts_id)
        if self._maps is not None:
            if slot in self._retired:
                self._maps.wait_readers()
                self._retired.clear()
            self._maps.reset_flow_state(slot)
        return slot

    def retire(self, slot: int, given: int = 0) -> None:
        """A slot whose rules are out of the maps (but `given`, given again): free once the programs'
        runs are waited for."""
        if slot and slot != given:
            self._retired.add(slot)
