"""What a session's row holds (netapp.upf.models.Session.stored_json): only the fields that differ
from their defaults, so that a transaction writes fewer pages of the WAL. Read back, it is the
session that was made; a row written whole, as every row was before, reads the same at start."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from netapp.service.store import Store
from netapp.upf.models import Session
from netapp.upf.pfcp.codec import decode
from netapp.upf.pfcp.handlers import Handlers
from netapp.upf.sessions import Upf
from netapp.upf.store import Association
from tests.upf.conftest import N3
from tests.upf.smf import Smf, establishment_ies

PEER = ("10.0.0.1", 8805)


def _upf(store: Store) -> Upf:
    return Upf(store, n3_ipv4=N3)


@pytest.fixture
def store(tmp_path):
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    try:
        yield store
    finally:
        store.close()


def _established(store: Store) -> Upf:
    """A UPF over `store` with two sessions, made the full way: one with SDF filters, one without."""
    upf = _upf(store)
    upf.setup_association(Association(node_id="10.0.0.1", address=PEER[0], port=PEER[1], recovery_time_stamp=1))
    handlers = Handlers(upf, N3, N3)
    for cp_seid, sdf in ((7, True), (8, False)):
        request = Smf.build(Smf.__new__(Smf), "PFCPSessionEstablishmentReq", establishment_ies(cp_seid, sdf),
                            seid=0, seq=cp_seid)
        response = handlers.establishment(decode(request), PEER)
        assert response.ies.one(19)["cause"] == 1, "Request accepted"
    return upf


def _rows(store: Store) -> dict[int, str]:
    return dict(store.execute("SELECT seid, body FROM upf_sessions").fetchall())


def _defaults_left_in(model: BaseModel, written: dict[str, Any], path: str = "") -> list[str]:
    """The fields of `written` (a model's JSON, parsed) whose value is their field's default, at any
    depth (models in fields, in dicts of models, in tuples of models)."""
    found = []
    for name, value in written.items():
        field = type(model).model_fields[name]
        held = getattr(model, name)
        if held == field.get_default(call_default_factory=True):
            found.append(f"{path}{name}")
        for key, inner in _models_in(held):
            found += _defaults_left_in(inner, _at(value, key), f"{path}{name}.{key}.")
    return found


def _models_in(value: Any) -> list[tuple[Any, BaseModel]]:
    if isinstance(value, BaseModel):
        return [("", value)]
    if isinstance(value, dict):
        return [(key, inner) for key, inner in value.items() if isinstance(inner, BaseModel)]
    if isinstance(value, tuple):
        return [(index, inner) for index, inner in enumerate(value) if isinstance(inner, BaseModel)]
    return []


def _at(written: Any, key: Any) -> Any:
    if key == "":
        return written
    return written[str(key)] if isinstance(written, dict) else written[key]


def test_a_row_holds_no_default_and_reads_back_as_the_session(store):
    upf = _established(store)
    rows = _rows(store)
    assert len(rows) == 2
    for seid, body in rows.items():
        session = upf.sessions[seid]
        assert Session.model_validate_json(body) == session
        assert _defaults_left_in(session, json.loads(body)) == []
        whole = session.model_dump_json()
        assert len(body) < 0.7 * len(whole), f"{len(body)} bytes stored, {len(whole)} whole"


def test_rows_written_whole_are_read_as_before_at_start(store):
    """A store whose rows hold every field (the form written before) starts with the same sessions."""
    held = _established(store).sessions
    sessions = {seid: held[seid] for seid in held}
    with store.transaction():
        for seid, session in sessions.items():
            store.execute("UPDATE upf_sessions SET body = ? WHERE seid = ?", (session.model_dump_json(), seid))
    assert all('"ipv6":null' in body for body in _rows(store).values()), "the rows hold every field"
    restarted = _upf(store)
    assert {seid: restarted.sessions[seid] for seid in restarted.sessions} == sessions


# A row leaves out every field at its default, so a default is part of what every stored row means:
# changed, the rows written before read back as something else. The record below is each default as
# it was when the rows were written; the test fails on a changed or unrecorded default.
RECORDED_DEFAULTS = Path(__file__).with_name("stored_defaults.json")


def _annotations(annotation: Any):
    yield annotation
    for argument in typing.get_args(annotation):
        yield from _annotations(argument)


def _stored_models() -> list[type[BaseModel]]:
    """Session and every model its fields hold, however nested (Optional, dict, tuple)."""
    found: list[type[BaseModel]] = []
    pending: list[type[BaseModel]] = [Session]
    while pending:
        model = pending.pop()
        if model in found:
            continue
        found.append(model)
        for field in model.model_fields.values():
            pending += [each for each in _annotations(field.annotation)
                        if isinstance(each, type) and issubclass(each, BaseModel)]
    return found


def _defaults() -> dict[str, str]:
    """Model.field -> repr of its default, for every field of the stored models that has one."""
    defaults = {}
    for model in _stored_models():
        for name, field in model.model_fields.items():
            if field.default is not PydanticUndefined:
                defaults[f"{model.__name__}.{name}"] = repr(field.default)
            elif field.default_factory is not None:
                defaults[f"{model.__name__}.{name}"] = repr(field.default_factory())
    return defaults


def test_no_default_of_a_stored_field_changes_without_a_migration():
    recorded = json.loads(RECORDED_DEFAULTS.read_text())
    current = _defaults()
    changed = {name: (recorded[name], value) for name, value in current.items()
               if name in recorded and recorded[name] != value}
    assert not changed, (
        f"defaults changed (recorded, now): {changed}. Stored session rows leave out fields at their "
        "defaults, so rows written before now read differently: add a store migration "
        "(netapp/service/schema.py) that writes the old value into the rows that lack the field, "
        f"then record the new default in {RECORDED_DEFAULTS.name}")
    unrecorded = sorted(set(current) - set(recorded))
    assert not unrecorded, (
        f"fields with a default not in {RECORDED_DEFAULTS.name}: {unrecorded}; record them (rows "
        "written before the field existed read back with that default)")
