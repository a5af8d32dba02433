"""The service's operations on the CPU set (netapp.steering.service), a part of IntentService."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from netapp.steering.models import CpuSpec

if TYPE_CHECKING:  # only annotations: netapp.service.contract imports this module
    from netapp.service.contract import Principal


class CpusContract(abc.ABC):
    """The CPU set (admin): the CPUs traffic is steered to, their capacity and meters."""

    @abc.abstractmethod
    def list_cpus(self, who: Principal) -> list[dict[str, Any]]:
        """Each CPU of the set with its capacity, overload flag and meter state."""

    @abc.abstractmethod
    def put_cpu(self, who: Principal, spec: CpuSpec) -> CpuSpec: ...

    @abc.abstractmethod
    def delete_cpu(self, who: Principal, cpu: int) -> None:
        """The CPU leaves the set: steers to it fall back (`cpu_unavailable`), as to any CPU outside it."""
