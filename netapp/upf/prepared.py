"""Sessions made from a stencil (netapp.upf.stencil): the fast path of session establishments
(netapp.upf.pfcp.templates). A `SessionStencil` is what the full path made of one request -- the
session's row (its JSON), what the UPF's tables read of it (its TEIDs, slots, downlink UE addresses,
tunnels), its map entries -- with holes for the values that differ from one request of its shape to
the next: those of the request (its CP SEID, UE addresses, gNB tunnels) and those the UPF chooses
(its SEID, TEIDs, URR slots, policer ids). `PreparedSession` is a session filled in from it: what the tables and
the applier read is at hand; anything else (its rules as models) is read from its JSON on first use,
as a session held in memory is (netapp.upf.held).

The values are given by index, each an int or an address's text (netapp.upf.pfcp.templates says
which index is which).
"""

from __future__ import annotations

import dataclasses
import socket
import sys
from ctypes import Structure
from typing import Any, Callable, Optional, Sequence

from netapp.upf.compiler import Entries, Site
from netapp.upf.models import Session
from netapp.upf.pools import canonical
from netapp.upf.stencil import Shape, Stencil, constant, punch, shape_of

# What the UPF's tables and appliers read of a new session, besides its SEID and Node ID: a
# session's own methods and attributes, filled in for a prepared one (`PreparedSession`).
FACTS = ("teids", "usage_slots", "urr_usage_slots", "ue_ipv4", "downlink_ues", "tunnels", "punting", "policer_ids")
ATTRIBUTES = ("urr_slots", "sdf_slots", "urr_sets", "qer_policers")
_ZEROS = bytes(12)


def _packed(value: Any) -> Any:
    """A value as the map entries hold it: an address packed into 16 bytes, an int as it is."""
    return socket.inet_pton(socket.AF_INET, value) + _ZEROS if isinstance(value, str) else value


@dataclasses.dataclass(frozen=True)
class EntryStencil:
    """One map entry with holes: its key (a tuple, `Shape`) and its value (a ctypes structure's
    bytes, with (offset, size, value index) holes; or, `value_type` None, a value of no holes, such
    as a policer's configuration)."""

    key: Shape
    value_type: Optional[type]
    value: Any
    holes: tuple[tuple[int, int, int], ...]
    # the value as its parts between the holes, each hole (value index, size) with the part after it:
    # filled by joining them (no bytearray copied and written into per entry)
    _first: bytes = dataclasses.field(init=False, repr=False, compare=False, default=b"")
    _rest: tuple[tuple[int, int, bytes], ...] = dataclasses.field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        if self.value_type is None:
            return
        ordered, rest, at = sorted(self.holes), [], 0
        for (offset, size, index), following in zip(ordered, [*ordered[1:], (len(self.value), 0, 0)]):
            if offset < at or following[0] < offset + size:
                raise ValueError(f"the holes of a {self.value_type.__name__} overlap: {self.holes}")
            rest.append((index, size, bytes(self.value[offset + size : following[0]])))
            at = offset + size
        object.__setattr__(self, "_first", bytes(self.value[: ordered[0][0] if ordered else len(self.value)]))
        object.__setattr__(self, "_rest", tuple(rest))

    def expression(self, addresses: frozenset[int], constants: list[Any]) -> str:
        """Python's text of `key: value` for a dict display, from the packed values `v` (those at
        `addresses` 16 bytes, the others ints), its constants appended to `constants` as `k[j]`:
        the value's parts joined with its holes' bytes, then copied into its structure once."""
        key = self.key.expression(constants)
        if self.value_type is None:
            return f"{key}: {constant(self.value, constants)}"
        out = [constant(self._first, constants)]
        for index, size, part in self._rest:
            out.append(f"v[{index}][:{size}]" if index in addresses else f"v[{index}].to_bytes({size}, {sys.byteorder!r})")
            out.append(constant(part, constants))
        made = f"{constant(self.value_type, constants)}.from_buffer_copy"
        return f"{key}: {made}(b''.join(({', '.join(out)},)))"


class EntriesStencil:
    """A session's map entries (netapp.upf.compiler.Entries) with holes, by table. `addresses`: the
    indexes of the values that are addresses (text, packed into 16 bytes for the entries; the
    others are ints). Compiled once into one function that packs the addresses and builds every
    table's dict in one display (as `Shape` is): filling it costs what writing the entries out
    would, not a call and a copy per entry and hole."""

    def __init__(self, tables: dict[str, tuple[EntryStencil, ...]], addresses: frozenset[int] = frozenset()):
        constants: list[Any] = [Entries, _packed]
        packing = "".join(f"v[{index}] = k[1](v[{index}]); " for index in sorted(addresses))
        displays = ", ".join(f"{table}={{{', '.join(stencil.expression(addresses, constants) for stencil in stencils)}}}"
                             for table, stencils in tables.items())
        namespace: dict[str, Any] = {"k": constants}
        exec(f"def fill(values):\n    v = [*values]; {packing}\n    return k[0]({displays})", namespace)  # noqa: S102 - our own text
        self.fill: Callable[[Sequence[Any]], Entries] = namespace["fill"]

    @classmethod
    def cut(cls, made: Sequence[Entries], values: Sequence[Sequence[Any]]) -> Optional["EntriesStencil"]:
        """The stencil of `made[0]`, the entries of a session of sentinel values `values[0]`; None
        unless it gives every `made[k]` from `values[k]` (an entry that is not a ctypes structure,
        a field that no value explains)."""
        packed = [[_packed(value) for value in each] for each in values]
        tables = {}
        for field in dataclasses.fields(Entries):
            tables_made = [getattr(entries, field.name) for entries in made]
            if any(len(table) != len(tables_made[0]) for table in tables_made):
                return None
            stencils = []
            for items in zip(*(table.items() for table in tables_made)):
                stencil = _entry_stencil([key for key, _ in items], [value for _, value in items], packed)
                if stencil is None:
                    return None
                stencils.append(stencil)
            tables[field.name] = tuple(stencils)
        stencil = cls(tables, frozenset(index for index, value in enumerate(values[0]) if isinstance(value, str)))
        filled = [stencil.fill(each) for each in values]
        return stencil if all(_same(one, other) for one, other in zip(filled, made)) else None


def _entry_stencil(keys: list[Any], values: list[Any], packed: list[list[Any]]) -> Optional[EntryStencil]:
    key = shape_of(keys, packed)
    if key is None:
        return None
    if not all(isinstance(value, Structure) for value in values):
        return EntryStencil(key, None, values[0], ()) if all(value == values[0] for value in values) else None
    value_type = type(values[0])
    holes = []
    for name, *_ in value_type._fields_:
        field = getattr(value_type, name)
        made = [bytes(value)[field.offset : field.offset + field.size] for value in values]
        if all(each == made[0] for each in made):
            continue
        index = next((index for index in range(len(packed[0])) if all(
            _encoded(each[index], field.size) == field_made for each, field_made in zip(packed, made))), None)
        if index is None:
            return None
        holes.append((field.offset, field.size, index))
    try:
        return EntryStencil(key, value_type, bytes(values[0]), tuple(holes))
    except ValueError:  # fields that share bytes: no stencil says them
        return None


def _encoded(value: Any, size: int) -> Optional[bytes]:
    """A packed value as a field of `size` bytes holds it; None if it cannot."""
    if isinstance(value, bytes):
        return value[:size] if size in (4, 16) else None
    return value.to_bytes(size, sys.byteorder) if 0 <= value < 1 << (8 * size) else None


def _same(one: Entries, other: Entries) -> bool:
    """The same entries: keys, order and bytes."""
    for field in dataclasses.fields(Entries):
        mine, theirs = getattr(one, field.name), getattr(other, field.name)
        if list(mine) != list(theirs) or [_bytes(value) for value in mine.values()] != [
                _bytes(value) for value in theirs.values()]:
            return False
    return True


def _bytes(value: Any) -> Any:
    """A ctypes structure's bytes; any other value as it is."""
    return bytes(value) if isinstance(value, Structure) else value


class SessionStencil:
    """A new session with holes: its row's JSON, its facts (`FACTS`, `ATTRIBUTES`) and, for the
    applier's `site`, its map entries. Its values: the request's (`seid` of them), then the
    session's SEID, its `teids` TEIDs, the slots of its URRs `urr_ids` and its `policers` policer ids
    (in that order); `node_id`: its association's."""

    def __init__(self, seid: int, teids: int, urr_ids: tuple[int, ...], node_id: str, json: Stencil,
                 facts: dict[str, Shape], entries: Optional[EntriesStencil], site: Optional[Site], policers: int = 0,
                 canonical_ues: bool = False):
        self.seid, self.teids, self.urr_ids, self.node_id = seid, teids, urr_ids, node_id
        self.policers = policers
        self.canonical_ues = canonical_ues  # its sessions' downlink UE addresses are written canonically
        self._entries, self._site = entries, site
        self._json = json.filler(dict.fromkeys(json.holes, str))  # the row's JSON of the values, each as its text
        # every fact of the values at once, in FACTS then ATTRIBUTES order: one call a session, not
        # one a fact asked (the tables and the applier ask most of them of every new session)
        constants: list[Any] = []
        shapes = ", ".join(facts[name].expression(constants) for name in (*FACTS, *ATTRIBUTES))
        self._facts = eval(f"lambda v: ({shapes},)", {"k": constants})  # noqa: S307 - our own text

    @classmethod
    def cut(cls, sessions: Sequence[Session], values: Sequence[Sequence[Any]], seid: int, teids: int,
            urr_ids: tuple[int, ...], compile: Optional[Callable[[Session], Entries]] = None,
            site: Optional[Site] = None, policers: int = 0) -> Optional["SessionStencil"]:
        """The stencil of `sessions[0]`, a session of sentinel values `values[0]`; None unless it
        gives every `sessions[k]` (its JSON, facts and, with `compile` for `site`, entries) from
        `values[k]`."""
        json = punch([session.stored_json() for session in sessions], [[str(value) for value in each]
                                                                            for each in values])
        facts = {}
        for name in (*FACTS, *ATTRIBUTES):
            made = [getattr(session, name) for session in sessions]
            facts[name] = shape_of([each() if callable(each) else each for each in made], values)
        entries = EntriesStencil.cut([compile(session) for session in sessions], values) if compile else None
        if json is None or None in facts.values() or (compile is not None and entries is None):
            return None
        return cls(seid, teids, urr_ids, sessions[0].node_id, json, facts, entries, site,  # type: ignore[arg-type]
                   policers, _canonical_ues(sessions))

    def session(self, request: Sequence[Any], seid: int, teids: Sequence[int], slots: Sequence[int]) -> "PreparedSession":
        """The session of the request's values and those the UPF chose (its entries filled for the
        site, if any)."""
        values = [*request, seid, *teids, *slots]
        body = self._json(values)
        entries = self._entries.fill(values) if self._entries is not None else None
        made = PreparedSession(seid, self.node_id, body, self._facts(values), values, entries, self._site)
        made.canonical_ues = self.canonical_ues
        return made


def _canonical_ues(sessions: Sequence[Session]) -> bool:
    """Whether the sessions' downlink UE addresses are written as netapp.upf.pools' tables key them
    (`canonical`), and so are those of every session the stencil makes: an address it fills in is
    a request's value, which the fast path reads canonically (netapp.upf.pfcp.layout: inet_ntoa),
    and one it holds is these sessions' own. The pools then take them as they are (`Pools.check`)."""
    return all(canonical(address) == address for session in sessions for _, _, address, _ in session.downlink_ues())


class PreparedSession:
    """A session made from a stencil: a Session to those that read it (netapp.upf.sessions, pools,
    slots, the appliers), its facts (`facts`: FACTS then ATTRIBUTES, filled in), the rest from its JSON."""

    def __init__(self, seid: int, node_id: str, body: str, facts: Sequence[Any], values: Sequence[Any],
                 entries: Optional[Entries], site: Optional[Site]):
        self.seid, self.node_id = seid, node_id
        self._body, self.values = body, values
        (self._teids, self._usage_slots, self._urr_usage_slots, self._ue_ipv4, self._downlink_ues, self._tunnels,
         self._punting, self._policer_ids, self.urr_slots, self.sdf_slots, self.urr_sets, self.qer_policers) = facts
        self._entries, self._site = entries, site
        self._model: Optional[Session] = None
        self.canonical_ues = False  # its downlink UE addresses are canonical (its stencil's `canonical_ues`)

    def stored_json(self) -> str:
        return self._body

    def model_dump_json(self) -> str:
        return self.model().model_dump_json()

    def entries_for(self, site: Site) -> Optional[Entries]:
        """Its map entries, made for `site` (None: for another, or none made: compile it)."""
        return self._entries if site is self._site else None

    def teids(self) -> set[int]:
        return self._teids

    def usage_slots(self) -> list[int]:
        return self._usage_slots

    def urr_usage_slots(self) -> dict[int, list[int]]:
        return self._urr_usage_slots

    def ue_ipv4(self) -> set[str]:
        return self._ue_ipv4

    def downlink_ues(self) -> list[tuple[int, Optional[str], str, bool]]:
        return self._downlink_ues

    def tunnels(self) -> list[tuple[int, str, Any]]:
        return self._tunnels

    def punting(self) -> dict[int, Any]:
        return self._punting

    def policer_ids(self) -> list[int]:
        return self._policer_ids

    def model(self) -> Session:
        """The session as models, read from its JSON once."""
        if self._model is None:
            self._model = Session.model_validate_json(self._body)
        return self._model

    def __getattr__(self, name: str) -> Any:
        """Anything else a Session has (its rules, ...): the model's."""
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.model(), name)
