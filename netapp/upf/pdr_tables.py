"""The UPF's PDR tables as netapp.upf.applier writes them: an array of entries written as a hash map
is (`SlotTable`), a delta written with its undo (`write_delta`), a table made to hold exactly what
is wanted (`reconcile_table`), and the data path's own guard against an entry another session holds
(`refuse_held`). Keys are the compiler's (netapp.upf.compiler: a slot, (TEID, QFI), (network
instance, family, packed address)) until they are written."""

from __future__ import annotations

import errno
import functools
import ipaddress
from typing import Any, Callable, Optional

from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.tables import Table
from netapp.service.transaction import SiteChange
from netapp.upf.abi import DownlinkKey, PdrAction, PdrFlag, UplinkKey
from netapp.upf.compiler import Entries, words
from netapp.upf.models import RuleError
from netapp.upf.pfcp.ies import Cause, IEType
from netapp.upf.ways import Ways

_ENTRY = int(PdrFlag.ENTRY)  # an int: IntFlag's operators cost microseconds a change
_FLAGS_AT = PdrAction.flags.offset  # struct dpp_upf_pdr's flags byte


class SlotTable:
    """An array of PDR entries (dpp_upf_teids, dpp_upf_ue4) as write_delta writes a hash map: a
    deleted slot is zeroed (no DPP_UPF_PDR_ENTRY: empty)."""

    def __init__(self, table: Table):
        self._table = table
        self.name = table.name
        self.update = table.update
        self.items = table.items
        self.lookup = table.lookup
        self.first_held = table.first_held

    @property
    def max_entries(self) -> int:
        return self._table.max_entries

    def delete(self, keys: list[int]) -> None:
        self._table.update({key: PdrAction() for key in keys})


def write_delta(change: SiteChange, table: Table, before: dict, after: dict, key_type: Any, left: list[str]) -> None:
    """Entries new or changed first (a session never lacks a rule it keeps), then the gone ones.
    Each write's undo (also of a write refused half-way) puts back every entry it can, and names
    in `left` those it cannot."""
    changed = [key for key, value in after.items() if key not in before or bytes(before[key]) != bytes(value)]
    gone = [key for key in before if key not in after]
    if changed:
        # each key made a map key once (an array's slot is one already): a group adds some 64 at a time
        keys = changed if key_type is int else [map_key(key_type, key) for key in changed]
        writes = list(zip(keys, [after[key] for key in changed]))
        restore = [(written, before[key]) for written, key in zip(keys, changed) if key in before] if before else []
        added = [written for written, key in zip(keys, changed) if key not in before] if before else keys
        undo = functools.partial(_put_back, table, restore, added, left)
        change.write(lambda: table.update(writes), undo, undo)
    if gone:
        keys = [map_key(key_type, key) for key in gone]
        undo = functools.partial(_put_back, table, [(key, before[old]) for key, old in zip(keys, gone)], [], left)
        change.write(lambda: table.delete(keys), undo, undo)


def _put_back(table: Table, restore: list[tuple[Any, Any]], added: list[Any], left: list[str]) -> None:
    """Write `restore` back and delete `added` (one absent already is as wanted), every entry tried
    whatever the others do; those refused are named in `left`."""
    for key, exc in _each(table.update, restore):
        left.append(f"{table.name} {_tuple(key[0])}: not restored ({exc})")
    for key, exc in _each(table.delete, added):
        if exc.errno != errno.ENOENT:
            left.append(f"{table.name} {_tuple(key)}: not deleted ({exc})")


def _each(batch: Callable[[list[Any]], None], items: list[Any]) -> list[tuple[Any, DataplaneError]]:
    """`batch` over the items, past each one it refuses (a DataplaneError's `done` says which): the
    refused items with their errors."""
    refused = []
    while items:
        try:
            batch(items)
            return refused
        except DataplaneError as exc:
            done = min(getattr(exc, "done", 0), len(items) - 1)
            refused.append((items[done], exc))
            items = items[done + 1 :]
    return refused

def reconcile_table(table: Table, want: dict, key_type: Any, have: Optional[dict] = None) -> None:
    """The table holding exactly `want` (`have`: what it holds, if read already): what differs
    written, what `want` lacks deleted (an array's slot: emptied)."""
    if have is None:
        have = {compiler_key(key_type, key): value for key, value in table.items() if is_held(key_type, value)}
    table.update([(map_key(key_type, key), value) for key, value in want.items()
                  if key not in have or bytes(have[key]) != bytes(value)])
    table.delete([map_key(key_type, key) for key in have if key not in want])

def refuse_held(tables: list[tuple[Any, dict, dict, Any]]) -> None:
    """A PDR entry the change adds that the maps hold already is another session's (its packets would
    take this one's way): RuleError, nothing written. netapp.upf.sessions keeps TEIDs and UE
    addresses apart; this is the data path's own guard, one libdpp call per table added to (its
    lookups and the check of each value made there: `Table.first_held`)."""
    for table, was, now, key_type in tables:
        added = [key for key in now if key not in was] if was else list(now)
        if not added:
            continue
        keys = added if key_type is int else [map_key(key_type, key) for key in added]
        # an array's slot is held when marked so (`is_held`); a hash map's entry, when there
        at = table.first_held(keys, _FLAGS_AT, _ENTRY) if key_type is int else table.first_held(keys)
        if at < len(added):
            raise held_error((table.name, added[at]), "another session's")


def refuse_held_ways(ways: Ways, was: dict, now: dict) -> None:
    """`refuse_held` of the downlink entries dpp_upf_dl4 holds (its buckets read if not known yet)."""
    taken = ways.holding([key for key in now if key not in was])
    if taken:
        raise held_error(("dpp_upf_dl4", taken[0]), "another session's")


def shared_keys(desired: Entries, entries: Entries) -> list[tuple[str, Any]]:
    """The uplink and downlink keys of `entries` that `desired` has already (another session's)."""
    return [(f"dpp_upf_{table}", key) for table in ("uplink", "downlink")
            for key in getattr(entries, table) if key in getattr(desired, table)]


def held_error(entry: tuple[str, Any], whose: str) -> RuleError:
    name, key = entry
    ie_type = IEType.UE_IP_ADDRESS if name in ("dpp_upf_ue4", "dpp_upf_dl4", "dpp_upf_downlink") else IEType.F_TEID
    return RuleError(Cause.RULE_CREATION_MODIFICATION_FAILURE, f"the entry {name} {_shown(key)} is {whose}", ie_type)


def _shown(key: Any) -> str:
    """A compiler's key (a slot; (TEID, QFI); (instance, family, packed address)) for a message."""
    if isinstance(key, tuple) and len(key) == 3:
        instance, family, packed = key
        return f"(network instance {instance}, {ipaddress.ip_address(packed[: 4 if family == 4 else 16])})"
    return str(key)

def _tuple(key: Any) -> tuple:
    """A map key as the compiler's tuple (netapp.upf.compiler.UplinkKey, DownlinkKey; a slot)."""
    if isinstance(key, int):
        return (key,)
    if isinstance(key, UplinkKey):
        return (key.teid, key.qfi)
    return (key.net_instance, key.family, bytes(key.addr))


def is_held(key_type: Any, value: PdrAction) -> bool:
    """An entry of the table (every one of a hash map; of dpp_upf_teids, the slots marked so)."""
    return key_type is not int or bool(value.flags & _ENTRY)


def compiler_key(key_type: Any, key: Any) -> Any:
    """A key read from a table as the compiler's (a slot as it is)."""
    return key if key_type is int else _tuple(key)


def map_key(key_type: Any, key: Any) -> Any:
    if key_type is int:
        return key
    if key_type is UplinkKey:
        return UplinkKey(teid=key[0], qfi=key[1])
    instance, family, packed = key
    return DownlinkKey(net_instance=instance, family=family, addr=tuple(words(packed)))
