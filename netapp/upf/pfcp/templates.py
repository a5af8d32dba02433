"""The fast path of Session Establishment Requests. An SMF sends establishments of one shape per
policy, differing only in a few values (netapp.upf.pfcp.layout: the sequence number, the CP SEID,
the UE addresses, the gNB tunnels). Once the full path has established a request whose shape it then
meets again, the shape becomes a template: what the full path made of it -- the session's row, its
facts and map entries (netapp.upf.prepared), the response's bytes -- with holes for those values
and for the ones the UPF chooses (its SEID, TEIDs, URR slots; netapp.upf.stencil). A request of that
shape is then recognised by its bytes (on the event loop's thread, in place of decoding it) and
established by filling its values in (`Upf.establish_prepared`, on the writer's), after the checks
the full path makes on them: the association is the requesting peer's, TEIDs and slots are free,
each downlink UE address is no other session's and in no pool, each tunnel goes where
upf.peer_networks allows. Where one does not pass, the request goes the full way (decoded, read,
built), which refuses it with its cause; so does every request of another shape.

A template is made only where the full path's own reading shows it exact: requests with other
sentinel values in those places are decoded and read into the same rules but for those values
(netapp.upf.pfcp.rules), and the stencils are kept only if they give the full path's session, row,
entries and response back. Unusual sessions go the full way always: SDF filters, TEIDs or UE
addresses the SMF does not leave to the UPF (F-TEID without CHOOSE; CHV4), FARs that buffer or
duplicate, PDRs naming several URRs. Values that are equal in the template's first request (one UE
address in every PDR) must be equal in a request it serves, and those that differ must differ.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Optional, Sequence, Union

from pydantic import BaseModel

from netapp.upf.applier import compile_stored
from netapp.upf.compiler import Entries, Site
from netapp.upf.models import RuleError, Session
from netapp.upf.pfcp.codec import Message, MalformedMessage, Recent, decode, encode
from netapp.upf.pfcp.ies import IEType
from netapp.upf.pfcp.layout import ENCODERS, READERS, Layout, encode as encode_value, layout_of
from netapp.upf.pfcp.rules import read_rules
from netapp.upf.prepared import SessionStencil
from netapp.upf.sessions import Outcome
from netapp.upf.stencil import Stencil, punch

log = logging.getLogger("netapp.upf.pfcp")

Peer = tuple[str, int]
Respond = Callable[[int, Outcome], Message]  # (sequence number, outcome) -> the response (netapp.upf.pfcp.handlers)
Compile = Callable[[Session], Entries]
MAX_TEMPLATES = 64
MAX_LAYOUTS = 8  # per request length


class Template:
    """A shape of request and what the full path made of it, with holes. The values, by index: the
    request's (one per class of equal values, `classes`: place -> class), then the session's SEID,
    its TEIDs and its URRs' slots (`session`)."""

    def __init__(self, layout: Layout, classes: Sequence[int], kinds: Sequence[str], session: SessionStencil,
                 response: Stencil):
        self.layout, self.session = layout, session
        firsts = [classes.index(value) for value in range(max(classes) + 1)]  # each class's first place
        places = layout.places
        # what a request is read by, with the offsets at hand: each class's value from its first
        # place; the places that must hold what their class's first does; the classes of a kind,
        # which must differ (else the first request's would have been one class)
        reads = tuple((places[first].offset, places[first].end, places[first].kind) for first in firsts)
        same = tuple((place.offset, place.end, places[firsts[value]].offset)
                     for at, (place, value) in enumerate(zip(places, classes)) if at != firsts[value])
        of_kind: dict[str, list[tuple[int, int]]] = {}
        for first in firsts:
            of_kind.setdefault(places[first].kind, []).append((places[first].offset, places[first].end))
        apart = tuple(tuple(spans) for spans in of_kind.values() if len(spans) > 1)
        self.values: Callable[[bytes], Optional[list[Any]]] = _reader(reads, same, apart)
        # the response to the request of the values (all of them: the request's and the session's),
        # each encoded as PFCP carries it (layout.ENCODERS) as it is filled in
        self.response: Callable[[Sequence[Any]], bytes] = response.filler(  # type: ignore[assignment]
            {value: ENCODERS[kinds[value]] for value in response.holes})


class Templates:
    """The templates learnt from the full path (`establish_full`), and the fast path through them
    (`match`, `establish`). `upf`: the netapp.upf.sessions.Upf; `respond`: the full path's response
    to an outcome; `establish`: the full path (netapp.upf.pfcp.handlers)."""

    def __init__(self, upf: Any, establish: Callable[[Message, Peer], Outcome], respond: Respond,
                 compile: Optional[Compile] = None, site: Optional[Site] = None):
        self._upf, self._establish, self._respond = upf, establish, respond
        self._compile, self._site = compile, site
        self._layouts: dict[int, list[Layout]] = {}  # request length -> the layouts of its templates
        self._templates: Recent[tuple[Layout, bytes], Template] = Recent(MAX_TEMPLATES)
        self._seen: Recent[tuple[Layout, bytes], bool] = Recent()  # shapes met once (True) or not templated

    @classmethod
    def of(cls, handlers: Any) -> "Templates":
        """The templates of the endpoint's handlers (netapp.upf.pfcp.handlers), compiling the map
        entries for their UPF's applier when it compiles (netapp.upf.applier)."""
        site = getattr(handlers.upf.applier, "site", None)
        compile = functools.partial(compile_stored, site=site) if isinstance(site, Site) else None
        return cls(handlers.upf, handlers.establish, handlers.established, compile, site if compile else None)

    def __len__(self) -> int:
        return len(self._templates)

    def match(self, data: bytes) -> Optional[tuple[Template, list[Any]]]:
        """The template of the request's shape and the request's values; None: the full way."""
        for layout in self._layouts.get(len(data), ()):
            template = self._templates.get((layout, layout.shape(data)))
            if template is not None:
                values = template.values(data)
                return None if values is None else (template, values)
        return None

    def establish(self, template: Template, values: list[Any], data: bytes, peer: Peer) -> Union[bytes, Message]:
        """The request established from its template (its response's bytes), or the full way."""
        association = self._upf.associations.get(template.session.node_id)
        if association is not None and association.address == peer[0]:  # a peer acts on its own
            prepared = self._upf.establish_prepared(template.session, values)
            if prepared is not None:
                return template.response(prepared.values)
        return self.establish_full(decode(data), peer, data)

    def establish_full(self, request: Message, peer: Peer, data: bytes) -> Message:
        """The full path; its shape learnt once accepted (a template from its second request on)."""
        outcome = self._establish(request, peer)
        response = self._respond(request.seq, outcome)
        try:
            self._learn(data, outcome, response)
        except Exception:  # noqa: BLE001 - a template is an optimisation: the request stands without one
            log.exception("PFCP: no template could be made of an establishment")
        return response

    def _learn(self, data: bytes, outcome: Outcome, response: Message) -> None:
        if not _plain(outcome):  # never templated (make_template's first test): its layout not made, each time
            return
        layout = layout_of(data)
        if layout is None:
            return
        key = (layout, layout.shape(data))
        if self._templates.get(key) is not None:
            return
        if self._seen.get(key) is None:
            self._seen.put(key, True)  # once: a shape that never comes again costs no template
            return
        if not self._seen.get(key):
            return  # tried, not templated
        self._seen.put(key, False)
        template = make_template(layout, data, outcome, encode(response), self._respond, self._compile, self._site)
        if template is None:
            log.info("PFCP: an establishment shape met again is served by the full path (no exact template)")
            return
        layouts = self._layouts.setdefault(len(data), [])
        if layout not in layouts:
            if len(layouts) >= MAX_LAYOUTS:
                return
            layouts.append(layout)
        self._templates.put(key, template)


def make_template(layout: Layout, data: bytes, outcome: Outcome, response: bytes, respond: Respond,
                  compile: Optional[Compile], site: Optional[Site]) -> Optional[Template]:
    """The template of the request `data` the full path established (`outcome`, `response`); None
    where the session is unusual or the stencils would not give the full path's output back."""
    session = outcome.session
    if not _plain(outcome) or "seid" not in {place.kind for place in layout.places}:
        return None
    classes, paths, real = _request_classes(layout, data)
    kinds = [layout.places[classes.index(value)].kind for value in range(len(real))]
    ours = len(real)  # the index of the session's SEID, after the request's values
    teids = list(dict.fromkeys(fteid.teid for _, fteid in outcome.created))
    urr_ids = sorted(session.urr_slots)
    policers = [(qer_id, way) for qer_id, pair in sorted(session.qer_policers.items())
                for way, policer_id in enumerate(pair) if policer_id]
    paths += [[("seid",)]]
    paths += [[("pdrs", pdr_id, "pdi", "local_fteid", "teid") for pdr_id, fteid in outcome.created if fteid.teid == teid]
              for teid in teids]
    paths += [[("urr_slots", urr_id)] for urr_id in urr_ids]
    paths += [[("qer_policers", qer_id, way)] for qer_id, way in policers]
    kinds += ["seid", *["teid"] * len(teids), *["slot"] * (len(urr_ids) + len(policers))]
    real += [session.seid, *teids, *(session.urr_slots[urr_id] for urr_id in urr_ids)]
    real += [session.qer_policers[qer_id][way] for qer_id, way in policers]
    sentinels = [_sentinels(kinds, which) for which in (0, 1)]
    try:
        if _replaced(session, paths, real) != session or not _read_alike(layout, data, classes, sentinels):
            return None
        sessions = [*(_replaced(session, paths, each) for each in sentinels), session]
    except (AttributeError, KeyError, TypeError, ValueError, RuleError, MalformedMessage):
        return None
    values = [*sentinels, real]
    stencil = SessionStencil.cut(sessions, values, ours, len(teids), tuple(urr_ids), compile, site, len(policers))
    seq = kinds.index("seq")
    responses = [encode(respond(each[seq], _outcome(outcome, sessions[n], each[ours + 1 :]))) for n, each in
                 enumerate(sentinels)]
    made = punch([*responses, response], [[encode_value(kind, value) for kind, value in zip(kinds, each)]
                                          for each in values])
    if stencil is None or made is None:
        return None
    return Template(layout, classes, kinds, stencil, made)


def _reader(reads: Sequence[tuple[int, int, str]], same: Sequence[tuple[int, int, int]],
            apart: Sequence[Sequence[tuple[int, int]]]) -> Callable[[bytes], Optional[list[Any]]]:
    """A template's `values`: the request's values (`data` of the template's shape, each class's
    read from its first place, `reads`), or None if they are not equal where the template's were
    (`same`: a place and its class's first) and different where they were not (`apart`: the
    classes of a kind). Compiled into one function, the offsets written in (as netapp.upf.stencil
    compiles its shapes): a request's values are read on the event loop's thread for every one."""
    checks = [f"d[{start}:{end}] != d[{first}:{first + end - start}]" for start, end, first in same]
    checks += [f"len({{{', '.join(f'd[{start}:{end}]' for start, end in spans)}}}) != {len(spans)}" for spans in apart]
    read = [f"k[{index}](d[{start}:{end}])" if kind == "address" else f"int.from_bytes(d[{start}:{end}], 'big')"
            for index, (start, end, kind) in enumerate(reads)]  # READERS', an int's without a call of partial
    namespace: dict[str, Any] = {"k": [READERS[kind] for _, _, kind in reads]}
    test = f"    if {' or '.join(checks)}:\n        return None\n" if checks else ""
    exec(f"def values(d):\n{test}    return [{', '.join(read)}]", namespace)  # noqa: S102 - our own text
    return namespace["values"]


def _plain(outcome: Outcome) -> bool:
    """A session of the kinds the fast path takes: every F-TEID chosen by the UPF, no UE address
    assigned by it (CHV4), no SDF filters, no PDR naming several URRs, no FAR buffering or
    duplicating."""
    session = outcome.session
    fteids = [pdr.pdi.local_fteid for pdr in session.pdrs.values() if pdr.pdi.local_fteid is not None]
    return (not outcome.ue_created and len(fteids) == len(outcome.created)
            and not any(pdr.pdi.sdf_filters for pdr in session.pdrs.values())
            and not session.urr_sets and not session.sdf_slots and not session.punting())


def _request_classes(layout: Layout, data: bytes) -> tuple[list[int], list[list[tuple]], list[Any]]:
    """The request's places grouped into classes of equal values of one kind: place -> class; each
    class's paths in the session; each class's value."""
    classes, paths, values, firsts = [], [], [], {}
    for place, raw in zip(layout.places, layout.raw(data)):
        value = firsts.setdefault((place.kind, raw), len(values))
        if value == len(values):
            paths.append([])
            values.append(place.read(data))
        classes.append(value)
        if place.path is not None:
            paths[value].append(place.path)
    return classes, paths, values


def _sentinels(kinds: Sequence[str], which: int) -> list[Any]:
    """Values to find where they went: one set or the other (`which`), one per class, found nowhere
    else (those of the one set make the stencils, the other set's check them)."""
    values: list[Any] = []
    for index, kind in enumerate(kinds):
        if kind == "address":
            values.append(f"{240 + which}.{index // 256}.{index % 256}.1")
        elif kind == "seq":
            values.append((0xF1F101, 0xE1E101)[which] + index)
        else:
            values.append((0xF2F20001, 0xE2E20001)[which] + index)
    return values


def _replaced(model: Any, paths: Sequence[Sequence[tuple]], values: Sequence[Any]) -> Any:
    """`model` with each value at its class's paths (models and dicts copied on the way)."""
    for class_paths, value in zip(paths, values):
        for path in class_paths:
            model = _put(model, path, value)
    return model


def _put(model: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    key, rest = path[0], path[1:]
    if isinstance(model, BaseModel):
        return model.model_copy(update={key: _put(getattr(model, key), rest, value)})
    if isinstance(model, dict):
        return {**model, key: _put(model[key], rest, value)}
    if isinstance(model, tuple):
        return (*model[:key], _put(model[key], rest, value), *model[key + 1 :])
    raise TypeError(f"no {key!r} in {type(model).__name__}")


def _read_alike(layout: Layout, data: bytes, classes: Sequence[int], sentinels: Sequence[Sequence[Any]]) -> bool:
    """The full path's reading of the request with each set of sentinel values in its places --
    its F-SEID and its rules (netapp.upf.pfcp.rules) -- is its reading of `data` with those values
    at the places' paths, and nothing else changed."""
    request = decode(data)
    plans = read_rules(request.ies)
    fseid = request.ies.one(IEType.F_SEID)
    for values in sentinels:
        copy = bytearray(data)
        for place, value in zip(layout.places, classes):
            place.write(copy, values[value])
        other = decode(bytes(copy))
        expected = {table: plan.__class__(list(plan.creates), list(plan.updates), list(plan.removes))
                    for table, plan in plans.items()}
        for place, value in zip(layout.places, classes):
            if place.path is None or place.path[0] == "remote":
                continue
            creates = expected[place.path[0]].creates
            at = next(index for index, rule in enumerate(creates) if rule.id == place.path[1])  # type: ignore[attr-defined]
            creates[at] = _put(creates[at], place.path[2:], values[value])
        seid = next(value for place, value in zip(layout.places, classes) if place.kind == "seid")
        if read_rules(other.ies) != expected or other.ies.one(IEType.F_SEID).fields != {  # type: ignore[union-attr]
                **fseid.fields, "seid": values[seid]} or other.ies.one(IEType.NODE_ID) != request.ies.one(IEType.NODE_ID):  # type: ignore[union-attr]
            return False
    return True


def _outcome(outcome: Outcome, session: Session, teids: Sequence[int]) -> Outcome:
    """The outcome of the session of other values: its chosen F-TEIDs with those TEIDs, in the
    order they were chosen."""
    chosen = dict(zip(dict.fromkeys(fteid.teid for _, fteid in outcome.created), teids))
    created = tuple((pdr_id, fteid.model_copy(update={"teid": chosen[fteid.teid]})) for pdr_id, fteid in outcome.created)
    return Outcome(session, created, ())
