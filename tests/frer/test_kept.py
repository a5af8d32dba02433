"""What FRER's service keeps between changes (netapp/frer/service.py: each stored row parsed once,
netapp.frer.store.StreamCache, and each parsed stream's parts compiled once, StreamParts): a change
parses and compiles only the streams it changes, however many are stored, and what it compiles is
still the store's, after a refused change, a transaction rolled back and a row changed behind the
service's back, as a restart that lost the maps rebuilds it. Over the fake data plane
(tests/frer/fake.py), as tests/frer/test_service.py: what is tested is which streams a change reads
and compiles, not how the kernel's maps take them (tests/frer/test_service_kernel.py)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable

import pytest

from netapp.dataplane.binding import DataplaneError
from netapp.frer import service as frer_service
from netapp.frer import store as stored
from netapp.frer.models import FrerStreamSpec, StreamStatus
from netapp.intents.errors import IntentError
from netapp.service.contract import DataplaneUnavailable
from tests.frer.test_service import ADMIN, put

STORED = 40


def listener(number: int, port: int = 5000) -> FrerStreamSpec:
    """A recovered stream of its own IP flow (its destination address), delivered on la0."""
    ip = {"destination": f"10.2.{number >> 8}.{number & 0xFF}", "protocol": "udp", "destination_port": port}
    return FrerStreamSpec.model_validate({"name": f"l{number}", "identification": [{"ip": ip}],
                                          "recovery": {"deliver_interface": "la0"}})


def counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """Every call of `module.name` from here on, by its first argument."""
    calls: list[Any] = []
    real: Callable[..., Any] = getattr(module, name)

    def counting(first: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(first)
        return real(first, *args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_a_change_parses_and_compiles_only_the_streams_it_changes(node, monkeypatch):
    for number in range(STORED):
        put(node, listener(number))
    parsed = counted(monkeypatch, stored, "_status")
    compiled = counted(monkeypatch, frer_service, "stream_parts")
    put(node, listener(STORED))
    put(node, listener(3, port=5001))  # replaced
    node.frer.delete_stream(ADMIN, "l7")
    assert parsed == [], "every row read is one the service wrote or read before"
    assert [stream.handle for stream in compiled] == [STORED + 1, 4], "the created and the replaced stream only"
    parsed.clear()
    compiled.clear()
    node.restart(lost=True)
    assert len(parsed) == len(compiled) == STORED, "a restart parses and compiles every stored stream"


def test_what_is_kept_follows_the_store(node, monkeypatch):
    for number in range(4):
        put(node, listener(number))
    with pytest.raises(IntentError):
        put(node, listener(1).model_copy(update={"name": "l9"}))  # l1's identity
    ip = node.maps._ip
    real_update, refused = ip.update, []

    def update_once(entries: Any) -> None:
        """The maps refuse the first write of an IP identity."""
        if not refused:
            refused.append(entries)
            raise DataplaneError(28, "dpp_frer_ip", "no space")
        real_update(entries)

    monkeypatch.setattr(ip, "update", update_once)
    with pytest.raises(DataplaneUnavailable):
        put(node, listener(10))
    with node.store.transaction():  # l1 changed behind the service's back: the store is what counts
        moved = StreamStatus(**{**node.frer.get_stream(ADMIN, "l1").model_dump(), "revision": 2,
                                "updated_at": datetime.now(timezone.utc)})
        moved.identification = listener(11).identification
        stored.save_stream(node.store, moved)
    with pytest.raises(RuntimeError), node.store.transaction():  # a change rolled back after its row
        stored.save_stream(node.store, StreamStatus(**dict(listener(12)), tenant="operator", handle=99,
                                                    revision=1, updated_at=datetime.now(timezone.utc)))
        raise RuntimeError("rolled back")

    put(node, listener(10))  # refused before: not kept
    put(node, listener(12))  # rolled back: not kept
    put(node, listener(1).model_copy(update={"name": "l13"}))  # l1's old identity is free
    with pytest.raises(IntentError) as taken:
        put(node, listener(11).model_copy(update={"name": "l14"}))
    assert "stream 'l1'" in str(taken.value.problems)
    changed = node.snapshot()
    node.restart(lost=True)
    assert node.snapshot() == changed, "the maps a change left are those the store rebuilds"
