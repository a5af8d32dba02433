"""The slots of dpp_atsss_flow_state the node gives MTS sessions with flow filters in round-robin or
weighted (netapp.atsss.flows.STATEFUL_MODES): the scheduler state of their flows, which their rules
name (nf/atsss/flows.h). Stored with the sessions (netapp.atsss.store, atsss_mts_states), so that a
restart's rules name the slots the pinned maps' rules did.

A session is given a fresh slot each time it is written, so that a replaced session's flows start
afresh, zeroed in the map before its rules name it (its own again, zeroed, when no other is free).
A slot freed (retired) since the last wait for the programs' runs is given only when no other is
free, after such a wait: a run that read a rule naming it before the rule was taken out could still
move the new holder's state (another tenant's, maybe); the wait makes every slot freed before it
free. The wait holds the service's locks for a grace period, so the lowest slot that needs none
goes first. After a restart none is pending: its reconcile's rules came far later than any run of
the old ones."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from netapp.atsss import store as stored
from netapp.atsss.abi import MAX_FLOW_STATES, RULE_MODE_BITS
from netapp.atsss.flows import STATEFUL_MODES, Rules, stored_rules
from netapp.atsss.models import SteeringMode
from netapp.atsss.table import AtsssMaps
from netapp.dataplane.abi import Action
from netapp.dataplane.errors import DataplaneError
from netapp.service.contract import DataplaneFull, DataplaneUnavailable
from netapp.service.store import Store

if TYPE_CHECKING:
    from netapp.dataplane.facade import Dataplane

log = logging.getLogger(__name__)


class FlowStates:
    """The flow state slots of one node's MTS sessions; `maps`: the pipeline's (None: only stored)."""

    def __init__(self, store: Store, maps: Optional[AtsssMaps]):
        self._store = store
        self._maps = maps
        self._retired: set[int] = set()  # freed since the last wait for the programs' runs
        # Every slot below it is held or retired, so the search for a free one starts there: the
        # retired ones (thousands between two waits) are not walked again at each give.
        self._search_from = 1

    def give(self, tenant: str, mts_id: str, mode: Optional[SteeringMode], field: str) -> int:
        """The slot for the MTS session's flows in `mode` (None: it has no flow filters), 0 when the
        mode keeps no state; its earlier slot freed (`free`). In the caller's transaction, whose
        failure must retire the slot given (`retire`). DataplaneFull naming `field` (the mode) when
        every slot is held; DataplaneUnavailable naming it when the map refuses the slot's zeroing."""
        slot = self._free_slot(field) if mode in STATEFUL_MODES else 0
        earlier = self.free(tenant, mts_id)
        if slot is None and not earlier:
            raise DataplaneFull(f"{field}: the node's {MAX_FLOW_STATES - 1} scheduler states of MTS sessions with flow "
                                "filters in round-robin or weighted are all held: delete one, or ask another mode",
                                field=field)
        if slot is None:  # its own again: no other session's rule names it
            slot = earlier
            self._retired.discard(slot)
        if not slot:
            return 0
        stored.hold_state_slot(self._store, slot, tenant, mts_id)
        if self._maps is not None:
            self._write(self._maps.reset_flow_states, [slot], field=field)
        return slot

    def free(self, tenant: str, mts_id: str) -> int:
        """The MTS session's slot freed and retired (its rules taken out in the caller's change):
        that slot, 0 when it held none. In the caller's transaction."""
        slot = stored.free_state_slot(self._store, tenant, mts_id)
        self.retire(slot)
        return slot

    def retire(self, slot: int) -> None:
        """A slot that rules may have named, not to be given before the programs' runs are waited for."""
        if slot:
            self._retired.add(slot)

    def _free_slot(self, field: str) -> Optional[int]:
        """The lowest free slot not retired; when only retired ones are free, the lowest of them once
        the programs' runs are waited for; None when every one is held."""
        for slot in stored.free_state_slots(self._store, self._search_from):
            if slot not in self._retired:
                self._search_from = slot  # held from now on, or retired if the caller's change fails
                return slot
        lowest = next(stored.free_state_slots(self._store), None)
        if lowest is not None:
            if self._maps is not None:
                self._write(self._maps.wait_readers, field=field)
            self._retired.clear()
            self._search_from = lowest
        return lowest

    @staticmethod
    def _write(call: Callable[..., None], *args: list[int], field: str) -> None:
        """`call` on the maps; its refusal a DataplaneUnavailable naming `field`, as the other
        writes of ATSSS's maps are (the caller's transaction rolls back)."""
        try:
            call(*args)
        except DataplaneError as exc:
            raise DataplaneUnavailable(f"{field}: the data plane refused the MTS session's flow state: {exc}",
                                       field=field) from exc


@contextmanager
def undone_on_failure(store: Store) -> Iterator[list[Callable[[], None]]]:
    """The store's transaction of a change of ATSSS's sessions (an ATSSS session's, an MTS
    session's), and the undos of its writes of the maps, appended in order and run backwards when
    it fails, its commit too: the store then holds what it held, and so must the maps (no session
    the API says does not exist in the data path, no rule naming a flow state slot the store gives
    no session). An undo failing is logged and the others run: the caller is told the change's
    failure, not the undo's."""
    undos: list[Callable[[], None]] = []
    try:
        with store.transaction():
            yield undos
    except BaseException:
        for undo in reversed(undos):
            _run_undo(undo)
        raise


def _run_undo(undo: Callable[[], None]) -> None:
    try:
        undo()
    except Exception:
        log.exception("an ATSSS change's write of the maps could not be undone: a restart reconciles them")


def stored_rules_afresh(store: Store, dataplane: Optional["Dataplane"]) -> Rules:
    """The stored MTS sessions' rules (flows.stored_rules), for the service's start-up reconcile
    (NetAppService.load_function_rules), once every flow state slot that no rule of the pinned maps
    names is zeroed, in one write: the slots the store does not hold, and those it holds whose rules
    the reconcile writes (migration 15 gave slots the maps' rules never named; a store the maps did
    not follow) start afresh before the rules name them, while the slots the maps' rules name keep
    their flows' running state over the restart. The map refusing: DataplaneUnavailable, the start's."""
    if dataplane is not None:
        named = {arg >> RULE_MODE_BITS for arg in dataplane.installed_args(Action.ATSSS)}
        try:
            AtsssMaps(dataplane.table).reset_flow_states(slot for slot in range(1, MAX_FLOW_STATES) if slot not in named)
        except DataplaneError as exc:
            raise DataplaneUnavailable(f"ATSSS's flow states could not be zeroed: {exc}") from exc
    return stored_rules(store)
