"""Protected streams (netapp/frer/models.py) into the entries of FRER's maps: the identities into
dpp_frer_null and dpp_frer_ip (several may name one stream, none two; an IP identity's key under
its mask, the masks into dpp_frer_ip_masks), the stream's role into
dpp_frer_streams, its recovery function into dpp_frer_recovery, its member ports into
dpp_frer_members and the distinct sets of member ports into dpp_frer_tx (groups_of, assign_groups).
Interfaces are named here and resolved
to ifindexes by the caller's `ifindex` (the node's namespace is the caller's to know); a name that
resolves to nothing is the stream's error, naming the field."""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address
from typing import Callable, Iterable, Mapping, Optional, Sequence, Union

from netapp.dataplane.abi import FlowKey
from netapp.dataplane.groups import GroupPlan, plan_groups
from netapp.frer.abi import (MAX_IP_MASKS, MAX_PORTS, MAX_STREAMS, VLAN_ANY, Algo, Member, NullKey, Recovery, Role,
                             Stream)
from netapp.frer.model import RecoveryConfig
from netapp.frer.models import (FrerStream, IpStreamIdentification, NullStreamIdentification, SequenceRecovery,
                               tagged_of)
from netapp.frer.slots import recovery_value
from netapp.intents.errors import IntentError
from netapp.intents.fields import protocol_number

MS = 1_000_000


@dataclass
class FrerTables:
    """What the streams write, map by map (keys and values as ctypes mirrors)."""

    null: dict[bytes, tuple[NullKey, int]] = field(default_factory=dict)
    ip: dict[bytes, tuple[FlowKey, int]] = field(default_factory=dict)
    ip_masks: list[FlowKey] = field(default_factory=list)  # dpp_frer_ip_masks, slot by slot
    streams: dict[int, Stream] = field(default_factory=dict)
    recovery: dict[int, Recovery] = field(default_factory=dict)
    members: dict[tuple[int, int], Member] = field(default_factory=dict)
    tx_ports: list[int] = field(default_factory=list)  # the node's FRER ports: every group's, in order of first use


Group = dict[int, bool]  # a group of dpp_frer_tx: member ifindex -> whether it runs the egress program
GroupKey = tuple[tuple[int, bool], ...]  # a group's ports as a key: its items, sorted


def groups_of(tables: FrerTables) -> dict[int, Group]:
    """Each generated stream's ports, by stream handle: its member ports, the egress program on those
    that name a VLAN id (the others' copies leave as they are)."""
    groups: dict[int, Group] = {}
    for (handle, ifindex), member in sorted(tables.members.items()):
        groups.setdefault(handle, {})[ifindex] = bool(member.vlan)
    return groups


def group_key(group: Group) -> GroupKey:
    return tuple(sorted(group.items()))


def assign_groups(tables: FrerTables, current: Mapping[GroupKey, int], held: Iterable[int] = ()) -> GroupPlan[GroupKey]:
    """The entries of dpp_frer_tx the tables' generated streams replicate through, one per distinct
    set of ports, planned from `current` (netapp.dataplane.groups.plan_groups; `held`: entries the map
    holds besides), each stream's tx_group set to its set's. GroupsFull when no entry is free."""
    by_stream = {handle: group_key(group) for handle, group in groups_of(tables).items()}
    plan = plan_groups(current, set(by_stream.values()), MAX_STREAMS, held)
    for handle, key in by_stream.items():
        tables.streams[handle].tx_group = plan.assigned[key]
    return plan


def identity_vlan(tagged: str, vlan: Optional[int]) -> int:
    """The VLAN id a frame of the identity has as the data path reads it: the identity's (tagged), 0
    (priority: untagged and priority-tagged frames alike read 0), or VLAN_ANY (all)."""
    return {"tagged": vlan or 0, "priority": 0, "all": VLAN_ANY}[tagged]


def null_key(identity: NullStreamIdentification) -> NullKey:
    """Its destination and VLAN (identity_vlan); VLAN_ANY the data path looks up after the frame's."""
    key = NullKey(vlan=identity_vlan(tagged_of(identity.tagged, identity.vlan), identity.vlan))
    key.dmac[:] = bytes.fromhex(identity.destination_mac.replace(":", ""))
    return key


def address_words(words, address: Union[IPv4Address, IPv6Address]) -> None:  # noqa: ANN001
    """An address into a key's four __u32 words, in network order (IPv4 in the first)."""
    packed = address.packed.ljust(16, b"\0")
    for i in range(4):
        words[i] = int.from_bytes(packed[4 * i : 4 * i + 4], "little")


def ip_key(identity: IpStreamIdentification) -> FlowKey:
    """As the data path's parsers fill a struct dpp_flow_key, masked by ip_mask (addresses in network
    order, numbers in host order); .shape is the mask's, set by the compiler."""
    key = FlowKey(
        vlan=identity.vlan or 0,  # priority: 0, all: masked out
        family=identity.family,
        proto=protocol_number(identity.protocol) or 0,
        dscp=identity.dscp or 0,
        sport=identity.source_port or 0,
        dport=identity.destination_port or 0,
    )
    for words, network in ((key.src, identity.source), (key.dst, identity.destination)):
        if network is not None:
            address_words(words, network.network_address)
    return key


def ip_mask(identity: IpStreamIdentification) -> FlowKey:
    """The bits of a frame's key the identity compares: the family always, every parameter it gives
    (the VLAN too, 0 for priority), the prefix of each address; the ones it leaves out match anything
    (tagged all: any VLAN, tagged or not)."""
    mask = FlowKey(
        vlan=0 if tagged_of(identity.tagged, identity.vlan) == "all" else 0xFFFF,
        family=0xFF,
        proto=0xFF if identity.protocol is not None else 0,
        dscp=0xFF if identity.dscp is not None else 0,
        sport=0xFFFF if identity.source_port is not None else 0,
        dport=0xFFFF if identity.destination_port is not None else 0,
    )
    for words, network in ((mask.src, identity.source), (mask.dst, identity.destination)):
        if network is not None:
            address_words(words, network.netmask)
    return mask


def specificity(mask: FlowKey) -> int:
    """How many bits a mask compares: the data path tries the most specific first."""
    return sum(bin(byte).count("1") for byte in bytes(mask))


def recovery_config(recovery: SequenceRecovery) -> RecoveryConfig:
    latent = recovery.latent_error_detection
    return RecoveryConfig(
        algo=Algo.MATCH if recovery.algorithm == "match" else Algo.VECTOR,
        history_len=recovery.history_length,
        reset_ns=recovery.reset_timeout_ms * MS,
        individual=recovery.individual_recovery,
        take_no_sequence=recovery.take_no_sequence,
        latent=latent is not None,
        latent_difference=latent.difference if latent else 0,
        latent_period_ns=latent.period_ms * MS if latent else 0,
        latent_reset_period_ns=latent.reset_period_ms * MS if latent else 0,
        latent_paths=latent.paths if latent else 2,
    )


Describe = Callable[[int, str], str]  # (a stream's handle, the field of its identity) -> words for an error


def describe_by_handle(handle: int, where: str) -> str:
    return f"stream {handle} ({where})"


@dataclass(frozen=True)
class StreamParts:
    """What a stream writes that depends on its definition alone, neither on the node's interfaces
    nor on the other streams: the same for as long as the stream is, so a caller may keep it
    between compiles. Shared between compiles, hence never changed (the compiler copies an IP key
    before it numbers its mask)."""

    identities: list[tuple[Optional[NullKey], Optional[tuple[FlowKey, FlowKey]]]]  # null key, or IP key and mask
    recovery: Optional[Recovery]  # the recovery slot's value, a recovered stream's


def stream_parts(stream: FrerStream) -> StreamParts:
    identities = [(null_key(identity.null) if identity.null is not None else None,
                   (ip_key(identity.ip), ip_mask(identity.ip)) if identity.ip is not None else None)
                  for identity in stream.identification]
    recovery = stream.recovery
    return StreamParts(identities=identities, recovery=None if recovery is None else
                       recovery_value(recovery_config(recovery), pop=recovery.pop))


class _Compiler:
    def __init__(self, ifindex: Callable[[str], Optional[int]], describe: Describe):
        self.ifindex = ifindex
        self.describe = describe
        self.tables = FrerTables()
        self.problems: list[tuple[str, str]] = []
        self.owners: dict[bytes, tuple[int, str]] = {}
        self.ip_identities: list[tuple[FlowKey, FlowKey, int, str]] = []  # key, mask, handle, where

    def resolve(self, where: str, name: str) -> int:
        index = self.ifindex(name)
        if not index:
            self.problems.append((where, f"no interface {name!r} on this node"))
            return 0
        return index

    def claim(self, key: bytes, handle: int, where: str) -> bool:
        """An identity names one stream: a second claim is the later stream's error."""
        owner = self.owners.setdefault(key, (handle, where))
        if owner[0] != handle:
            self.problems.append((where, f"the same frames as {self.describe(*owner)}"))
            return False
        return True

    def identities(self, stream: FrerStream, parts: StreamParts, at: str) -> None:
        for i, (nkey, ip) in enumerate(parts.identities):
            where = f"{at}.identification[{i}]"
            if nkey is not None:
                if self.claim(b"n" + bytes(nkey), stream.handle, where):
                    self.tables.null[bytes(nkey)] = (nkey, stream.handle)
            elif ip is not None:
                key, mask = ip
                self.ip_identities.append((FlowKey.from_buffer_copy(key), mask, stream.handle, where))

    def ip_tables(self) -> None:
        """The IP identities' masks in slots, the most specific first, and their keys under them:
        each key holds its mask's slot + 1 in .shape, as the data path's masked key does."""
        masks: dict[bytes, FlowKey] = {}
        for _, mask, _, where in self.ip_identities:
            if bytes(mask) not in masks and len(masks) == MAX_IP_MASKS:
                self.problems.append((f"{where}.ip", f"compares another set of fields: a node's IP identities compare "
                                                     f"at most {MAX_IP_MASKS} different sets (parameters and prefix lengths)"))
                return
            masks.setdefault(bytes(mask), FlowKey.from_buffer_copy(bytes(mask)))
        ordered = sorted(masks.items(), key=lambda item: specificity(item[1]), reverse=True)
        slots = {raw: slot for slot, (raw, _) in enumerate(ordered)}
        for slot, (_, mask) in enumerate(ordered):
            mask.shape = slot + 1
        self.tables.ip_masks = [mask for _, mask in ordered]
        for key, mask, handle, where in self.ip_identities:
            key.shape = slots[bytes(mask)] + 1
            if self.claim(b"i" + bytes(key), handle, where):
                self.tables.ip[bytes(key)] = (key, handle)

    def generation(self, stream: FrerStream, at: str) -> None:
        assert stream.generation is not None
        self.tables.streams[stream.handle] = Stream(role=Role.GENERATE)
        for i, port in enumerate(stream.generation.ports):
            index = self.resolve(f"{at}.generation.ports[{i}].interface", port.interface)
            if not index:
                continue
            if index not in self.tables.tx_ports:
                self.tables.tx_ports.append(index)
            self.tables.members[(stream.handle, index)] = Member(vlan=port.vlan or 0)

    def recovery(self, stream: FrerStream, parts: StreamParts, at: str) -> None:
        recovery = stream.recovery
        assert recovery is not None and parts.recovery is not None
        deliver = 0
        if recovery.deliver_interface is not None:
            deliver = self.resolve(f"{at}.recovery.deliver_interface", recovery.deliver_interface)
        self.tables.streams[stream.handle] = Stream(role=Role.RECOVER, deliver_ifindex=deliver)
        self.tables.recovery[stream.handle] = parts.recovery

    def stream(self, stream: FrerStream, parts: StreamParts, at: str) -> None:
        if stream.handle in self.tables.streams:
            self.problems.append((f"{at}.handle", f"stream {stream.handle} is given twice"))
            return
        self.identities(stream, parts, at)
        if stream.generation is not None:
            self.generation(stream, at)
        else:
            self.recovery(stream, parts, at)


def compile_streams(streams: Sequence[FrerStream], ifindex: Callable[[str], Optional[int]],
                    describe: Describe = describe_by_handle,
                    parts: Optional[Sequence[StreamParts]] = None) -> FrerTables:
    """The map entries of `streams`; IntentError naming every field at fault (`describe` words the
    stream whose identity an earlier stream claimed first). The node's FRER ports (tx_ports) are the
    member ports of every generated stream, in order of first use. `parts`: each stream's
    StreamParts, in the same order, as the caller kept them from an earlier compile (none: made here)."""
    compiler = _Compiler(ifindex, describe)
    for i, stream in enumerate(streams):
        compiler.stream(stream, parts[i] if parts is not None else stream_parts(stream), f"streams[{i}]")
    compiler.ip_tables()
    if compiler.problems:
        raise IntentError(compiler.problems)
    if len(compiler.tables.tx_ports) > MAX_PORTS:
        ports = len(compiler.tables.tx_ports)
        raise IntentError([("streams", f"{ports} member ports in all; a node replicates to at most {MAX_PORTS}")])
    return compiler.tables

