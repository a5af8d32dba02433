"""Helpers for tests that run packets through the real XDP program."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import pytest

from netapp.dataplane.binding import KeyFlag, Overlay
from netapp.dataplane.facade import Dataplane, PacketOutcome
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from tests.utils.intents import INTERFACES
from tests.utils.kernel import require_kernel

OVERLAY_NUMBERS = {None: 0, **{o.name.lower(): int(o) for o in Overlay}}


def reference_key(readable: dict[str, Any]) -> dict[str, Any]:
    """A traced key (binding.key_from_c's readable form) in the reference parser's terms."""

    def packed(address: Any) -> bytes:
        return address.packed.ljust(16, b"\0") if address is not None else bytes(16)

    return {
        "ifindex": readable["ifindex"],
        "vni": readable["vni"],
        "teid": readable["teid"],
        "vlan": readable["vlan"],
        "overlay": OVERLAY_NUMBERS[readable["overlay"]],
        "qfi": readable["qfi"],
        "flags": sum(int(KeyFlag[name.upper()]) for name in readable["flags"]),
        "family": readable["family"],
        "proto": readable["protocol"],
        "dscp": readable["dscp"],
        "sport": readable["src_port"],
        "dport": readable["dst_port"],
        "src": packed(readable["src"]),
        "dst": packed(readable["dst"]),
    }


def traced_dataplane(document: Optional[dict] = None, **open_options: Any) -> Dataplane:
    """An anonymous, unattached instance with tracing on, with `document` applied."""
    require_kernel()
    dp = Dataplane.open(trace=True, **open_options)
    if document is not None:
        dp.apply_compiled(compile_document(parse_document(document), INTERFACES))
    return dp


class Lent:
    """A dataplane lent to one service after another: a service's close leaves it open, so a
    module's tests load the programs once (seconds on a loaded machine) and each service still
    starts by reconciling the maps to its own store."""

    def __init__(self, dataplane: Dataplane):
        self._dataplane = dataplane

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dataplane, name)


def run(dp: Dataplane, frame: bytes) -> PacketOutcome:
    return dp.test_run(bytes(frame))


def two_cpus() -> list[int]:
    """Two CPUs this process may run on, for a race between them; the test skips on one CPU."""
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        pytest.skip("needs two CPUs")
    return mine[:2]


def run_on_cpus(prog_fd: int, frame: bytes, repeat: int, cpus: Sequence[int], out_size: int = 0) -> dict[int, int]:
    """BPF_PROG_TEST_RUN of `frame`, `repeat` times, on each of `cpus` at once (a thread pinned to
    each: the kernel runs the repetitions on the calling thread's CPU). CPU -> last verdict.
    out_size: room for an output longer than the frame (a program that pushes headers)."""
    return run_each_on_cpus(prog_fd, {cpu: frame for cpu in cpus}, repeat, out_size)


def run_each_on_cpus(prog_fd: int, frames: Mapping[int, bytes], repeat: int, out_size: int = 0) -> dict[int, int]:
    """run_on_cpus with a frame of its own on each CPU (CPU -> frame)."""
    from bench.libbpf import test_run as prog_test_run

    verdicts: dict[int, int] = {}

    def receive(cpu: int) -> None:
        os.sched_setaffinity(0, {cpu})
        verdicts[cpu] = prog_test_run(prog_fd, frames[cpu], repeat, out_size=out_size).retval

    threads = [threading.Thread(target=receive, args=(cpu,)) for cpu in frames]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return verdicts
