"""What the UPF benchmark installs and sends, and what each case must put out.

Session i (0 <= i < S) is one UE: an uplink PDR on TEID TEID_BASE + i, as the UPF chooses them (in
its slot of dpp_upf_teids, sized at load to hold them; outer header removal, to the
core, or in the N9 instance re-encapsulated to N9_PEER with TEID N9_TEID_BASE + i) and a downlink
PDR on UE address UE_BASE + i (to the gNB with TEID DL_TEID_BASE + i, QFI 9 from the QER), one URR
in a slot of its own, 1 + i (dpp_upf_usage is sized at load to the sessions and slot 0: `map_sizes`).
The SMF-given addresses (UE_BASE) are outside the pool: their downlink entries are in ways of
dpp_upf_dl4 (sized at load to twice the sessions, rounded up to a power of two of buckets: where the
applier would put them, the first free way of their bucket; none overflows at these sizes). The
downlink PDR's entry is also in slot i of dpp_upf_ue4 (sized at load to the sessions): the entry of
UE address POOL_BASE + i of the N6 interface's pool (upf.ue_pools: addresses the UPF assigns), which
the `downlink_pool` cases send to. The instance `hashed` holds the same sessions' downlink in
dpp_upf_downlink, its dpp_upf_dl4 two buckets full of addresses no packet goes to (FILLER_BASE):
the `downlink_hash` case's lookup reads a full bucket's four ways, dpp_upf_downlink_state, then the
hash, as an address whose bucket overflowed does.

Session 0 goes through the UPF's own applier (netapp.upf.applier.BpfApplier, which compiles it);
the others are copies of the compiler's entries of session 1 with the varying words rewritten,
written through the generic tables in batches, and the first and last copy of each block are
compared with what the compiler makes of that session.

The packets are flow 0's; the harness (bench/bpf/harness.bpf.c, harness_walk_head) rewrites two
32-bit fields of it on every repetition to make it flow f's: the TEID and the UE source address of
an uplink packet, the UE destination address (both fields) of a downlink one.
"""

from __future__ import annotations

import ctypes
import dataclasses
import sys
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Any, Callable

import numpy
from scapy.contrib.gtp import GTP_U_Header, GTPPDUSessionContainer
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from netapp.qos.abi import Algo, Policer
from netapp.qos.applier import policer_value
from netapp.qos.spec import PolicerSpec
from netapp.upf.abi import DL4_WAYS, MAX_UPF_PDRS, DownlinkKey, Output, PdrAction, PdrFlag
from netapp.upf.compiler import Entries, Site, compile_session
from netapp.upf.policing import PoliceDefaults, policer_spec
from netapp.upf.models import Far, ForwardingParameters, FSeid, FTeid, OuterHeaderCreation, Pdi, Pdr, Qer, Session, Urr
from netapp.upf.pfcp.ies import Interface
from netapp.upf.ways import bucket_of, table_bits

from bench.harness import Walk

# The node: its N3 (GTP-U from the gNB, role N3), N6 (the data network, role N6) and N9 (the next
# UPF, no role: only an egress) interfaces, each a veth with a neighbour of known MAC behind it.
N3_IF, N6_IF, N9_IF = "n3", "n6", "n9"
N3_IP, N3_MAC, GNB, GNB_MAC = "10.3.0.1", "02:00:00:00:03:01", "10.3.0.9", "02:00:00:00:03:09"
N6_IP, N6_MAC, ROUTER, ROUTER_MAC = "10.6.0.1", "02:00:00:00:06:01", "10.6.0.2", "02:00:00:00:06:02"
N9_IP, N9_MAC, N9_PEER, N9_PEER_MAC = "10.9.0.1", "02:00:00:00:09:01", "10.9.0.2", "02:00:00:00:09:02"
DATA_NETWORK = "192.0.2.0/24"  # routed via ROUTER on N6
SERVER = "192.0.2.10"
INTERFACES = {  # name -> (own MAC, own address/prefix, neighbour, neighbour's MAC)
    N3_IF: (N3_MAC, f"{N3_IP}/24", GNB, GNB_MAC),
    N6_IF: (N6_MAC, f"{N6_IP}/24", ROUTER, ROUTER_MAC),
    N9_IF: (N9_MAC, f"{N9_IP}/24", N9_PEER, N9_PEER_MAC),
}

TEID_BASE = 1  # the first TEID netapp.upf.sessions chooses
MISS_TEID_BASE = 0x60000000  # no session has these: past dpp_upf_teids (dpp_upf_uplink holds no TEIDs)
DL_TEID_BASE = 0x20000000
N9_TEID_BASE = 0x30000000
UE_BASE = int(IPv4Address("10.64.0.0"))  # UE i: 10.64.0.0 + i (a /12 holds a million)
POOL_BASE = int(IPv4Address("10.128.0.0"))  # UE i in the pool: 10.128.0.0 + i, slot i of dpp_upf_ue4
FILLER_BASE = int(IPv4Address("198.51.100.0"))  # the `hashed` instance's ways: no packet goes there
HASHED_WAYS = 2 * DL4_WAYS  # its dpp_upf_dl4: two buckets, full
NET_INSTANCE_ID = 1
QFI = 9
# The policed instances' QERs: an MBR each way their policers never run out of (the policers'
# largest rate but one: 400 Gbit/s is not policed); session i's uplink policer 1 + 2i, downlink 2 + 2i;
# by instance, the algorithm (qos.default_algorithm). Their CPUs' slots of dpp_policer_stats as the
# UPF's applier writes them (bench/upf/run.py, install_shares: the token bucket's chunk).
POLICED_MBR_KBPS = 399_000_000
POLICED = {"policed": Algo.TOKEN_BUCKET, "policed_window": Algo.FIXED_WINDOW}
UE_PAYLOAD = bytes(range(64))
NET_INSTANCE = "internet"
SITE = Site(net_instances={NET_INSTANCE: 1}, default_instance=NET_INSTANCE, n3_ipv4=N3_IP, output=Output.FIB)
OUTPUT_ROOM = 64  # what encapsulation may add to a packet
MAX_SESSIONS = MAX_UPF_PDRS  # one uplink and one downlink entry each


def ue_address(i: int) -> str:
    return str(IPv4Address(UE_BASE + i))


def urr_slot(i: int) -> int:
    """Session i's slot of dpp_upf_usage, its own; slot 0 is never given (netapp.upf.sessions)."""
    return 1 + i


def policer_ids(i: int) -> tuple[int, int]:
    """Session i's policers in the policed instances (uplink, downlink); id 0 is never given."""
    return 1 + 2 * i, 2 + 2 * i


def map_sizes(sessions: int, instance: str = "n6") -> dict[str, int]:
    """What an instance holding `sessions` sessions is loaded with: a URR slot for each, and slot 0;
    a slot of dpp_upf_teids for each TEID, and those below them; a slot of dpp_upf_ue4 for each
    session's address in the pool; ways of dpp_upf_dl4 for twice the sessions, in a power of two of
    buckets (the `hashed` instance: two buckets, and only the sessions' downlink; the policed
    instance: two policers each too)."""
    if instance in POLICED:
        policers = policer_ids(sessions - 1)[1] + 1
        return {**map_sizes(sessions), "dpp_policers": policers}
    if instance == "hashed":
        return {"dpp_upf_usage": urr_slot(sessions - 1) + 1, "dpp_upf_teids": TEID_BASE + 1, "dpp_upf_ue4": 1,
                "dpp_upf_dl4": HASHED_WAYS}
    buckets = 1 << max(1, (sessions - 1).bit_length() - 1)  # at least sessions / 2
    return {"dpp_upf_usage": urr_slot(sessions - 1) + 1, "dpp_upf_teids": TEID_BASE + sessions,
            "dpp_upf_ue4": sessions, "dpp_upf_dl4": buckets * DL4_WAYS}


def pool(sessions: int) -> dict[int, tuple[int, int, int]]:
    """The N6 interface's pool (network instance 1), as netapp.upf.pools.Pools.layout gives it:
    POOL_BASE and one address for each session, from slot 0 of dpp_upf_ue4."""
    return {1: (POOL_BASE, sessions, 0)}


def session(i: int, n9: bool = False, teid: int | None = None, n3: str = N3_IP, policed: bool = False) -> Session:
    """UE i's session; with n9 its uplink goes to the next UPF instead of the data network. Its
    uplink TEID is TEID_BASE + i unless `teid` says otherwise, on the UPF's N3 address `n3`. `policed`:
    its QER has an MBR each way (POLICED_MBR_KBPS), its policers `policer_ids(i)`."""
    to_core = ForwardingParameters(destination_interface=Interface.CORE)
    if n9:
        to_core = ForwardingParameters(
            destination_interface=Interface.CORE,
            outer_header_creation=OuterHeaderCreation(kind="gtpu-ipv4", teid=N9_TEID_BASE + i, address=N9_PEER),
        )
    to_gnb = ForwardingParameters(
        destination_interface=Interface.ACCESS,
        outer_header_creation=OuterHeaderCreation(kind="gtpu-ipv4", teid=DL_TEID_BASE + i, address=GNB),
    )
    local = FTeid(teid=TEID_BASE + i if teid is None else teid, ipv4=n3)
    uplink = Pdi(source_interface=Interface.ACCESS, local_fteid=local)
    downlink = Pdi(source_interface=Interface.CORE, ue_ip={"ipv4": ue_address(i), "destination": True})
    return Session(
        seid=i + 1,
        node_id="smf",
        remote=FSeid(seid=i + 1, ipv4="10.0.0.1"),
        pdrs={
            1: Pdr(id=1, precedence=100, pdi=uplink, outer_header_removal=0, far_id=1, qer_ids=(1,), urr_ids=(1,)),
            2: Pdr(id=2, precedence=100, pdi=downlink, far_id=2, qer_ids=(1,), urr_ids=(1,)),
        },
        fars={
            1: Far(id=1, apply_action=frozenset({"FORW"}), forwarding=to_core),
            2: Far(id=2, apply_action=frozenset({"FORW"}), forwarding=to_gnb),
        },
        qers={1: Qer(id=1, qfi=QFI, mbr_ul_kbps=POLICED_MBR_KBPS, mbr_dl_kbps=POLICED_MBR_KBPS) if policed
              else Qer(id=1, qfi=QFI)},
        urrs={1: Urr(id=1, measurement_method=frozenset({"VOLUM"}))},
        qer_policers={1: policer_ids(i)} if policed else {},
    )


def site(output: Output = Output.FIB, instance: str = "n6") -> Site:
    """The compiler's site of an instance: its output and, for the policed ones, their algorithm."""
    return dataclasses.replace(SITE, output=output, police=PoliceDefaults(algo=POLICED.get(instance, Algo.TOKEN_BUCKET)))


def compiled(i: int, n9: bool = False, output: Output = Output.FIB, policed: bool = False) -> Entries:
    return compile_session(session(i, n9, policed=policed), site(output), {1: urr_slot(i)})


# --- bulk entries ------------------------------------------------------------------------------


@dataclass
class TableArrays:
    """Keys and values of one table as contiguous C arrays (views of the numpy words)."""

    keys: Any
    values: Any
    key_words: numpy.ndarray
    value_words: numpy.ndarray


def _words(struct: Any) -> numpy.ndarray:
    return numpy.frombuffer(bytes(struct), dtype=numpy.uint32)


def _network_order(values: numpy.ndarray) -> numpy.ndarray:
    """IPv4 addresses as __u32 words of the wire bytes (netapp.upf.compiler.words)."""
    return values.astype(">u4").view("<u4" if sys.byteorder == "little" else ">u4").astype(numpy.uint32)


def _word(field: Any) -> int:
    return field.offset // 4


def _tiled(key: Any, value: Any, count: int) -> tuple[numpy.ndarray, numpy.ndarray]:
    return numpy.tile(_words(key), (count, 1)), numpy.tile(_words(value), (count, 1))


def _arrays(key_type: Any, value_type: Any, keys: numpy.ndarray, values: numpy.ndarray) -> TableArrays:
    keys, values = numpy.ascontiguousarray(keys), numpy.ascontiguousarray(values)
    return TableArrays(
        (key_type * len(keys)).from_buffer(keys), (value_type * len(values)).from_buffer(values), keys, values
    )


def uplink_arrays(first: int, stop: int, n9: bool = False, output: Output = Output.FIB,
                  policed: bool = False) -> TableArrays:
    """dpp_upf_teids' entries of sessions first..stop-1 (by TEID, marked as there)."""
    ((_, action),) = compiled(first, n9, output, policed).uplink.items()
    action.flags |= PdrFlag.ENTRY
    ids = numpy.arange(first, stop, dtype=numpy.uint32)
    keys = (TEID_BASE + ids).reshape(-1, 1)
    values = numpy.tile(_words(action), (len(ids), 1))
    values[:, _word(PdrAction.urr)] = urr_slot(ids)
    if n9:
        values[:, _word(PdrAction.teid)] = N9_TEID_BASE + ids
    if policed:
        values[:, _word(PdrAction.policer)] = policer_ids(ids)[0]
    arrays = _arrays(ctypes.c_uint32, PdrAction, keys, values)
    _check_ends(arrays, first, stop, lambda i: compiled(i, n9, output, policed).uplink)
    return arrays


def downlink_arrays(first: int, stop: int, output: Output = Output.FIB, policed: bool = False) -> TableArrays:
    """dpp_upf_downlink's entries of sessions first..stop-1."""
    ((key, action),) = compiled(first, output=output, policed=policed).downlink.items()
    ids = numpy.arange(first, stop, dtype=numpy.uint32)
    instance, family, _ = key
    keys, values = _tiled(DownlinkKey(net_instance=instance, family=family), action, len(ids))
    keys[:, _word(DownlinkKey.addr)] = _network_order(UE_BASE + ids)
    values[:, _word(PdrAction.urr)] = urr_slot(ids)
    values[:, _word(PdrAction.teid)] = DL_TEID_BASE + ids
    if policed:
        values[:, _word(PdrAction.policer)] = policer_ids(ids)[1]
    arrays = _arrays(DownlinkKey, PdrAction, keys, values)
    _check_ends(arrays, first, stop, lambda i: compiled(i, output=output, policed=policed).downlink)
    return arrays


def dl4_slots(stop: int, bits: int) -> numpy.ndarray:
    """The way of dpp_upf_dl4 of each session 0..stop-1's SMF-given address, as the applier places
    them one after the other (the first free way of the bucket; -1: the bucket was full, to the
    hash)."""
    addresses = UE_BASE + numpy.arange(stop, dtype=numpy.uint64)
    buckets = bucket_of(NET_INSTANCE_ID, addresses, bits).astype(numpy.int64)
    order = numpy.argsort(buckets, kind="stable")
    sorted_buckets = buckets[order]
    starts = numpy.searchsorted(sorted_buckets, sorted_buckets, side="left")
    ranks = numpy.empty(stop, dtype=numpy.int64)
    ranks[order] = numpy.arange(stop) - starts
    return numpy.where(ranks < DL4_WAYS, buckets * DL4_WAYS + ranks, -1)


def dl4_arrays(first: int, stop: int, slots: int, output: Output = Output.FIB,
               policed: bool = False) -> tuple[TableArrays, numpy.ndarray]:
    """dpp_upf_dl4's ways of sessions first..stop-1 (a table of `slots` ways), published (the address
    in ue_addr, ENTRY set: each checked against dpp_upf_downlink's entry, the compiler's); and the
    sessions whose bucket was full, whose entries go to dpp_upf_downlink instead."""
    downlink = downlink_arrays(first, stop, output, policed)
    way_of = dl4_slots(stop, table_bits(slots))[first:]
    placed = way_of >= 0
    values = downlink.value_words[placed].copy()
    values.view(numpy.uint8)[:, PdrAction.flags.offset] |= numpy.uint8(PdrFlag.ENTRY)
    values[:, _word(PdrAction.ue_addr)] = downlink.key_words[placed, _word(DownlinkKey.addr)]
    keys = way_of[placed].astype(numpy.uint32).reshape(-1, 1)
    return _arrays(ctypes.c_uint32, PdrAction, keys, values), first + numpy.flatnonzero(~placed)


def filler_ways(output: Output = Output.FIB) -> list[tuple[int, PdrAction]]:
    """The `hashed` instance's two buckets full: session 0's downlink action for addresses from
    FILLER_BASE (no packet goes to them), each in the first free way of its bucket."""
    ((_, action),) = compiled(0, output=output).downlink.items()
    ways: dict[int, PdrAction] = {}
    address = FILLER_BASE
    while len(ways) < HASHED_WAYS:
        bucket = bucket_of(NET_INSTANCE_ID, address, table_bits(HASHED_WAYS))
        free = [slot for slot in range(bucket * DL4_WAYS, (bucket + 1) * DL4_WAYS) if slot not in ways]
        if free:
            ways[free[0]] = PdrAction.from_buffer_copy(action)
            ways[free[0]].flags |= PdrFlag.ENTRY
            ways[free[0]].ue_addr = int(_network_order(numpy.array([address]))[0])
        address += 1
    return sorted(ways.items())


def pool_arrays(first: int, stop: int, output: Output = Output.FIB, policed: bool = False) -> TableArrays:
    """dpp_upf_ue4's entries of sessions first..stop-1: each one's downlink entry (that of
    dpp_upf_downlink, checked against the compiler's), in slot i, marked as there."""
    downlink = downlink_arrays(first, stop, output, policed)
    values = downlink.value_words.copy()
    values.view(numpy.uint8)[:, PdrAction.flags.offset] |= numpy.uint8(PdrFlag.ENTRY)
    keys = numpy.arange(first, stop, dtype=numpy.uint32).reshape(-1, 1)
    return _arrays(ctypes.c_uint32, PdrAction, keys, values)


def qer_policer_spec(i: int, instance: str) -> PolicerSpec:
    """What the UPF's applier makes of session i's QER in a policed instance, either way (the same
    MBR both ways)."""
    return policer_spec(session(i, policed=True).qers[1], 0, site(instance=instance).police)


def session_policers(first: int, stop: int) -> numpy.ndarray:
    """The policer ids of sessions first..stop-1, both ways."""
    return numpy.arange(policer_ids(first)[0], policer_ids(stop - 1)[1] + 1, dtype=numpy.uint32)


def policer_arrays(first: int, stop: int, instance: str) -> TableArrays:
    """dpp_policers' slots of sessions first..stop-1 (both ways: the same configuration, the
    applier's of session `first`'s QER, its state zero)."""
    value = policer_value(qer_policer_spec(first, instance))
    ids = session_policers(first, stop)
    return _arrays(ctypes.c_uint32, Policer, ids.reshape(-1, 1), numpy.tile(_words(value), (len(ids), 1)))


def _check_ends(arrays: TableArrays, first: int, stop: int, entries_of: Callable[[int], dict]) -> None:
    """The first and last copy must be the compiler's entry of that session, key and value."""
    for row, i in ((0, first), (stop - first - 1, stop - 1)):
        ((key, value),) = entries_of(i).items()
        if isinstance(key[-1], bytes):  # a downlink key: (instance, family, packed address)
            expected_key = DownlinkKey(net_instance=key[0], family=key[1], addr=tuple(_address_words(key[2])))
        else:  # a TEID's slot of dpp_upf_teids
            expected_key, value.flags = ctypes.c_uint32(key[0]), value.flags | PdrFlag.ENTRY
        got = arrays.keys[row]
        got = ctypes.c_uint32(got) if isinstance(got, int) else got
        if bytes(got) != bytes(expected_key) or bytes(arrays.values[row]) != bytes(value):
            raise AssertionError(f"bulk entry of session {i} differs from the compiler's")


def _address_words(packed: bytes) -> list[int]:
    return [int.from_bytes(packed[i : i + 4], sys.byteorder) for i in range(0, 16, 4)]


# --- packets -----------------------------------------------------------------------------------


def ue_packet(src: str, dst: str, sport: int, dport: int) -> IP:
    """A UE's IPv4/UDP packet; UDP checksum 0, so that rewriting an address leaves it valid."""
    return IP(src=src, dst=dst) / UDP(sport=sport, dport=dport, chksum=0) / UE_PAYLOAD


def uplink_packet(teid: int = TEID_BASE) -> bytes:
    """Flow 0's T-PDU from the gNB: GTP-U with a PDU Session Container (uplink, QFI 9)."""
    gtp = GTP_U_Header(teid=teid, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=1, QFI=QFI)
    outer = Ether(src=GNB_MAC, dst=N3_MAC) / IP(src=GNB, dst=N3_IP) / UDP(sport=2152, dport=2152)
    return bytes(outer / gtp / ue_packet(ue_address(0), SERVER, 40000, 5004))


def downlink_packet(ue: str | None = None) -> bytes:
    """Flow 0's packet from the data network to UE 0 (at `ue`: its address in the pool)."""
    return bytes(Ether(src=ROUTER_MAC, dst=N6_MAC) / ue_packet(SERVER, ue or ue_address(0), 5004, 40000))


def pool_packet() -> bytes:
    return downlink_packet(str(IPv4Address(POOL_BASE)))


UE_OFF_UPLINK = len(uplink_packet()) - len(ue_packet(ue_address(0), SERVER, 40000, 5004))
UE_OFF_DOWNLINK = 14


def uplink_walk(flows: int, teid_base: int = TEID_BASE) -> Walk:
    data = uplink_packet(teid_base)
    teid_off = data.index(teid_base.to_bytes(4, "big"), 42)
    return Walk(flows, teid_base, UE_BASE, teid_off, UE_OFF_UPLINK + 12)


def downlink_walk(flows: int, base: int = UE_BASE) -> Walk:
    dst = UE_OFF_DOWNLINK + 16
    return Walk(flows, base, base, dst, dst)


def pool_walk(flows: int) -> Walk:
    return downlink_walk(flows, POOL_BASE)


def walked(packet: bytes, walk: Walk, flow: int) -> bytes:
    """The packet as the harness makes it for `flow`."""
    data = bytearray(packet)
    data[walk.teid_off : walk.teid_off + 4] = (walk.teid_base + flow).to_bytes(4, "big")
    data[walk.src_off : walk.src_off + 4] = (walk.src_base + flow).to_bytes(4, "big")
    return bytes(data)


def gtpu_to(src_mac: str, dst_mac: str, dst: str, teid: int, pdu_type: int, ue: bytes) -> bytes:
    """What the UPF's encapsulation must make of the UE packet `ue` (dataplane/bpf/nf/upf/encap.h, as
    TS 29.281 and 38.415 say: IPv4 without options, id 0, TTL 64, UDP checksum 0, one PDU Session
    Container)."""
    ip = IP(src=N3_IP, dst=dst, id=0, ttl=64)
    outer = Ether(src=src_mac, dst=dst_mac) / ip / UDP(sport=2152, dport=2152, chksum=0)
    gtp = GTP_U_Header(teid=teid, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=pdu_type, QFI=QFI)
    return bytes(outer / gtp / Raw(ue))


# --- cases -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One path of the UPF: its packet, walk, ingress, the instance it runs on, and what it must do."""

    name: str
    title: str
    instance: str  # "n6", "n9" or "tx" (INSTANCES)
    ingress: str
    floor: str  # the floor subject of its packet length
    verdict: str
    action: str
    reason: str  # "" for none
    packet: Callable[[], bytes]
    walk: Callable[[int], Walk]
    expected: Callable[[bytes, int], bytes]  # (the walked input, flow) -> the output


def _uplink_out(sent: bytes, flow: int) -> bytes:
    return bytes(Ether(src=N6_MAC, dst=ROUTER_MAC, type=0x0800) / Raw(sent[UE_OFF_UPLINK:]))


def _downlink_out(sent: bytes, flow: int) -> bytes:
    return gtpu_to(N3_MAC, GNB_MAC, GNB, DL_TEID_BASE + flow, 0, sent[UE_OFF_DOWNLINK:])


def _n9_out(sent: bytes, flow: int) -> bytes:
    return gtpu_to(N9_MAC, N9_PEER_MAC, N9_PEER, N9_TEID_BASE + flow, 1, sent[UE_OFF_UPLINK:])


def _uplink_tx_out(sent: bytes, flow: int) -> bytes:
    """Decapsulated, the frame's MACs kept and swapped (XDP_TX back to where it came from)."""
    return bytes(Ether(src=N3_MAC, dst=GNB_MAC, type=0x0800) / Raw(sent[UE_OFF_UPLINK:]))


def _downlink_tx_out(sent: bytes, flow: int) -> bytes:
    return gtpu_to(N6_MAC, ROUTER_MAC, GNB, DL_TEID_BASE + flow, 0, sent[UE_OFF_DOWNLINK:])


# name -> (sessions to the next UPF instead of the data network, how forwarded packets leave)
INSTANCES = {"n6": (False, Output.FIB), "n9": (True, Output.FIB), "tx": (False, Output.TX),
             "hashed": (False, Output.FIB), "policed": (False, Output.FIB), "policed_window": (False, Output.FIB)}


CASES = {
    case.name: case
    for case in (
        Case("uplink", "uplink decap + forward (FIB to N6)", "n6", N3_IF, "uplink", "REDIRECT", "upf", "",
             uplink_packet, uplink_walk, _uplink_out),
        Case("downlink", "downlink encap (IPv4 outer, PSC)", "n6", N6_IF, "downlink", "REDIRECT", "upf", "",
             downlink_packet, downlink_walk, _downlink_out),
        Case("downlink_hash", "downlink encap, its bucket full (the hash)", "hashed", N6_IF, "downlink", "REDIRECT",
             "upf", "", downlink_packet, downlink_walk, _downlink_out),
        Case("n9", "N9 re-encap (FIB to N9)", "n9", N3_IF, "uplink", "REDIRECT", "upf", "",
             uplink_packet, uplink_walk, _n9_out),
        Case("uplink_tx", "uplink decap, XDP_TX (no FIB)", "tx", N3_IF, "uplink", "TX", "upf", "",
             uplink_packet, uplink_walk, _uplink_tx_out),
        Case("downlink_tx", "downlink encap, XDP_TX (no FIB)", "tx", N6_IF, "downlink", "TX", "upf", "",
             downlink_packet, downlink_walk, _downlink_tx_out),
        Case("downlink_pool", "downlink encap, UE address of a pool (array)", "n6", N6_IF, "downlink", "REDIRECT",
             "upf", "", pool_packet, pool_walk, _downlink_out),
        Case("downlink_pool_tx", "downlink encap of a pool's, XDP_TX (no FIB)", "tx", N6_IF, "downlink", "TX",
             "upf", "", pool_packet, pool_walk, _downlink_tx_out),
        Case("uplink_policed", "uplink decap + forward, policed (token bucket)", "policed", N3_IF, "uplink",
             "REDIRECT", "upf", "", uplink_packet, uplink_walk, _uplink_out),
        Case("downlink_pool_policed", "downlink encap of a pool's, policed (token bucket)", "policed", N6_IF,
             "downlink", "REDIRECT", "upf", "", pool_packet, pool_walk, _downlink_out),
        Case("uplink_policed_window", "uplink decap + forward, policed (fixed window)", "policed_window", N3_IF,
             "uplink", "REDIRECT", "upf", "", uplink_packet, uplink_walk, _uplink_out),
        Case("downlink_pool_policed_window", "downlink encap of a pool's, policed (fixed window)", "policed_window",
             N6_IF, "downlink", "REDIRECT", "upf", "", pool_packet, pool_walk, _downlink_out),
        Case("miss", "TEID miss", "n6", N3_IF, "uplink", "DROP", "default", "upf_teid_miss",
             lambda: uplink_packet(MISS_TEID_BASE), lambda flows: uplink_walk(flows, MISS_TEID_BASE),
             lambda sent, flow: sent),
    )
}
FLOOR_PACKETS = {"uplink": (uplink_packet, uplink_walk, N3_IF), "downlink": (downlink_packet, downlink_walk, N6_IF)}
