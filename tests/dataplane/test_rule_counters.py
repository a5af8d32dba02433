"""Rule counters (dpp_rule_stats): a row of rule slots per CPU in a plain array, each CPU adding to
its own row; libdpp sums the rows and clears them all. Run in the kernel from two CPUs at once."""

from __future__ import annotations

import ctypes
import os

import pytest

from bench.libbpf import map_lookup
from netapp.dataplane.binding import Counter, possible_cpus
from tests.dataplane.test_actions import make_dataplane, ns, site, tunnel_frame, tunnel_intent  # noqa: F401
from tests.utils.dataplane import run_on_cpus

REPEAT = 5000


def row_counter(dp, cpu: int, slot: int) -> int:
    """Packets of `slot` in `cpu`'s row, read from the map itself (below libdpp)."""
    handle = dp._dpp
    row = handle.map_info("dpp_rule_stats")["max_entries"] // possible_cpus()
    value = Counter()
    assert map_lookup(handle.map_fd("dpp_rule_stats"), ctypes.c_uint32(cpu * row + slot), value)
    return value.packets


def test_each_cpu_counts_in_its_own_row_and_libdpp_sums_and_clears_every_row(ns):  # noqa: F811
    cpus = sorted(os.sched_getaffinity(0))[:2]
    if len(cpus) < 2:
        pytest.skip("needs two CPUs to receive on")
    with make_dataplane(site([tunnel_intent("rule", {"type": "drop"})])) as dp:
        frame = tunnel_frame()
        run_on_cpus(dp._dpp.prog_fd(), frame, REPEAT, cpus)
        slot = dp.slots_of(["rule"])["rule"]
        rows = {cpu: row_counter(dp, cpu, slot) for cpu in cpus}
        summed = dp.rule_stats()["rule"]
        dp._dpp.stats_rules_clear(slot, 1)
        cleared = dp.rule_stats()["rule"]
    assert rows == {cpu: REPEAT for cpu in cpus}
    assert summed == (2 * REPEAT, 2 * REPEAT * len(frame))
    assert cleared == (0, 0)
