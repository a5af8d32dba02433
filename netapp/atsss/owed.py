"""What a refused put back was to carry (netapp.atsss.table.Moved: the MP_SEQ and DCCP numbers the
data path had taken in the entries a change deleted, emptied or wrote anew), kept in the store until
the maps take the reconcile that carries it (Atsss._changing, Atsss.start): a restart in between
then writes those entries back past the numbers the UEs have seen, not from 0.

Kept as the entries' bytes (the ABI's structs, one source of truth: netapp.atsss.abi), with their
layouts (each field's name, offset and size): bytes of another build's layout (an upgrade between
the refusal and the start), or that cannot be read, are not carried, and the log says so."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Optional

from netapp.atsss.abi import Path, Session
from netapp.atsss.table import Moved
from netapp.service.store import Store, StoreError

log = logging.getLogger(__name__)

SETTING = "atsss_owed"


def layouts() -> list[list[list]]:
    """Each kept struct's fields as (name, offset, size): what bytes kept by another build must match."""
    return [[[name, getattr(struct, name).offset, getattr(struct, name).size] for name, *_ in struct._fields_]
            for struct in (Session, Path)]


def keep_owed(store: Store, moved: Moved, now: datetime) -> None:
    """`moved` kept as owed, in a transaction of its own (the change's is over); a store refusing
    it is logged: the numbers are then kept in memory only, until the heal or a restart."""
    kept = {
        "layouts": layouts(),
        "sessions": {raw.hex(): bytes(session).hex() for raw, session in moved.sessions.items()},
        "paths": {str(slot): bytes(path).hex() for slot, path in moved.paths.items()},
    }
    try:
        with store.transaction():
            store.put_setting(SETTING, kept, now)
    except StoreError as exc:
        log.error("the ATSSS numbers owed since a refused change could not be stored (%s): a restart "
                  "before the heal writes those entries from 0", exc)


def owed_of(store: Store) -> Optional[Moved]:
    """What is kept as owed, None when nothing is; nothing to carry (but a reconcile still owed)
    when it was kept by a build whose entries are laid out otherwise, or cannot be read."""
    kept = store.get_setting(SETTING)
    if kept is None:
        return None
    if kept.get("layouts") != layouts():
        log.warning("the ATSSS numbers owed since a refused change were kept by a build whose entries are "
                    "laid out otherwise: not carried")
        return Moved()
    try:
        return Moved({bytes.fromhex(raw): Session.from_buffer_copy(bytes.fromhex(value))
                      for raw, value in kept["sessions"].items()},
                     {int(slot): Path.from_buffer_copy(bytes.fromhex(value)) for slot, value in kept["paths"].items()})
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        log.warning("the ATSSS numbers owed since a refused change cannot be read (%r): not carried", exc)
        return Moved()


def forget_owed(store: Store, now: datetime) -> None:
    """Nothing owed any more (the maps took the reconcile), in a transaction of its own; a store
    refusing it is logged: the next start carries the kept numbers again, into entries that are
    then live, which a sync leaves to the data path (AtsssTables.carry)."""
    try:
        with store.transaction():
            store.put_setting(SETTING, None, now)
    except StoreError as exc:
        log.error("the ATSSS numbers owed since a refused change could not be forgotten (%s)", exc)
