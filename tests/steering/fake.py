"""TEST DOUBLE: steering's part of `FakeIntentService` (tests.api.fake_service), the fake of
netapp.steering.contract: the CPU set in a dict."""

from __future__ import annotations

from typing import Any

from netapp.service.contract import NotFound, Principal
from netapp.steering.contract import CpusContract
from netapp.steering.models import CpuSpec
from tests.api.fake_state import FakeState, require_admin


class FakeCpus(FakeState, CpusContract):
    """The CPU set: specs, meters at zero."""

    def __init__(self) -> None:
        super().__init__()
        self.cpus: dict[int, CpuSpec] = {}

    def list_cpus(self, who: Principal) -> list[dict[str, Any]]:
        self._enter("list_cpus")
        return [{**self.cpus[cpu].model_dump(), "meter_pps": 0} for cpu in sorted(self.cpus)]

    def put_cpu(self, who: Principal, spec: CpuSpec) -> CpuSpec:
        self._enter("put_cpu")
        require_admin(who)
        self.cpus[spec.cpu] = spec
        return spec

    def delete_cpu(self, who: Principal, cpu: int) -> None:
        self._enter("delete_cpu")
        require_admin(who)
        if self.cpus.pop(cpu, None) is None:
            raise NotFound(f"CPU {cpu} is not in the CPU set", field="cpu")
