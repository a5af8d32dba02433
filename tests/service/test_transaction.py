"""The transaction (netapp.service.transaction) over a kind of map change of its own: a new table
that gives its steps, its map write and its undo gets the store's all-or-nothing without code of its
own in the transaction."""

from __future__ import annotations

import contextlib
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from netapp.service import store as store_module
from netapp.service.contract import Conflict, DataplaneUnavailable, Principal, Scope, ServiceError
from netapp.service.store import Store, StoreError
from netapp.service.transaction import Part, Transactions

WHO = Principal("tenant-a", frozenset({Scope.ADMIN}), "test")
NOW = datetime(2024, 1, 1, tzinfo=timezone.utc)


class TableChange:
    """A table of its own: `maps` is what the kernel would hold; steps are (key, value) writes."""

    def __init__(self, maps: dict[str, int], refuse: bool = False):
        self.maps = maps
        self.refuse = refuse
        self.steps: list[tuple[str, int]] = []
        self.events: list[str] = []

    def put(self, key: str, value: int) -> None:
        self.steps.append((key, value))

    def mark(self) -> int:
        return len(self.steps)

    def check(self, part: Part[Any], mark: int) -> None:
        if any(value < 0 for _, value in self.steps[mark:]):
            raise Conflict("negative", field="value")

    def roll_back(self, to: int = 0) -> None:
        self.events.append(f"roll_back {to}")
        del self.steps[to:]

    def apply_to_maps(self) -> None:
        if self.refuse:
            raise DataplaneUnavailable("the table refused the change")
        self.before = dict(self.maps)
        self.maps.update(self.steps)

    def undo_maps(self, cause: Exception) -> None:
        self.events.append("undo_maps")
        self.maps.clear()
        self.maps.update(self.before)

    def committed(self) -> None:
        self.events.append("committed")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(tmp_path / "netapp.db")
    yield opened
    opened.close()


def transactions(store: Store) -> Transactions:
    lock = threading.RLock()

    @contextlib.contextmanager
    def exclusive() -> Iterator[None]:
        with lock:
            yield

    return Transactions(exclusive, lambda: store, lambda: None)


def write(store: Store, key: str, value: int, fail: Optional[Exception] = None) -> Any:
    """A part's work: the value in the store (a setting) and in the table."""

    def work(change: TableChange) -> int:
        store.put_setting(key, value, NOW)
        change.put(key, value)
        if fail is not None:
            raise fail
        return value

    return work


def test_given_a_change_when_the_maps_take_it_then_store_and_maps_hold_it(store):
    change = TableChange({})

    assert transactions(store).change(WHO, lambda: change, write(store, "a", 1)) == 1

    assert store.get_setting("a") == 1 and change.maps == {"a": 1}
    assert change.events == ["committed"]


def test_given_a_change_when_the_maps_refuse_it_then_the_store_is_unchanged(store):
    change = TableChange({}, refuse=True)

    with pytest.raises(DataplaneUnavailable):
        transactions(store).change(WHO, lambda: change, write(store, "a", 1))

    assert store.get_setting("a") is None and change.maps == {}
    assert change.events == ["roll_back 0"]


def test_given_a_commit_that_fails_then_the_maps_are_undone(store, monkeypatch):
    change = TableChange({"a": 0})

    def refuse_commit(self: Any) -> None:
        raise StoreError("commit: disk I/O error")

    monkeypatch.setattr(store_module.Transaction, "commit", refuse_commit)
    with pytest.raises(ServiceError, match="could not commit"):
        transactions(store).change(WHO, lambda: change, write(store, "a", 1))

    monkeypatch.undo()
    assert store.get_setting("a") is None and change.maps == {"a": 0}
    assert change.events == ["undo_maps", "roll_back 0"]


def test_given_parts_when_one_fails_then_only_it_is_undone_and_the_others_commit(store):
    change = TableChange({})
    parts = [
        Part(WHO, write(store, "a", 1)),
        Part(WHO, write(store, "b", -1)),  # refused by the table's check
        Part(WHO, write(store, "c", 3, fail=Conflict("taken", field="id"))),
        Part(WHO, write(store, "d", 4)),
    ]

    transactions(store).run(parts, lambda: change)

    assert [part.result if part.error is None else type(part.error).__name__ for part in parts] == [
        1,
        "Conflict",
        "Conflict",
        4,
    ]
    assert [store.get_setting(key) for key in "abcd"] == [1, None, None, 4]
    assert change.maps == {"a": 1, "d": 4}
    assert change.events == ["roll_back 1", "roll_back 1", "committed"]
