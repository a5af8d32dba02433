"""The two systems under test on the same node, cores and topology.

Both end in the node's kernel path (netapp.testbed.decap: VXLAN device, IPv4 forwarding to the
core). The RAN-side generator runs on CPU 0, and the node's n3 receive (its veth NAPI) runs where
the frames are sent from: CPU 0 too. "The node's CPUs" are those that do the stack's work:

- kernel: no XDP on n3; GRO on (the veth then receives the generator's frames); receive packet
  steering (rps_cpus) of n3 spreads the packets over the CPU set by flow hash, so the whole stack
  runs there. Nothing is forwarded elsewhere: what the CPUs cannot take is lost.
- netapp: the NetApp (NetAppService, configured as the demo does: an alternative group, CPUs with a
  capacity, the 8 priority intents (one of them the paper's message), the best-effort intent and
  slice) attached natively to n3. Priority services are steered through CPUMAP to the CPUs of the
  set other than the receiving CPU (CPU 0), metered against each CPU's capacity_pps; overflow goes
  to the alternative node. Best-effort traffic stays on the receiving CPU while that CPU has
  capacity and goes to the alternative node otherwise; when CPU 0 is not in the set it is marked
  overloaded, so all best effort is forwarded. No RPS: the NetApp decides where packets go.
  Steering to CPU 0 itself would only add a CPUMAP queue in front of the stack on the CPU that
  already runs it, and put that queue's thread in competition with the generator.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from netapp.core.config import InterfaceSetting, Settings
from netapp.forwarding.models import AlternativeGroup
from netapp.intents.models import Intent, LegacyMessage
from netapp.steering.models import CpuSpec
from netapp.service.contract import Principal, Scope, SliceSpec
from netapp.service.service import NetAppService
from netapp.testbed import netns, scenario
from netapp.testbed.scenario import best_effort_slice
from netapp.testbed.topology import EdgeSite

RECEIVE_CPU = 0  # where the generator and n3's receive run
OPERATOR = Principal("operator", frozenset({Scope.ADMIN}), "bench")
KERNEL, NETAPP = "kernel", "netapp"


class System(Protocol):
    name: str
    cpus: tuple[int, ...]

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def set_capacity(self, capacity_pps: dict[int, int]) -> None: ...
    def counters(self) -> dict[str, Any]: ...


@dataclass
class KernelPath:
    site: EdgeSite
    cpus: tuple[int, ...]
    name: str = KERNEL

    def start(self) -> None:
        ns = self.site.ns("node")
        netns.set_gro(ns, self.site.n3.ifname, True)
        netns.set_rps_cpus(ns, self.site.n3.ifname, self.cpus)

    def stop(self) -> None:
        netns.set_rps_cpus(self.site.ns("node"), self.site.n3.ifname, ())

    def set_capacity(self, capacity_pps: dict[int, int]) -> None:
        """The kernel path has no capacity to set."""

    def counters(self) -> dict[str, Any]:
        return {}


@dataclass
class NetAppPath:
    site: EdgeSite
    cpus: tuple[int, ...]
    state_dir: Path
    queue_size: int = 0  # CPUMAP queue; 0: the library's default
    cpumap_priority: int | None = None  # SCHED_FIFO priority of the CPUMAP threads; None: normal
    name: str = NETAPP
    instance: str = field(default_factory=lambda: f"tput-{secrets.token_hex(3)}")
    service: NetAppService | None = None
    capacity_pps: dict[int, int] = field(default_factory=dict)

    @property
    def steering_cpus(self) -> tuple[int, ...]:
        """Where priority services go: the set without the receiving CPU, unless that is all."""
        return tuple(cpu for cpu in self.cpus if cpu != RECEIVE_CPU) or self.cpus

    def settings(self) -> Settings:
        return Settings(
            state_dir=self.state_dir,
            instance=self.instance,
            netns=self.site.ns("node"),
            interfaces=[InterfaceSetting(name=self.site.n3.ifname, mode="native")],
            # the group the site document names: the paper's message names none
            default_alternative=scenario.document(self.site, self.steering_cpus)["default_alternative"],
            cpumap_priority=self.cpumap_priority,
            auth_disabled=True,
        )

    def start(self) -> None:
        netns.set_gro(self.site.ns("node"), self.site.n3.ifname, True)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.service = NetAppService(self.settings())
        try:
            self.service.start()
            self._configure()
        except BaseException:
            self.stop()
            raise

    def _configure(self) -> None:
        """What the demo sends through the REST API, straight to the service: site, intents, slice."""
        assert self.service is not None
        document = scenario.document(self.site, self.steering_cpus)
        for group in document["alternatives"]:
            self.service.put_alternative(OPERATOR, AlternativeGroup.model_validate(group))
        self.set_capacity({cpu: 0 for cpu in self.cpus})
        for intent in document["intents"]:
            if "Resources" in intent:
                self.service.apply_legacy(OPERATOR, LegacyMessage.model_validate(intent))
            else:
                self.service.create_intent(OPERATOR, Intent.model_validate(intent))
        self.service.put_slice(OPERATOR, SliceSpec.model_validate(best_effort_slice()))

    def set_capacity(self, capacity_pps: dict[int, int]) -> None:
        """CPUs of the set with their capacity; the receiving CPU, when not in the set, overloaded."""
        assert self.service is not None
        for cpu in self.cpus:
            spec = CpuSpec(cpu=cpu, capacity_pps=int(capacity_pps.get(cpu, 0)), queue_size=self.queue_size)
            self.service.put_cpu(OPERATOR, spec)
        if RECEIVE_CPU not in self.cpus:
            self.service.put_cpu(OPERATOR, CpuSpec(cpu=RECEIVE_CPU, overloaded=True))
        self.capacity_pps = {cpu: int(capacity_pps.get(cpu, 0)) for cpu in self.cpus}

    def counters(self) -> dict[str, Any]:
        """The NetApp's own counters (cumulative): actions, reasons, per-CPU steered packets."""
        assert self.service is not None
        stats = self.service.stats(OPERATOR)
        return {
            "actions": {name: c["packets"] for name, c in stats["actions"].items()},
            "reasons": {name: c["packets"] for name, c in stats["reasons"].items()},
            "steered": {cpu: (view or {}).get("packets", 0) for cpu, view in stats["cpus"].items()},
        }

    def stop(self) -> None:
        """Detach and unpin (the service leaves its instance pinned on purpose), then close."""
        if self.service is None:
            return
        try:
            with netns.entered(self.site.ns("node")):
                self.service.dataplane.unpin()
        finally:
            self.service.close()
            self.service = None


def counter_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """after - before for nested dicts of counters."""
    return {
        key: counter_delta(before.get(key, {}), value)
        if isinstance(value, dict)
        else value - before.get(key, 0)
        for key, value in after.items()
    }
