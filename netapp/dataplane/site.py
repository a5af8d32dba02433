"""What rules refer to, set on the maps: alternative groups, egress ports and tunnel entries (generic
tables), the CPU set and the configuration. Dataplane's site half (a mixin)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Optional, Sequence, Union

from netapp.dataplane.binding import (
    MAX_ALT_GROUPS,
    MAX_CPUS,
    NONE,
    AltGroup,
    Config,
    Cpu,
    DevmapVal,
    Verdict,
    alt_group_to_c,
    possible_cpus,
)
from netapp.dataplane.tables import Table
from netapp.intents.compiler import CompiledAltMember, CompiledDocument
from netapp.mec.tunnel_entries import TunnelEntries
from netapp.mec.tunnels import TunnelEntry

if TYPE_CHECKING:
    from netapp.dataplane.facade import Adapter


class SiteConfig:
    """Alternatives, ports, CPUs and defaults; the facade remembers which it set."""

    _dpp: Adapter
    _ports: set[int]
    _alt_groups: set[int]
    _cpus: set[int]
    _ports_table: Table
    _alt_groups_table: Table
    tunnel_entries: TunnelEntries

    def set_alternative(self, group_id: int, members: Sequence[CompiledAltMember]) -> None:
        """Publish an alternative group; member egress interfaces become ports first. No members
        (none alive): the group's entry is cleared, so its overflow takes the default verdict."""
        if not members:
            self.clear_alternative(group_id)
            return
        value = alt_group_to_c(members)
        for member in members:
            if member.ifindex:
                self.add_port(member.ifindex)
        self._alt_groups_table.update([(group_id, value)])
        self._alt_groups.add(group_id)

    def clear_alternative(self, group_id: int) -> None:
        """An array's entry cannot go: it is zeroed (count 0, no member), which the program skips."""
        self._alt_groups_table.update([(group_id, AltGroup())])
        self._alt_groups.discard(group_id)

    def enable_cpu(self, cpu: int, capacity_pps: int = 0, queue_size: int = 0) -> None:
        self._dpp.cpu_enable(cpu, queue_size, capacity_pps)
        self._cpus.add(cpu)

    def disable_cpu(self, cpu: int) -> None:
        self._dpp.cpu_disable(cpu)
        self._cpus.discard(cpu)

    def set_cpu_overloaded(self, cpu: int, overloaded: bool = True) -> None:
        self._dpp.cpu_set_overloaded(cpu, overloaded)

    def cpu_queue_limit(self) -> int:
        """The largest CPUMAP queue_size the running kernel takes."""
        return self._dpp.cpumap_qsize_max()

    def cpu_state(self, cpu: int) -> dict[str, int]:
        state = self._dpp.cpu_get(cpu)
        return {name: getattr(state, name) for name, _ in Cpu._fields_}

    def adopt_site_state(self) -> None:
        """After a restart: take every alternative group as possibly set and read which CPUs are
        enabled, so that the next apply_compiled() clears what the desired state no longer has.
        (Ports cannot be listed; stale ones stay, which only allows redirects to them.)"""
        self._alt_groups = set(range(MAX_ALT_GROUPS))
        self._cpus = set(self.enabled_cpus())

    def enabled_cpus(self) -> list[int]:
        """CPUs of the CPU set that are enabled in the map."""
        candidates = range(min(MAX_CPUS, possible_cpus()))
        return [cpu for cpu in candidates if self._dpp.cpu_get(cpu).enabled]

    def add_port(self, ifindex: int) -> None:
        if ifindex not in self._ports:
            self._ports_table.update([(ifindex, DevmapVal(ifindex=ifindex))])
            self._ports.add(ifindex)

    def add_tunnel(self, entry: TunnelEntry) -> None:
        """A tunnel rule's entry (netapp.mec.tunnel_entries), written before the rule; ValueError when
        its id holds another."""
        self.tunnel_entries.add(entry)

    def add_tunnels(self, entries: Iterable[TunnelEntry]) -> None:
        """A change's tunnel entries, written before its rules; when one is refused (ValueError: its id
        holds another; DataplaneError), those written for the change are freed before the error is
        raised (netapp.mec.tunnel_entries)."""
        self.tunnel_entries.add_all(entries)

    def remove_port(self, ifindex: int) -> None:
        self._ports_table.delete([ifindex])
        self._ports.discard(ifindex)

    def set_default_verdict(self, verdict: Union[Verdict, str]) -> None:
        config = self._dpp.config_get()
        config.default_verdict = as_verdict(verdict)
        self._dpp.config_set(config)

    def set_default_alternative(self, group_id: Optional[int]) -> None:
        config = self._dpp.config_get()
        config.default_alt_group = NONE if group_id is None else group_id
        self._dpp.config_set(config)

    def set_meter_window(self, window_ns: int) -> None:
        """Meter every CPU's capacity over windows of `window_ns`; a change recomputes each CPU's
        budget and restarts its meter (libdpp's dpp_config_set)."""
        config = self._dpp.config_get()
        if config.meter_window_ns != window_ns:
            config.meter_window_ns = window_ns
            self._dpp.config_set(config)

    def config(self) -> dict[str, int]:
        current = self._dpp.config_get()
        return {name: getattr(current, name) for name, _ in Config._fields_}

    def _apply_site(self, compiled: CompiledDocument) -> None:
        for ifindex in sorted(compiled.redirect_ifindexes):
            self.add_port(ifindex)
        self.add_tunnels(compiled.tunnels.values())
        for group in compiled.alternatives:
            self.set_alternative(group.group_id, group.members)
        for group_id in sorted(self._alt_groups - {group.group_id for group in compiled.alternatives}):
            self.clear_alternative(group_id)
        for spec in compiled.cpus:
            self.enable_cpu(spec.cpu, spec.capacity_pps, spec.queue_size)
            self.set_cpu_overloaded(spec.cpu, spec.overloaded)
        for cpu in sorted(self._cpus - {spec.cpu for spec in compiled.cpus}):
            self.disable_cpu(cpu)
        self.set_default_verdict(compiled.default_verdict)
        self.set_default_alternative(compiled.default_alternative)


def as_verdict(verdict: Union[Verdict, str, int]) -> Verdict:
    if isinstance(verdict, str):
        return Verdict[verdict.upper()]
    return Verdict(verdict)
