"""The data plane as the control plane sees it: verb-object methods over a userspace shadow.

Shaped like katran's KatranLb: `Dataplane` drives an injected low-level adapter (binding.DppHandle,
or fake.FakeDpp without a kernel), keeps a shadow of what it installed, allocates rule stat slots,
and maps slots back to intent ids (the data plane keys rules by match; intent ids are ours).

By concern, each a mixin of `Dataplane`: rules and their apply order (`rules`, planned by `plan`, slots
in `slots`), alternatives, ports, CPUs and defaults (`site`, ports and alternative groups as generic
tables), status, counters and test runs (`counters`). Lifecycle, attach and upgrade stay here.
"""

from __future__ import annotations

import errno
import socket
from typing import Any, Mapping, Optional, Protocol, Sequence, Union

from netapp.dataplane.binding import (
    MAX_CPUS,
    MAX_RULES,
    Config,
    Cpu,
    DataplaneError,
    DppHandle,
    FlowKey,
    Rule,
    Shape,
    ShapeSet,
    TestResult,
    Verdict,
    XdpMode,
    load_libdpp,
)
from netapp.dataplane.counters import Counters, PacketOutcome
from netapp.dataplane.rules import ApplyReport, RuleWriter
from netapp.dataplane.site import SiteConfig, as_verdict
from netapp.dataplane.slots import InstalledRule, SlotAllocator, contiguous_runs
from netapp.dataplane.tables import Table, TableAdapter, open_table
from netapp.intents.compiler import CompiledDocument, compile_document
from netapp.intents.models import IntentDocument
from netapp.mec.tunnel_entries import TunnelEntries
from netapp.dataplane.tunnel_ends import TunnelEnds
from netapp.qos.abi import ClockWord

# Re-exported: they were defined here before the facade was split by concern.
__all__ = [
    "Adapter",
    "ApplyReport",
    "Dataplane",
    "InstalledRule",
    "PacketOutcome",
    "SlotAllocator",
    "contiguous_runs",
    "host_interfaces",
    "interface_index",
    "mode_refused",
]

_ATTACH_HINTS = {
    errno.EEXIST: "the interface already has an XDP program: detach it first",
    errno.EPERM: "attaching XDP needs root (or CAP_NET_ADMIN and CAP_BPF)",
}


def mode_refused(code: int, mode: str) -> bool:
    """An attach failed for the mode asked, not for the interface: the driver does not run XDP in
    that mode (EOPNOTSUPP), or does not offload it (veth answers EINVAL)."""
    return code == errno.EOPNOTSUPP or (code == errno.EINVAL and mode == XdpMode.OFFLOAD.name.lower())


def _attach_hint(code: int, mode: str) -> str:
    if mode_refused(code, mode):
        return f"the driver does not run XDP in {mode} mode: try mode generic"
    return _ATTACH_HINTS.get(code, "")
class Adapter(TableAdapter, Protocol):
    """What Dataplane needs from the layer below (binding.DppHandle, fake.FakeDpp)."""

    def close(self) -> None: ...
    def reused(self) -> bool: ...
    def attach(self, ifindex: int, mode: XdpMode) -> None: ...
    def detach(self, ifindex: int) -> None: ...
    def attached(self) -> list[int]: ...
    def unpin(self) -> None: ...
    def upgrade(self, *, flow_cache: bool = True, trace: bool = False) -> None: ...
    def rules_upsert(self, keys: Sequence[FlowKey], rules: Sequence[Rule]) -> None: ...
    def rules_delete(self, keys: Sequence[FlowKey]) -> None: ...
    def rules_dump(self) -> list[tuple[FlowKey, Rule]]: ...
    def shapes_publish(self, shapes: Sequence[Shape]) -> None: ...
    def shapes_get(self) -> ShapeSet: ...
    def config_get(self) -> Config: ...
    def config_set(self, config: Config) -> None: ...
    def cpu_enable(self, cpu: int, queue_size: int = 0, capacity_pps: int = 0) -> None: ...
    def cpu_disable(self, cpu: int) -> None: ...
    def cpu_set_overloaded(self, cpu: int, overloaded: bool) -> None: ...
    def cpu_get(self, cpu: int) -> Cpu: ...
    def cpumap_qsize_max(self) -> int: ...
    def stats_rules(self, first: int, count: int) -> list[tuple[int, int]]: ...
    def stats_rules_array(self, first: int, count: int) -> Any: ...
    def stats_rules_clear(self, first: int, count: int) -> None: ...
    def stats_verdicts(self) -> list[tuple[int, int]]: ...
    def stats_actions(self) -> list[tuple[int, int]]: ...
    def stats_reasons(self) -> list[tuple[int, int]]: ...
    def stats_cpus(self, count: int = MAX_CPUS) -> list[tuple[int, int]]: ...
    def test_run(self, packet: bytes, ingress_ifindex: int = 0) -> tuple[TestResult, bytes]: ...
    def prog_id(self) -> int: ...
    def programs(self) -> list[dict[str, Any]]: ...
    def map_info(self, name: str) -> dict[str, int]: ...
    def clock_word(self) -> Optional[ClockWord]: ...
    def map_fd(self, name: str) -> int: ...


def host_interfaces() -> dict[str, int]:
    """Interface name -> ifindex of this host's network namespace."""
    return {name: index for index, name in socket.if_nameindex()}


def interface_index(ifname: str) -> int:
    try:
        return socket.if_nametoindex(ifname)
    except OSError:
        raise DataplaneError(
            errno.ENODEV, f"resolve interface {ifname}", f"no interface named {ifname!r}"
        ) from None


class Dataplane(RuleWriter, SiteConfig, Counters):
    """One DPP instance: rules from compiled intents (rules.RuleWriter), alternatives, CPUs, ports and
    defaults (site.SiteConfig), status, stats and test runs (counters.Counters)."""

    def __init__(self, adapter: Adapter, *, trace: bool = False, max_rules: int = MAX_RULES):
        self._dpp = adapter
        self._trace = trace
        self._slots = SlotAllocator(max_rules)
        self._installed: dict[bytes, InstalledRule] = {}
        self._intent_slots: dict[str, int] = {}
        self._slot_intents: dict[int, str] = {}
        self._intent_keys: dict[str, bytes] = {}
        self._published_shapes: list[bytes] = []
        self._ports: set[int] = set()
        self._alt_groups: set[int] = set()
        self._ports_table = Table(adapter, "dpp_ports")
        self._alt_groups_table = Table(adapter, "dpp_alt_groups")
        self.tunnel_entries = TunnelEntries(Table(adapter, "dpp_tunnels"))
        self.tunnel_ends = TunnelEnds(Table(adapter, "dpp_tunnel_ends"), adapter)
        self._cpus: set[int] = set()
        self._counter_epoch = 0
        self._slot_epochs: dict[int, int] = {}

    @classmethod
    def open(
        cls,
        instance: Optional[str] = None,
        trace: bool = False,
        flow_cache: bool = True,
        max_rules: int = MAX_RULES,
        default_verdict: Union[Verdict, str] = Verdict.PASS,
        *,
        max_flows: int = 0,
        meter_window_ns: int = 0,
        map_sizes: Optional[Mapping[str, int]] = None,
        libdpp_path: Optional[str] = None,
    ) -> "Dataplane":
        """Open (or, when `instance` is pinned, reopen) an instance; instance None: anonymous.
        `map_sizes`: map name -> entries, for the maps whose size is a capacity (abi.SIZABLE_MAPS);
        a reopened instance keeps its pinned sizes (libdpp warns of one that differs): `map_size`
        tells the size in force."""
        handle = DppHandle.open(
            load_libdpp(libdpp_path),
            instance,
            max_rules=max_rules,
            max_flows=max_flows,
            flow_cache=flow_cache,
            trace=trace,
            default_verdict=as_verdict(default_verdict),
            meter_window_ns=meter_window_ns,
            map_sizes=map_sizes,
        )
        dataplane = cls(handle, trace=trace, max_rules=max_rules)
        if handle.reused():
            dataplane.adopt_installed_rules()
        return dataplane

    # --- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        self._dpp.close()

    def table(self, name: str) -> Table:
        """A plain map of this instance by name (a network function's own table, netapp.dataplane.tables);
        each as the table its spec says (netapp.dataplane.tables.open_table)."""
        return open_table(self._dpp, name)

    def upf_punts(self) -> Any:
        """A reader of the UPF's punted frames (netapp.upf.punts.PuntReader); None when the adapter
        has no kernel behind it."""
        opener = getattr(self._dpp, "upf_punts", None)
        return opener() if opener is not None else None

    def upf_replay(self, frame: bytes, ifindex: int) -> None:
        """A frame through the program as if it had arrived on `ifindex`, its verdict carried out."""
        self._dpp.upf_replay(frame, ifindex)

    def map_fd(self, name: str) -> int:
        """The fd of the instance's map `name` (a ring's, to read it), valid while it is open."""
        return self._dpp.map_fd(name)

    def program_fd(self, name: str) -> int:
        """The fd of the instance's program `name` (a CPUMAP queue's program), valid while it is open."""
        return self._dpp.program_fd(name)

    def map_size(self, name: str) -> int:
        """The entries a map of this instance holds, as loaded (or as pinned, when reopened)."""
        return self._dpp.map_info(name)["max_entries"]

    def __enter__(self) -> "Dataplane":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def attach(self, ifname: str, mode: Union[XdpMode, str] = XdpMode.NATIVE) -> int:
        """Attach the program to an interface; returns its ifindex."""
        ifindex = interface_index(ifname)
        mode = XdpMode[mode.upper()] if isinstance(mode, str) else mode
        try:
            self._dpp.attach(ifindex, mode)
        except DataplaneError as exc:
            exc.hint = exc.hint or _attach_hint(exc.errno, mode.name.lower())
            exc.op = f"attach {ifname} ({mode.name.lower()})"
            raise
        return ifindex

    def detach(self, ifname: str) -> None:
        self._dpp.detach(interface_index(ifname))

    def attached(self) -> list[int]:
        """Ifindexes this instance is attached to."""
        return self._dpp.attached()

    def unpin(self) -> None:
        """Remove the instance's pins (and so detach it); the handle stays usable until close()."""
        self._dpp.unpin()

    def reload(self, flow_cache: bool = True) -> tuple[int, int]:
        """Replace the running program with the one this build carries, under traffic.

        The maps stay, so rules, counters, CPUs and alternatives carry over and the facade's view
        of them stays true; every attached interface switches program in one step. Returns the
        program ids before and after. On failure the previous program keeps running.
        """
        before = self._dpp.prog_id()
        self._dpp.upgrade(flow_cache=flow_cache, trace=self._trace)
        return before, self._dpp.prog_id()

    # --- documents ---------------------------------------------------------------------------

    def apply_document(self, document: IntentDocument, interfaces: Mapping[str, int]) -> ApplyReport:
        """Compile a document and apply all of it; everything rules refer to is in place first."""
        return self.apply_compiled(compile_document(document, interfaces))

    def apply_compiled(self, compiled: CompiledDocument) -> ApplyReport:
        """Ports, alternative groups, CPUs and defaults first, then the rules that use them. Refused
        before its rules, the document's tunnel entries are freed before the error is raised."""
        try:
            self._apply_site(compiled)
        except (DataplaneError, ValueError):
            self.tunnel_entries.free()  # for rules that will not come
            raise
        return self.apply(compiled.ruleset)
