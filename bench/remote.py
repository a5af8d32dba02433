"""The hot-path benchmark's --baseline instances, held by a process running the baseline revision's
own code (bench/baseline_side.py serving "dataplane"), seen from the benchmark: their program fds
join HEAD's subjects in the same harness; they are grown, and their counters read, by the
baseline's own code."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from bench.baseline import Baseline, BaselineError, BaselineSide
from bench.instances import BASELINE, BulkInstall, Instance, mode_name
from bench.measure import Counters


@dataclass
class RemoteInstance:
    """A baseline instance: what measure.verify_case, the timing and the report read of an Instance."""

    side: "DataplaneSide"
    index: int
    fd: int  # this process's reference to the baseline's program
    flow_cache: bool
    rules: int
    shapes: int
    installs: list[BulkInstall] = field(default_factory=list)
    version: str = BASELINE

    @property
    def mode(self) -> str:
        return mode_name(self.flow_cache, BASELINE)

    @property
    def prog_fd(self) -> int:
        return self.fd

    def counters(self, case: str) -> Counters:
        return Counters(**self.side.request({"op": "counters", "instance": self.index, "case": case})[0])

    def grow_to(self, total_rules: int) -> None:
        """The baseline's own `grow`; it must then hold `total_rules`, as HEAD's twin does."""
        reply, _ = self.side.request({"op": "grow", "instance": self.index, "rules": total_rules})
        self.installs = [BulkInstall(batch["rules"], batch["seconds"]) for batch in reply["installs"]]
        self.rules = reply["rules"]
        if self.rules != total_rules:
            raise BaselineError(f"{self.mode}: the baseline grew to {self.rules:,} rules, not {total_rules:,}")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class DataplaneSide(BaselineSide):
    """The baseline's process serving bench/dataplane.py; `open_like` opens the baseline's twin of
    a HEAD instance."""

    def __init__(self, baseline: Baseline):
        super().__init__(baseline, "dataplane")

    def open_like(self, head: Instance, case: Optional[str] = None) -> RemoteInstance:
        """The baseline's instance of `case` alone (None: the instance every case shares), with the
        flow cache as HEAD's; it must hold as many rules in as many shapes."""
        reply, fds = self.request({"op": "open", "flow_cache": head.flow_cache, "case": case})
        twin = RemoteInstance(self, reply["instance"], fds[0], head.flow_cache, reply["rules"], reply["shapes"])
        if (twin.rules, twin.shapes) != (head.rules, head.shapes):
            twin.close()
            raise BaselineError(
                f"{twin.mode}/{case or 'shared'}: the baseline holds {twin.rules:,} rules in {twin.shapes} "
                f"shapes, HEAD {head.rules:,} in {head.shapes}"
            )
        return twin
