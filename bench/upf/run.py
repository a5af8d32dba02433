"""The UPF benchmark's site, instances and runs: a namespace whose routes and neighbours make the
FIB path real, pipeline instances grown to each session count (and with --baseline the same
opened by another revision's code: `Twin`), every (case, active count) proven to take its path,
then timed interleaved with the floors."""

from __future__ import annotations

import ctypes
import random
import secrets
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, Union

from netapp.dataplane.abi import MAX_RULES
from netapp.dataplane.binding import DppHandle, Verdict, load_libdpp
from netapp.dataplane.facade import Dataplane, interface_index
from netapp.testbed import netns
from netapp.upf.abi import Output, Role, Usage
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.nexthop import RouteWatch

from bench.flows.run import repeat_for
from bench.harness import Harness, Walk
from bench.measure import WrongPathError
from bench.upf import workload
from bench.upf.workload import CASES, FLOOR_PACKETS, OUTPUT_ROOM, Case

TABLE_BATCH = 65536  # entries per Table.update call
SAMPLE_FLOWS = 4  # flows of each walk whose output is compared byte for byte, besides the last


def make_site(stack: ExitStack) -> str:
    """A namespace with the node's veths (peers up, so carriers are), its addresses, permanent
    neighbours, a route to the data network via N6's router, and IPv4 forwarding on: what
    bpf_fib_lookup needs to answer SUCCESS with both MACs."""
    name = f"dpp-upfb-{secrets.token_hex(3)}"
    netns.add_namespace(name)
    stack.callback(netns.delete_namespace, name)
    for ifname, (mac, cidr, neighbour, neighbour_mac) in workload.INTERFACES.items():
        netns.run(["ip", "link", "add", ifname, "type", "veth", "peer", "name", f"{ifname}p"], netns=name)
        netns.run(["ip", "link", "set", f"{ifname}p", "up"], netns=name)
        netns.configure(name, ifname, mac, cidr)
        netns.add_neighbour(name, ifname, neighbour, neighbour_mac)
    netns.run(["ip", "route", "add", workload.DATA_NETWORK, "via", workload.ROUTER], netns=name)
    netns.sysctl(name, "net.ipv4.conf.all.forwarding", 1)
    return name


@dataclass(frozen=True)
class Install:
    table: str
    entries: int
    seconds: float


@dataclass
class Instance:
    """One pipeline instance and the sessions in its UPF tables."""

    name: str
    n9: bool
    output: Output
    handle: DppHandle
    dataplane: Dataplane
    applier: BpfApplier
    routes: RouteWatch
    sessions: int = 0
    installs: list[Install] = field(default_factory=list)

    version = ""  # HEAD's

    @property
    def prog_fd(self) -> int:
        return self.handle.prog_fd()

    def counts(self) -> dict[str, dict[str, int]]:
        return _counts(self.dataplane)

    def grow(self, sessions: int) -> None:
        grow(self, sessions)

    def close(self) -> None:
        self.routes.close()
        self.dataplane.close()


@dataclass
class Twin:
    """An instance the --baseline revision opened and grows with its own code, in its own process
    (bench/baseline_side.py, UpfServer), timed here through its program's fd."""

    name: str
    prog_fd: int
    index: int  # the instance's number in the baseline's process
    side: Any  # bench.baseline.BaselineSide
    sessions: int
    version = "baseline"

    def counts(self) -> dict[str, dict[str, int]]:
        return self.side.request({"op": "counts", "instance": self.index})[0]

    def grow(self, sessions: int) -> None:
        self.sessions = self.side.request({"op": "grow", "instance": self.index, "sessions": sessions})[0]["sessions"]


def open_twin(side: Any, name: str, sessions: int) -> Twin:
    reply, fds = side.request({"op": "open", "name": name, "sessions": sessions})
    return Twin(name, fds[0], reply["instance"], side, reply["sessions"])


AnyInstance = Union[Instance, Twin]


def open_instance(name: str, sessions: int) -> Instance:
    """An anonymous instance (default verdict DROP: a packet the parser rejects cannot pass for a
    miss) with a URR slot for each of `sessions` sessions, whose UPF has the node's interface roles
    and session 0, both written by its applier, and its route cache kept current as `netapp serve`
    does (netapp.upf.nexthop). Call inside the site's namespace."""
    n9, output = workload.INSTANCES[name]
    sizes = workload.map_sizes(sessions, name)
    handle = DppHandle.open(load_libdpp(), None, max_rules=MAX_RULES, default_verdict=Verdict.DROP, map_sizes=sizes)
    dataplane = Dataplane(handle)
    try:
        roles = {interface_index(workload.N3_IF): (Role.N3, 0), interface_index(workload.N6_IF): (Role.N6, 1)}
        ue4 = workload.pool(sessions) if name != "hashed" else None
        if name == "hashed":  # its two buckets full: the applier puts session 0's address in the hash
            dataplane.table("dpp_upf_dl4").update(workload.filler_ways(output))
        site = workload.site(output, name)
        applier = BpfApplier(dataplane.table, site, iface_entries(roles, workload.N3_IP, None, ue4))
        policed = name in workload.POLICED
        applier.apply(None, workload.session(0, n9, policed=policed))
        if ue4:  # the applier wrote UE 0's SMF-given address only
            first = workload.pool_arrays(0, 1, output, policed)
            dataplane.table("dpp_upf_ue4").update(zip(first.keys, first.values))
        routes = RouteWatch(dataplane.table("dpp_upf_route_gen")).start()
    except Exception:
        dataplane.close()
        raise
    return Instance(name, n9, output, handle, dataplane, applier, routes, sessions=1)


def usage_memory(instance: Instance) -> dict[str, int]:
    """dpp_upf_usage as loaded: its slots and the memory they take (one copy for every CPU)."""
    slots = instance.dataplane.map_size("dpp_upf_usage")
    return {"slots": slots, "bytes": slots * ctypes.sizeof(Usage)}


def grow(instance: Instance, sessions: int) -> None:
    """Sessions instance.sessions..sessions-1 into both tables, in batches through the tables."""
    if sessions <= instance.sessions:
        return
    first = instance.sessions
    if instance.name == "hashed":
        tables = {"dpp_upf_downlink": workload.downlink_arrays(first, sessions, instance.output)}
    else:
        policed = instance.name in workload.POLICED
        ways, overflow = workload.dl4_arrays(first, sessions, instance.dataplane.map_size("dpp_upf_dl4"),
                                             instance.output, policed)
        if len(overflow):
            raise WrongPathError(f"{instance.name}: {len(overflow):,} sessions' buckets of dpp_upf_dl4 are full")
        tables = {
            "dpp_upf_teids": workload.uplink_arrays(first, sessions, instance.n9, instance.output, policed),
            "dpp_upf_dl4": ways,
            "dpp_upf_ue4": workload.pool_arrays(first, sessions, instance.output, policed),
        }
        if policed:  # the policers and their CPUs' shares first: no entry names an empty one
            install(instance, "dpp_policers", workload.policer_arrays(first, sessions, instance.name))
            install_shares(instance, first, sessions)
    for name, arrays in tables.items():
        install(instance, name, arrays)
    instance.sessions = sessions
    print(f"  {instance.name}: {sessions:,} sessions installed", file=sys.stderr, flush=True)


def install(instance: Instance, name: str, arrays: workload.TableArrays) -> None:
    """`arrays` into table `name`, in batches, timed."""
    table = instance.dataplane.table(name)
    count = len(arrays.key_words)
    started = time.perf_counter()
    for first in range(0, count, TABLE_BATCH):
        stop = min(first + TABLE_BATCH, count)
        table.update(zip(arrays.keys[first:stop], arrays.values[first:stop]))
    instance.installs.append(Install(name, count, time.perf_counter() - started))


def install_shares(instance: Instance, first: int, sessions: int) -> None:
    """The CPUs' slots of the policers of sessions first..sessions-1 in dpp_policer_stats as the UPF's
    applier writes them once it has written a policer (PolicerApplier.cpu_share: the chunk each CPU
    carves its credit by, none for its windows), in one write, timed: without it their CPUs hold no
    chunk (a chunk of 0 asks for no credit), and every packet would decide on the shared bucket,
    under its lock, where the service's pass on their CPU's credit."""
    share = instance.applier.policers.cpu_share(workload.qer_policer_spec(first, instance.name))
    ids = workload.session_policers(first, sessions).tolist()
    started = time.perf_counter()
    instance.dataplane.table("dpp_policer_stats").fill(ids, share)
    instance.installs.append(Install("dpp_policer_stats", len(ids), time.perf_counter() - started))


# --- subjects ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subject:
    """A program behind harness_walk_head, with its packet, walk, ingress and expected verdict."""

    key: str
    prog_fd: int
    packet: bytes
    walk: Walk
    ifindex: int
    verdict: int
    last_output: bytes  # what the walk's last flow must come out as ("" for the floor: unchecked)

    def run(self, harness: Harness, repeat: int, position: int = 0) -> tuple[int, bytes]:
        harness.set_walk(self.walk, position)
        result = harness.run_walk_head(self.prog_fd, self.packet, repeat, self.ifindex, len(self.packet) + OUTPUT_ROOM)
        if result.retval != self.verdict:
            got = Verdict(result.retval).name if result.retval in iter(Verdict) else str(result.retval)
            hint = " (ABORTED: the harness failed)" if result.retval == Verdict.ABORTED else ""
            raise WrongPathError(f"{self.key}: verdict {got}, expected {Verdict(self.verdict).name}{hint}")
        return result.duration_ns, result.data


def subject_key(case: Case, instance: AnyInstance) -> str:
    """A case's subject: its name, "baseline/" first for the --baseline revision's."""
    return f"{instance.version}/{case.name}" if instance.version else case.name


def case_subject(case: Case, instance: AnyInstance, active: int) -> Subject:
    walk, packet = case.walk(active), case.packet()
    last = walk.flow_at(active - 1)
    expected = case.expected(workload.walked(packet, walk, last), last)
    ifindex = interface_index(case.ingress)
    key = subject_key(case, instance)
    return Subject(key, instance.prog_fd, packet, walk, ifindex, Verdict[case.verdict], expected)


def floor_subject(harness: Harness, name: str, active: int) -> Subject:
    packet_of, walk_of, ingress = FLOOR_PACKETS[name]
    return Subject(f"floor/{name}", harness.empty_fd, packet_of(), walk_of(active), interface_index(ingress),
                   Verdict.PASS, b"")


# --- path checks -------------------------------------------------------------------------------


def _counts(dataplane: Dataplane) -> dict[str, dict[str, int]]:
    return {
        "verdicts": {name: packets for name, (packets, _) in dataplane.verdict_stats().items()},
        "actions": {name: packets for name, (packets, _) in dataplane.action_stats().items()},
        "reasons": {name: packets for name, (packets, _) in dataplane.reason_stats().items()},
    }


def _moved(after: Mapping[str, int], before: Mapping[str, int]) -> dict[str, int]:
    return {name: count - before.get(name, 0) for name, count in after.items() if count != before.get(name, 0)}


def verify(harness: Harness, case: Case, instance: AnyInstance, active: int, rng: random.Random) -> None:
    """One walk over every active session: the pipeline's counters must show exactly that many
    packets with the case's verdict, action and reason (and no other), the last flow's output must
    be the expected frame byte for byte, and so must a sample of other flows' run one by one."""
    where = f"{subject_key(case, instance)} with {instance.sessions:,} sessions, {active:,} active"
    subject = case_subject(case, instance, active)
    before = instance.counts()
    _, output = subject.run(harness, active)
    after = instance.counts()
    expected = {
        "verdicts": {case.verdict: active},
        "actions": {case.action: active},
        "reasons": {case.reason: active} if case.reason else {},
    }
    for kind, counts in expected.items():
        moved = _moved(after[kind], before[kind])
        if moved != counts:
            raise WrongPathError(f"{where}: {kind} counted {moved}, expected {counts}")
    if output != subject.last_output:
        raise WrongPathError(f"{where}: flow {subject.walk.flow_at(active - 1)} came out as {output.hex()}, "
                             f"expected {subject.last_output.hex()}")
    flows = {0, active - 1, *(rng.randrange(active) for _ in range(SAMPLE_FLOWS))}
    for flow in sorted(flows):
        _, output = subject.run(harness, 1, position=flow)
        expected_output = case.expected(workload.walked(subject.packet, subject.walk, flow), flow)
        if output != expected_output:
            raise WrongPathError(f"{where}: flow {flow} came out as {output.hex()}, expected {expected_output.hex()}")


# --- timing ------------------------------------------------------------------------------------


@dataclass
class Level:
    """The samples of every subject at one (sessions installed, sessions active)."""

    installed: int
    active: int
    repeat: int
    samples: dict[str, list[int]] = field(default_factory=dict)


def measure_level(
    harness: Harness,
    instances: Mapping[str, AnyInstance],
    active: int,
    runs: int,
    minimum_repeat: int,
    rng: random.Random,
    cases: Sequence[str] = tuple(CASES),
    twins: Mapping[str, Twin] = {},
) -> Level:
    """`twins`: the --baseline revision's instance of each case of `cases` it has, timed too."""
    installed = min(instance.sessions for instance in instances.values())
    pairs = [(CASES[name], instances[CASES[name].instance]) for name in cases]
    pairs += [(CASES[name], twins[name]) for name in cases if name in twins]
    for case, instance in pairs:
        verify(harness, case, instance, active, rng)
    subjects = [floor_subject(harness, name, active) for name in FLOOR_PACKETS]
    subjects += [case_subject(case, instance, active) for case, instance in pairs]
    level = Level(installed, active, repeat_for(active, minimum_repeat))
    level.samples = {subject.key: [] for subject in subjects}
    started = time.monotonic()
    for _ in range(runs):
        for subject in rng.sample(subjects, len(subjects)):
            ns, output = subject.run(harness, level.repeat)
            if subject.last_output and output != subject.last_output:
                raise WrongPathError(f"{subject.key}: a timed run's last packet came out as {output.hex()}")
            level.samples[subject.key].append(ns)
    print(
        f"  {installed:>9,} sessions, {active:>9,} active: {len(subjects)} subjects x {runs} runs of "
        f"{level.repeat:,} in {time.monotonic() - started:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return level
