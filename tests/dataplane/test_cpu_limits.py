"""The kernel's limits on a CPU of the set, as the schema and the service state them: the CPUMAP
queue limit libdpp probes is the one the kernel enforces, and the largest capacity is held
without wrapping. In the kernel (root)."""

from __future__ import annotations

import errno
from typing import Iterator

import pytest

from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.steering.models import MAX_CAPACITY_PPS, MAX_QUEUE_SIZE
from tests.utils.kernel import require_kernel

CPU = 0  # every machine has CPU 0


@pytest.fixture
def dataplane() -> Iterator[Dataplane]:
    require_kernel()
    with Dataplane.open() as opened:  # anonymous: nothing pinned
        yield opened


def test_the_probed_queue_limit_is_the_one_the_kernel_enforces_and_the_schemas(dataplane):
    limit = dataplane.cpu_queue_limit()

    dataplane.enable_cpu(CPU, queue_size=limit)
    with pytest.raises(DataplaneError) as refused:
        dataplane.enable_cpu(CPU, queue_size=limit + 1)

    assert refused.value.errno == errno.EOVERFLOW
    assert limit == MAX_QUEUE_SIZE  # kernels since 4.15; the service takes a smaller one if found


def test_the_largest_capacity_is_held_as_given_with_its_budget_per_window(dataplane):
    dataplane.enable_cpu(CPU, capacity_pps=MAX_CAPACITY_PPS)

    state = dataplane.cpu_state(CPU)

    assert state["capacity_pps"] == MAX_CAPACITY_PPS
    assert state["window_budget"] == MAX_CAPACITY_PPS // 1000  # 1 ms windows
