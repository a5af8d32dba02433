"""What the xdist workers of one test run build once and share (a build of a minute or more that
several modules need, which would otherwise be made again by every worker that runs one)."""

from __future__ import annotations

import contextlib
import fcntl
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


@contextlib.contextmanager
def run_wide(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str) -> Iterator[Path]:
    """A directory `name` shared by every worker of this run, held under a lock for the block: the
    directory that holds each worker's temporary directory (the run's own; the next run has
    another), or the base temporary directory without xdist."""
    root = tmp_path_factory.getbasetemp()
    folder = (root if worker_id == "master" else root.parent) / name
    folder.mkdir(exist_ok=True)
    with open(folder.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield folder


def made_once(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, make: Callable[[Path], T]) -> T:
    """make(folder) in the run-wide folder `name` by the first worker that asks; the others get
    what it returned (pickled beside it)."""
    with run_wide(tmp_path_factory, worker_id, name) as folder:
        made = folder / "made.pickle"
        if made.exists():
            return pickle.loads(made.read_bytes())
        value = make(folder)
        made.write_bytes(pickle.dumps(value))
        return value
