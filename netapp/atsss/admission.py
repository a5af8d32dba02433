"""What an ATSSS session's change must pass before it is written (netapp.atsss.service): its UE and
subflows no other session's, weights and interfaces its modes can run, and the path slots its paths
are given."""

from __future__ import annotations

from typing import Optional

from netapp.atsss import store as stored
from netapp.atsss.abi import MAX_PATHS, paired_path_slots
from netapp.atsss.models import (
    AccessType,
    AtsssPath,
    AtsssSession,
    AtsssSessionSpec,
    SessionDefinition,
    SteeringMode,
    redundant_problem,
)
from netapp.service.contract import Conflict, DataplaneFull, InvalidInput
from netapp.service.store import Store


def path_identity(path: AtsssPath) -> tuple:
    """What makes a path the same path across a change: its subflow (addresses, ports) and access.
    The rest (up, RTT, weight, MACs...) is what its slot's words say in place. Addresses as their
    family and number (equal exactly when the addresses are; local and peer are of one family),
    the access as its text: each poll keys every path by it (readings.PathKey), and 20,000 keys
    of addresses made text (stored.subflow_of), or hashed as address objects, cost 3-6 times
    what they do of numbers."""
    return path.local.version, int(path.local), int(path.peer), path.local_port, path.peer_port, path.access.value


def check_ue(store: Store, tenant: str, spec: SessionDefinition, old: Optional[AtsssSession]) -> None:
    """Conflict when another session holds the UE, or when the session moves off a UE an MTS
    session steers."""
    holder = stored.session_of_ue(store, str(spec.ue))
    if holder is not None and (old is None or holder != (old.tenant, old.name)):
        whose = f"session {holder[1]!r}" if holder[0] == tenant else "a session of another tenant"
        raise Conflict(f"UE {spec.ue} has an ATSSS session already ({whose}): a UE's downlink has one scheduler",
                       field="ue")
    steering = steered_by(old) if old is not None and old.ue != spec.ue else None
    if steering is not None and old is not None:
        raise Conflict(f"MTS session {steering!r} steers UE {old.ue}: delete it before moving the session",
                       field="ue")


def check_subflows(store: Store, tenant: str, spec: SessionDefinition, old: Optional[AtsssSession]) -> None:
    """Conflict naming the path whose subflow is another session's path: a subflow's uplink
    packets are found by its addresses and ports alone (dpp_atsss_uplink), so a second session
    of them would take the first one's uplink (maybe another tenant's: whose is not said)."""
    subflows = [stored.subflow_of(path) for path in spec.paths]
    holders = stored.subflow_holders(store, subflows)
    for i, subflow in enumerate(subflows):
        holder = holders.get(subflow)
        if holder is not None and (old is None or holder != (old.tenant, old.name)):
            whose = f"session {holder[1]!r}" if holder[0] == tenant else "a session of another tenant"
            local, peer, local_port, peer_port = subflow
            raise Conflict(f"paths[{i}]: the subflow {local} port {local_port} - {peer} port {peer_port} is a path "
                           f"of {whose} already: its uplink packets reach one session", field=f"paths[{i}]")


def check_weights(paths: list[AtsssPath], modes: set[SteeringMode], field: str, whose: str) -> None:
    """InvalidInput naming `field` when one of `modes` is weighted and every path's weight is 0:
    the data path would drop each frame of it as if every path were down."""
    if SteeringMode.WEIGHTED in modes and not any(path.weight for path in paths):
        why = f"{whose}weighted mode needs a path of weight above 0: every weight is 0"
        raise InvalidInput(f"{field}: {why}", field=field, reason=why, allowed="a path of weight 1 or more")


def metered_first(paths: list[AtsssPath]) -> Optional[int]:
    """The index of the first non-3GPP path that a 3GPP (metered) path comes before, None when the
    unmetered paths come first: low cost runs active-standby over the paths in their order."""
    metered = [path.access is AccessType.THREE_GPP for path in paths]
    return next((index for index, path in enumerate(metered) if not path and any(metered[:index])), None)


def check_low_cost_order(spec: SessionDefinition, old: Optional[AtsssSession]) -> None:
    """InvalidInput naming paths when an MTS session in low cost steers the session (its UE's whole
    downlink, or flows of it) and `spec` puts a metered path first: its order was checked when the
    MTS session was written (netapp.atsss.mts.check_low_cost), and the data path takes it as is."""
    low_cost = [mts_id for mts_id, mode in steering_modes(old).items() if mode is SteeringMode.ACTIVE_STANDBY]
    index = metered_first(spec.paths) if low_cost else None
    if index is not None:
        why = (f"MTS session {low_cost[0]!r} runs the UE in low cost (mtsMode 0), active-standby over the paths "
               f"in their order: paths[{index}] (non-3GPP) comes after a 3GPP (metered) path")
        raise InvalidInput(f"paths: {why}", field="paths", reason=why,
                           allowed="the non-3GPP paths first, or delete the MTS session (/mts/v1/mts_sessions) first")


def steering_modes(old: Optional[AtsssSession]) -> dict[str, SteeringMode]:
    """The mode each MTS session steering the session runs (its whole downlink's, its flows')."""
    if old is None:
        return {}
    whole = {old.mts_session: old.effective_mode} if old.mts_session is not None else {}
    return {**whole, **old.mts_flows}


def check_interfaces(paths: list[AtsssPath]) -> None:
    """InvalidInput naming the first path that cannot carry a redundant copy (models.
    redundant_problem): the session runs redundant through its MTS session's mode, which its
    definition's own check does not see."""
    problem = redundant_problem(paths)
    if problem is not None:
        field, why = problem
        raise InvalidInput(f"{field}: the session runs redundant (its MTS session's mode): {why}", field=field)


def check_redundant(session: AtsssSession, field: str) -> None:
    """InvalidInput naming `field` (the caller's name of the mode) when `session`'s paths cannot
    run redundant (models.redundant_problem)."""
    problem = redundant_problem(session.paths)
    if problem is not None:
        path_field, why = problem
        why = f"ATSSS session {session.name!r}'s {path_field}: {why} (/api/v1/atsss/sessions)"
        raise InvalidInput(f"{field}: {why}", field=field, reason=why)


def tenant_session_of_ue(store: Store, tenant: str, ue: str) -> Optional[AtsssSession]:
    """The tenant's session of `ue`; None when `ue` has none, or another tenant's."""
    owner = stored.session_of_ue(store, ue)
    return stored.stored_session(store, *owner) if owner is not None and owner[0] == tenant else None


def session_to_steer(store: Store, tenant: str, ue: str, field: str) -> AtsssSession:
    """The tenant's session of `ue`, which an MTS session is to steer; InvalidInput naming `field`
    (the caller's name of the UE) when the tenant has none."""
    session = tenant_session_of_ue(store, tenant, ue)
    if session is None:
        raise InvalidInput(f"{field}: tenant {tenant!r} has no ATSSS session of UE {ue}: create one with its "
                           "paths first (/api/v1/atsss/sessions)", field=field)
    return session


def steered_by(session: AtsssSession) -> Optional[str]:
    """An MTS session steering the session's UE (its whole downlink, or flows of it), None when none."""
    return session.mts_session or next(iter(session.mts_flows), None)


def runs_in(spec: AtsssSessionSpec, old: Optional[AtsssSession]) -> set[SteeringMode]:
    """The modes the data path will run the session in: its MTS session's, if one steers it,
    and those of the MTS sessions with flow filters of its UE."""
    whole = old.effective_mode if old is not None and old.mts_session is not None else spec.mode
    return {whole, *(old.mts_flows.values() if old is not None else ())}


# A path slot a change emptied is written for another path only after a wait for the programs' runs
# (netapp.atsss.table.AtsssMaps.retired_slots), a grace period under the service's lock: a new path
# passes over such slots while they are at most this many, so that a create after a delete (the
# store's lowest free pair is the one the delete freed) waits for none; beyond, it takes the lowest
# free, and its write's one wait frees them all (one grace period every PASSED_OVER / 4 creates
# after a delete of a session of four paths, at worst).
PASSED_OVER = 256


def slots_for(store: Store, spec: AtsssSessionSpec, old: Optional[AtsssSession],
              retired: frozenset[int] = frozenset()) -> list[int]:
    """The path slots of `spec`'s paths: a path of `old` kept in its slot wherever `spec` puts
    it, matched by identity (path_identity: its subflow and access), not by position, so that
    a body that only reorders the paths moves no path's DCCP numbers or counts; a new path the
    slot of a path of `old` it replaces (`replaced_slots`), then a free slot; a new session's
    paths a free pair first (paired_slots). Free slots `retired` (a change emptied them, no wait
    since) are passed over while there are others and they are at most PASSED_OVER."""
    held = {path_identity(path): slot for path, slot in zip(old.paths, old.slots)} if old is not None else {}
    kept = [held.pop(path_identity(path), None) for path in spec.paths]
    given = replaced_slots(spec.paths, kept, old, set(held.values()))
    count = given.count(None)
    avoid = retired if len(retired) <= PASSED_OVER else frozenset()
    fresh = iter(paired_slots(store, count, avoid) if old is None else free_slots(store, count, avoid))
    return [slot if slot is not None else next(fresh) for slot in given]


def replaced_slots(paths: list[AtsssPath], kept: list[Optional[int]], old: Optional[AtsssSession],
                   dropped: set[int]) -> list[Optional[int]]:
    """`kept` with each new path (None) given a slot of `dropped` (the slots of `old`'s paths the
    change leaves), that of the path of its subflow first, then the others in `old`'s order; None
    where none is left. So a session whose path is replaced keeps its pair of path slots (2s - 1,
    2s), which the downlink requests with the session's line (nf/atsss/index.h,
    atsss_touch_paths): a replacement given the lowest free slot left its session half-paired for
    good (the session keeps its slot, a change being stored in place). A slot of the same subflow
    (another access) is stored in place and its DCCP numbers go on, on the subflow the UE's receiver
    keeps; another subflow's is written anew, once no packet can still send on the path it held
    (netapp.atsss.reclaim.SlotReclaim), and only where the session has another path up meanwhile
    (`another_up`)."""
    if old is None or not dropped:
        return list(kept)
    subflows = {stored.subflow_of(path): slot for path, slot in zip(old.paths, old.slots) if slot in dropped}
    given = list(kept)
    for index, path in enumerate(paths):
        slot = subflows.get(stored.subflow_of(path)) if given[index] is None else None
        if slot in dropped:
            given[index] = slot
            dropped = dropped - {slot}
    rest = iter([slot for slot in old.slots if slot in dropped and another_up(old, slot)])
    return [slot if slot is not None else next(rest, None) for slot in given]


def another_up(session: AtsssSession, slot: int) -> bool:
    """Whether a path of `session` other than that of `slot` is up: the session runs on it while
    the slot is written anew for another subflow (the wait, netapp.atsss.reclaim). A session with
    none would find no path up through the wait: its new path takes a free slot instead, up at
    once, its pair of slots left."""
    return any(path.up for path, held in zip(session.paths, session.slots) if held != slot)


def paired_slots(store: Store, count: int, avoid: frozenset[int] = frozenset()) -> list[int]:
    """`count` free path slots for a new session: its first two the lowest free pair (stored.
    free_pair: slots 2s - 1 and 2s), the rest the lowest free others, so that the index gives the
    session slot s (netapp.atsss.index, 6.) and the downlink requests its first two paths' lines
    with the session's (nf/atsss/index.h, atsss_touch_paths); the lowest free slots when no pair of
    a session slot is free. Not for a changed session: it keeps its session slot (a change is
    stored in place), so its new paths take the slots of the paths they replace (replaced_slots),
    then the lowest free ones. A pair with a slot of `avoid` only when no other pair is free (its
    write then waits), the others none of `avoid` while there are enough others."""
    pair = (stored.free_pair(store, avoid) or stored.free_pair(store)) if count else None
    if pair is None:
        return free_slots(store, count, avoid)
    first = list(paired_path_slots(pair))[:count]
    return first + free_slots(store, count - len(first), avoid, taken=frozenset(first))


def free_slots(store: Store, count: int, avoid: frozenset[int] = frozenset(),
               taken: frozenset[int] = frozenset()) -> list[int]:
    """`count` free path slots, none of `avoid` while there are enough others, none of `taken` (given
    already by this change); DataplaneFull when the node has fewer."""
    if count <= 0:
        return []
    slots = stored.free_slots(store, count, avoid | taken) or stored.free_slots(store, count, taken)
    if slots is None:
        raise DataplaneFull(f"the node's {MAX_PATHS - 1} ATSSS path slots cannot hold {count} more paths",
                            field="paths")
    return slots
