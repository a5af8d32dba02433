"""The baseline's instances, held by a process running the baseline revision's own code
(bench/flows/baseline_side.py), seen from the benchmark: their program fds go into the same
harness as HEAD's, their counters are read by the baseline's own binding."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netapp.dataplane.binding import LIBDPP_ENV

from bench.baseline import Baseline, BaselineError
from bench.flows import baseline_side, workload
from bench.flows.run import Counts, Instance, point_key
from bench.instances import BASELINE

SCRIPT = Path(baseline_side.__file__).resolve()
EXIT_WAIT_S = 60  # closing instances of a million rules takes seconds


def expected_hello() -> dict[str, Any]:
    """The workload HEAD sends: the baseline must send the same for the two to be compared."""
    return {
        "packet": workload.packet().hex(),
        "teid_base": workload.TEID_BASE,
        "src_base": workload.SRC_BASE,
        "other_rules": workload.OTHER_RULES,
    }


@dataclass
class RemoteInstance:
    """A baseline instance: what report.case_result and run.verify read of an Instance."""

    side: "BaselineSide"
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
        return Counts(**self.side.request({"op": "counts", "instance": self.index}))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class BaselineSide:
    """The baseline's process and the socket to it; `open_like` opens the baseline's twin of a HEAD
    instance."""

    def __init__(self, baseline: Baseline):
        self.baseline = baseline
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ, PYTHONPATH=str(baseline.root), **{LIBDPP_ENV: str(baseline.libdpp)})
        try:
            self._process = subprocess.Popen(
                [sys.executable, str(SCRIPT), str(baseline.root), str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                env=env,
            )
        finally:
            theirs.close()
        self.hello = self._receive()[0]
        differ = {
            name: (self.hello.get(name), value)
            for name, value in expected_hello().items()
            if self.hello.get(name) != value
        }
        if differ:
            self.close()
            details = ", ".join(f"{name}: {then!r} at REV, {now!r} in HEAD" for name, (then, now) in differ.items())
            raise BaselineError(f"the baseline's flow-mix workload differs from HEAD's ({details})")

    def _receive(self) -> tuple[dict[str, Any], list[int]]:
        message, fds = baseline_side.receive(self._sock)
        if message is None:
            raise BaselineError(f"the baseline's process ended (exit status {self._process.wait()}); see above")
        if "error" in message:
            raise BaselineError(f"the baseline's process: {message['error']}")
        return message, fds

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        baseline_side.send(self._sock, message)
        return self._receive()[0]

    def open_like(self, head: Instance, max_flows: int) -> RemoteInstance:
        """The same (rules, shapes, cache) opened and filled by the baseline's code; it must hold
        as many rules as HEAD's."""
        request = {"op": "open", "rules": head.rules, "shapes": head.shapes, "cache": head.cache}
        baseline_side.send(self._sock, request | {"max_flows": max_flows})
        reply, fds = self._receive()
        instance = RemoteInstance(
            self, reply["instance"], fds[0], head.rules, head.shapes, head.cache,
            reply["installed"], reply["install_s"], reply["max_rules"],
        )
        if instance.installed != head.installed:
            instance.close()
            raise BaselineError(
                f"{instance.key}: the baseline installed {instance.installed:,} rules, HEAD {head.installed:,}"
            )
        return instance

    def close(self) -> None:
        """End of the socket: the baseline's process closes its instances and exits."""
        self._sock.close()
        try:
            self._process.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
