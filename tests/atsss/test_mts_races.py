"""MEC 015 MTS sessions changed while another change of theirs is under way, interleaved at a
chosen read with no sleep (tests/utils/interleave.py), over ATSSS's service on a pinned pipeline's
maps: a PUT whose session a DELETE takes away after the PUT found it answers 404 and brings nothing
back, in the store or the maps; of two DELETEs of one session the later answers 404; a GET whose
session is deleted after it found it answers what it found (not a 500); and a POST is checked
against its UE's ATSSS session as the write finds it, not as an earlier read did. Each of these
failed while the handlers looked the sessions up outside the service's lock and wrote under it
(the GET: read the session twice)."""

from __future__ import annotations

import ipaddress
from typing import Any, Callable

import pytest
from fastapi import Response
from starlette.requests import Request

from netapp.atsss import mts
from netapp.atsss import store as stored
from netapp.atsss.abi import Mode
from netapp.atsss.index import SessionIndex
from netapp.atsss.service import Atsss
from netapp.atsss.table import session_key
from netapp.dataplane.facade import Dataplane
from netapp.service.contract import InvalidInput, NotFound, Principal, Scope
from tests.atsss.test_flows import UE, atsss, node, session  # noqa: F401 - atsss and node: the fixtures
from tests.utils.interleave import SecondChange, calling_back

CAROL = Principal("tenant-a", frozenset({Scope.READ, Scope.INTENTS_WRITE}))


def mts_body(mode: int) -> mts.MtsSessionInfo:
    return mts.MtsSessionInfo.model_validate({"appInsId": "app-1", "requestType": 1, "flowFilter": [{"dstIp": UE}],
                                              "qosD": {}, "mtsMode": mode, "trafficDirection": "00"})


def post(atsss: Atsss, mode: int) -> str:
    """An MTS session of `mode` steering the UE's whole downlink, as POST /mts/v1/mts_sessions makes it."""
    request = Request({"type": "http", "root_path": "", "headers": []})
    created = mts.mts_session_post(request, Response(), atsss, CAROL, mts_body(mode))
    assert created.sessionId is not None
    return created.sessionId


def delete(atsss: Atsss, mts_id: str) -> None:
    mts.mts_session_delete(atsss, CAROL, mts_id)


def interleaved(atsss: Atsss, monkeypatch, read: str, second: Callable[[], Any]) -> SecondChange:
    """`second` started at the first change's first call of the store's `read`, in place of the
    service's lock."""
    change = SecondChange(atsss._lock, second)
    atsss._lock = change
    monkeypatch.setattr(stored, read, calling_back(getattr(stored, read), change.at_read))
    return change


def kernel_mode(dp: Dataplane) -> Mode:
    """The mode the data path runs the UE's session in."""
    value = SessionIndex(dp.table).get(session_key(ipaddress.ip_address(UE)))
    assert value is not None
    return Mode(value.mode)


def test_a_put_of_a_session_deleted_after_it_was_found_answers_404_and_brings_nothing_back(node, atsss, monkeypatch):
    """The PUT finds the session, then a DELETE takes it away before the PUT writes: the PUT's
    write, under the lock, finds it gone. Checked outside the lock, the PUT wrote it back (200): a
    session deleted (204) steering its UE again, in the store and the maps."""
    atsss.create_session(CAROL, "ue7", session())
    mts_id = post(atsss, mts.LOW_LATENCY)
    assert kernel_mode(node) is Mode.SMALLEST_DELAY
    second = interleaved(atsss, monkeypatch, "load_mts", lambda: delete(atsss, mts_id))

    with pytest.raises(NotFound):
        mts.mts_session_put(atsss, CAROL, mts_id, mts_body(mts.HIGH_THROUGHPUT))
    second.join()

    assert stored.load_mts(atsss.store) == []
    assert atsss.get_session(CAROL, "ue7").mts_session is None
    assert kernel_mode(node) is Mode.ROUND_ROBIN, "the session's own mode, no MTS session's"


def test_of_two_deletes_of_one_session_the_later_answers_404(node, atsss, monkeypatch):
    """Both find the session; the one that takes the lock second finds nothing left to delete
    (answered from the look-up outside the lock, it was a 204 too)."""
    atsss.create_session(CAROL, "ue7", session())
    mts_id = post(atsss, mts.HIGH_THROUGHPUT)
    second = interleaved(atsss, monkeypatch, "load_mts", lambda: delete(atsss, mts_id))

    with pytest.raises(NotFound):
        delete(atsss, mts_id)
    second.join()

    assert stored.load_mts(atsss.store) == []
    assert kernel_mode(node) is Mode.ROUND_ROBIN


def test_a_get_of_a_session_deleted_after_it_was_found_answers_what_it_found(atsss, monkeypatch):
    """The GET reads the session once: deleted after that read, it still answers it as it was then
    (its second read found none and failed an assertion: a 500). The DELETE runs at the GET's read,
    in its thread: a GET takes no lock to wait on."""
    atsss.create_session(CAROL, "ue7", session())
    mts_id = post(atsss, mts.HIGH_THROUGHPUT)
    deleted: list[str] = []

    def delete_once() -> None:
        if not deleted:
            deleted.append(mts_id)
            delete(atsss, mts_id)

    monkeypatch.setattr(stored, "load_mts", calling_back(stored.load_mts, delete_once))

    found = mts.mts_session_get(atsss, CAROL, mts_id)

    assert (deleted, found.sessionId, found.mtsMode) == ([mts_id], mts_id, mts.HIGH_THROUGHPUT)
    assert stored.load_mts(atsss.store) == []


def test_a_post_is_checked_against_the_ues_session_as_its_write_finds_it(node, atsss, monkeypatch):
    """Low cost runs active-standby over the session's paths in their order, the unmetered first.
    The UE's session is created (the metered CELL first) after the POST's first look found none: the
    POST, which checks and writes under one lock, finds none (400) and steers nothing. Read outside
    the lock, the look found no session, so nothing to check, and the write then steered the new
    session in low cost over the metered path."""
    second = interleaved(atsss, monkeypatch, "session_of_ue",
                         lambda: atsss.create_session(CAROL, "ue7", session()))

    with pytest.raises(InvalidInput) as refused:
        post(atsss, mts.LOW_COST)
    second.join()

    assert refused.value.field == "flowFilter[0].dstIp"
    assert atsss.get_session(CAROL, "ue7").mts_session is None
    assert stored.load_mts(atsss.store) == []
    assert kernel_mode(node) is Mode.ROUND_ROBIN
