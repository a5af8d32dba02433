"""The baseline's instances, held by a process running the baseline revision's own code
(bench/baseline_side.py, FlowsServer), seen from the benchmark: their program fds go into the same
harness as HEAD's, their counters are read by the baseline's own binding."""

from __future__ import annotations

import os
from dataclasses import dataclass

from bench.baseline import Baseline, BaselineError, BaselineSide
from bench.flows.run import Counts, Instance, point_key
from bench.instances import BASELINE


@dataclass
class RemoteInstance:
    """A baseline instance: what report.case_result and run.verify read of an Instance."""

    side: "FlowsSide"
    index: int
    fd: int  # this process's reference to the baseline's program
    rules: int
    shapes: int
    cache: bool
    installed: int
    install_s: float
    max_rules: int
    version: str = BASELINE

    @property
    def key(self) -> str:
        return f"{BASELINE}:{point_key(self.rules, self.shapes, self.cache)}"

    def prog_fd(self) -> int:
        return self.fd

    def counts(self) -> Counts:
        return Counts(**self.side.request({"op": "counts", "instance": self.index})[0])

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class FlowsSide(BaselineSide):
    """The baseline's process serving bench/flows; `open_like` opens the baseline's twin of a HEAD
    instance."""

    def __init__(self, baseline: Baseline):
        super().__init__(baseline, "flows")

    def open_like(self, head: Instance, max_flows: int) -> RemoteInstance:
        """The same (rules, shapes, cache) opened and filled by the baseline's code; it must hold
        as many rules as HEAD's."""
        request = {"op": "open", "rules": head.rules, "shapes": head.shapes, "cache": head.cache}
        reply, fds = self.request(request | {"max_flows": max_flows})
        instance = RemoteInstance(
            self, reply["instance"], fds[0], head.rules, head.shapes, head.cache,
            reply["installed"], reply["install_s"], reply["max_rules"],
        )
        if instance.installed != head.installed - head.tunnel_rules:
            instance.close()
            raise BaselineError(
                f"{instance.key}: the baseline installed {instance.installed:,} rules, HEAD {head.installed:,}"
            )
        return instance
