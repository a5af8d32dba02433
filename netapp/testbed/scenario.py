"""The paper's experiment on an emulated edge site: 16 GTP-U services inside VXLAN, 8 prioritised.

Flow i is UE 192.168.0.(136 + i) sending RTP-like UDP to port 5004 through GTP-U tunnel
TEID 0x8894D0D0 + i, carried in VXLAN VNI 0x445 from the RAN side to the NetApp node. Flows 0-7 are
priority services steered to CPUs (flow 4 is the paper's own legacy message); flows 8-15 are best
effort. Everything that overflows goes to the alternative node.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.layers.vxlan import VXLAN
from scapy.packet import Raw

from netapp.testbed.topology import EdgeSite

FLOWS = 16
PRIORITY_FLOWS = 8
VNI = 0x445
TEID_BASE = 0x8894D0D0
LEGACY_FLOW = 4  # TEID 0x8894D0D4, UE 192.168.0.140: the paper's example message
PRIORITY_QFI = 5
BEST_EFFORT_QFI = 9
# The GTP-U tunnel's own end points inside the VXLAN segment (the inner Ethernet and IPv4 headers).
INNER_SRC_MAC, INNER_DST_MAC = "02:00:00:00:11:01", "02:00:00:00:11:02"
INNER_SRC_IP, INNER_DST_IP = "172.16.0.1", "172.16.0.2"


@dataclass(frozen=True)
class Flow:
    index: int

    @property
    def teid(self) -> int:
        return TEID_BASE + self.index

    @property
    def ue_ip(self) -> str:
        return f"192.168.0.{136 + self.index}"

    @property
    def priority(self) -> bool:
        return self.index < PRIORITY_FLOWS

    @property
    def intent_id(self) -> str:
        if self.index == LEGACY_FLOW:
            return f"legacy-e918d7{self.index:02x}"
        return f"prio-{self.index}" if self.priority else "best-effort"


def flows() -> list[Flow]:
    return [Flow(i) for i in range(FLOWS)]


def gtpu_tpdu(teid: int, qfi: int, payload: bytes) -> bytes:
    """A GTP-U T-PDU with one PDU Session Container (uplink) carrying the QFI (TS 29.281/38.415)."""
    container = bytes([1, 0x10, qfi & 0x3F, 0])  # length 1 (4 octets), UL PDU type, QFI, no next
    optional = struct.pack("!HBB", 0, 0, 0x85)  # sequence, N-PDU number, next: PDU Session Container
    body = optional + container + payload
    return struct.pack("!BBHI", 0x34, 0xFF, len(body), teid) + body


def ue_packet(flow: Flow, payload_len: int = 64) -> bytes:
    """The UE's packet of a flow, what its GTP-U tunnel carries: IP / UDP 5004."""
    return bytes(IP(src=flow.ue_ip, dst="10.0.0.10") / UDP(sport=40000 + flow.index, dport=5004)
                 / Raw(b"\x80" * payload_len))


def frame(site: EdgeSite, flow: Flow, payload_len: int = 64) -> bytes:
    """The frame the RAN side sends for a flow: VXLAN / inner IP / GTP-U / UE IP / UDP 5004."""
    ue = ue_packet(flow, payload_len)
    qfi = PRIORITY_QFI if flow.priority else BEST_EFFORT_QFI
    inner = (Ether(src=INNER_SRC_MAC, dst=INNER_DST_MAC)
             / IP(src=INNER_SRC_IP, dst=INNER_DST_IP) / UDP(sport=2152, dport=2152)
             / Raw(gtpu_tpdu(flow.teid, qfi, ue)))
    outer = (Ether(src=site.ran0.mac, dst=site.n3.mac) / IP(src=site.ran0.ip, dst=site.n3.ip)
             / UDP(sport=49152 + flow.index, dport=4789) / VXLAN(vni=VNI, flags=0x08) / inner)
    return bytes(outer)


# A CPU count (CPUs 0..n-1) or the CPU ids themselves.
Cpus = int | Sequence[int]


def cpu_ids(cpus: Cpus) -> Sequence[int]:
    return range(cpus) if isinstance(cpus, int) else cpus


def target_cpu(flow: Flow, cpus: Cpus) -> int:
    """The CPU a priority flow is steered to: the CPUs in turn."""
    ids = cpu_ids(cpus)
    return ids[flow.index % len(ids)]


def legacy_message(site: EdgeSite, cpus: Cpus) -> dict:
    """The paper's message, as a slicing manager would send it for flow 4."""
    flow = Flow(LEGACY_FLOW)
    return {
        "Resources": [
            {"resourceId": "F8A4C949", "encapsulationID1": f"{VNI:08X}", "encapsulationType1": "vxlan"},
            {"resourceId": "B6E6B2B3", "encapsulationID2": f"{flow.teid:08X}", "encapsulationType2": "gtp"},
            {"resourceId": "5A07C580", "srcIP": flow.ue_ip, "dstPort": "5004"},
        ],
        "Action": {"actionType": "INSERT", "actionName": "PRIO_QUEUE",
                   "flow_hash": f"E918D7{LEGACY_FLOW:02X}", "rx_queue": str(target_cpu(flow, cpus))},
        "Params": [{"paramName": "interfaceName", "paramValue": site.n3.ifname}],
    }


def priority_intent(site: EdgeSite, flow: Flow, cpus: Cpus) -> dict:
    return {
        "id": flow.intent_id,
        "priority": 200,
        "match": {"interface": site.n3.ifname, "overlay": "vxlan", "vni": VNI, "teid": flow.teid},
        "action": {"type": "steer", "cpu": target_cpu(flow, cpus)},
        "alternative": 0,
        "label": f"priority GTP-U service {flow.index}",
    }


def document(site: EdgeSite, cpus: Cpus) -> dict:
    """The intents document of the experiment: priority steering, best effort, the alternative."""
    intents: list[dict] = [
        priority_intent(site, flow, cpus) for flow in flows()
        if flow.priority and flow.index != LEGACY_FLOW
    ]
    intents.append(legacy_message(site, cpus))
    intents.append({
        "id": "best-effort", "priority": 10, "traffic_class": "best-effort",
        "match": {"interface": site.n3.ifname, "overlay": "vxlan", "vni": VNI},
        "action": {"type": "pass"}, "alternative": 0,
        "label": "every other service of the VXLAN segment",
    })
    return {
        "intents": intents,
        "alternatives": [{"id": 0, "members": [{
            "mac": site.alt0.mac, "source_mac": site.alt.mac, "ip4": site.alt0.ip,
            "interface": site.alt.ifname,
        }]}],
        "cpus": [{"cpu": cpu} for cpu in cpu_ids(cpus)],
        "default_verdict": "pass",
        "default_alternative": 0,
    }


def best_effort_slice() -> dict:
    """The experiment's best-effort services as an eMBB slice: no dedicated CPUs, so its traffic
    is processed locally and overflows to the alternative node when the local CPU is overloaded."""
    return {
        "id": "embb",
        "snssai": {"sst": 1, "sd": "000001"},
        "priority_level": 80,
        "mbr_kbps": 100_000,
        "members": {"teids": [flow.teid for flow in flows() if not flow.priority]},
        "alternative": 0,
    }
