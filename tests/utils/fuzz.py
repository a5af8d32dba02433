"""Differential fuzz of the data plane: random nested frames and random intents, run through the real
XDP program (BPF_PROG_TEST_RUN, trace on), compared with the reference parser and classifier
(refparser.py, refclassify.py).

Frames are built from raw bytes with a seeded random.Random, fast enough for thousands per second:
VLAN/QinQ, IPv4 options and IPv6 extension headers, fragments, VXLAN (I flag set or not), GENEVE
and GRE (key or not) carrying Ethernet or IP, GTP-U with extension chains (PDU Session Containers
among them, sometimes two, sometimes a last one of length 0), UE TCP/UDP/SCTP/ICMP or a non-IP
T-PDU; then damage: Ethernet padding, lengths that lie, truncation, a flipped byte. Intents are
drawn from the same small pools of addresses, ports and tunnel ids, so that they match often and
tie often.
"""

from __future__ import annotations

import ipaddress
import random
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from tests.utils import refclassify

MIN_FRAME = 14  # BPF_PROG_TEST_RUN refuses shorter frames
V4 = ["10.0.0.1", "10.0.0.2", "10.0.1.9", "192.168.0.140", "172.16.0.1"]
V6 = ["2001:db8::1", "2001:db8::2", "2001:db8:0:1::9", "fd00::1"]
PORTS = [53, 80, 443, 2152, 3868, 4789, 5004, 6081, 38412]
VNIS = [0, 1, 7, 0x445]
TEIDS = [0, 1, 0x8894D0D4]
QFIS = [0, 1, 5, 9]
VLANS = [1, 100]
DSCPS = [0, 10, 46]
ETH_IP4, ETH_IP6, ETH_TEB, ETH_ARP, ETH_8021Q, ETH_8021AD = 0x0800, 0x86DD, 0x6558, 0x0806, 0x8100, 0x88A8
VXLAN_PORT, GENEVE_PORT, GTPU_PORT = 4789, 6081, 2152
PSC = 0x85


def _addr(text: str) -> bytes:
    return ipaddress.ip_address(text).packed


class FrameMaker:
    """Random frames from one seeded generator; every choice goes through self.rng."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.n3 = False  # this frame keeps to the N3 fast path's layout, until damaged

    def family(self) -> int:
        return 4 if self.n3 else self.pick([4, 6])

    def vlan_count(self, choices: list[int]) -> int:
        return 0 if self.n3 else self.pick(choices)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, values):
        return self.rng.choice(values)

    def port(self) -> int:
        return self.pick(PORTS) if self.chance(0.8) else self.rng.randrange(65536)

    # --- L2 / L3 ------------------------------------------------------------------------------

    def ether(self, payload: bytes, ethertype: int, vlans: int) -> bytes:
        tags, types = b"", [ETH_8021AD if vlans == 2 else ETH_8021Q, ETH_8021Q][:vlans] + [ethertype]
        for index in range(vlans):
            tags += struct.pack("!HH", self.pick(VLANS) | (self.rng.randrange(8) << 13), types[index + 1])
        return b"\x02\0\0\0\0\x01\x02\0\0\0\0\x02" + struct.pack("!H", types[0]) + tags + payload

    def length_lie(self) -> int:
        return self.pick([-9, -4, -1, 1, 4]) if self.chance(0.03) else 0

    def ipv4(self, payload: bytes, proto: int, *, later_fragment: bool = False) -> bytes:
        options = b"\x01" * 4 * (self.rng.randrange(1, 4) if self.chance(0.15) and not self.n3 else 0)
        ihl = 5 + len(options) // 4
        frag = self.rng.randrange(1, 0x2000) if later_fragment else (0x2000 if self.chance(0.05) else 0)
        tot_len = max(0, 20 + len(options) + len(payload) + self.length_lie())
        tos = self.pick(DSCPS) << 2
        header = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos, tot_len, 1, frag, 64, proto, 0,
                             _addr(self.pick(V4)), _addr(self.pick(V4)))  # fmt: skip
        return header + options + payload

    def ipv6(self, payload: bytes, proto: int, *, later_fragment: bool = False) -> bytes:
        depth = self.pick([0] * 6 + [1, 2, 6]) if self.chance(0.95) else 7  # 7: one past the limit
        chain = [self.pick([0, 43, 60, 51]) for _ in range(depth)]
        if later_fragment or self.chance(0.03):
            chain.append(44)
        exts, next_types = b"", chain[1:] + [proto]
        for kind, next_type in zip(chain, next_types):
            if kind == 44:
                offset = self.rng.randrange(1, 0x2000) if later_fragment else 0
                exts += struct.pack("!BBHI", next_type, 0, offset << 3, 7)
            elif kind == 51:
                exts += struct.pack("!BB", next_type, 4) + bytes(22)  # AH: (4 + 2) * 4 bytes
            else:
                exts += struct.pack("!BB", next_type, 0) + b"\x01\x04\0\0\0\0"  # PadN
        first = chain[0] if chain else proto
        plen = max(0, len(exts) + len(payload) + self.length_lie())
        tc = self.pick(DSCPS) << 2
        header = struct.pack("!IHBB16s16s", (6 << 28) | (tc << 20), plen, first, 64,
                             _addr(self.pick(V6)), _addr(self.pick(V6)))  # fmt: skip
        return header + exts + payload

    def ip(self, payload: bytes, proto: int, family: int, **options) -> tuple[bytes, int]:
        if family == 4:
            return self.ipv4(payload, proto, **options), ETH_IP4
        return self.ipv6(payload, proto, **options), ETH_IP6

    def udp(self, payload: bytes, dport: int) -> bytes:
        length = max(0, 8 + len(payload) + self.length_lie())
        return struct.pack("!HHHH", self.port(), dport, length, 0) + payload

    # --- overlays and GTP-U -------------------------------------------------------------------

    def vxlan(self, inner: bytes) -> bytes:
        flags = 0x08 if self.chance(0.85) else self.pick([0x00, 0x0C])
        return struct.pack("!BxxxI", flags, self.pick(VNIS) << 8) + inner

    def geneve(self, inner: bytes, ethertype: int) -> bytes:
        options = bytes(4 * self.pick([0, 0, 1, 3]))
        return struct.pack("!BBHI", len(options) // 4, 0, ethertype, self.pick(VNIS) << 8) + options + inner

    def gre(self, inner: bytes, ethertype: int) -> bytes:
        checksum, key, seq = self.chance(0.3), self.chance(0.6), self.chance(0.3)
        flags = (0x8000 if checksum else 0) | (0x2000 if key else 0) | (0x1000 if seq else 0)
        optional = (bytes(4) if checksum else b"") + (struct.pack("!I", self.pick(VNIS)) if key else b"")
        return struct.pack("!HH", flags, ethertype) + optional + (b"\0\0\0\x09" if seq else b"") + inner

    def gtp_extensions(self) -> list[tuple[int, bytes]]:
        chain = []
        for _ in range(self.pick([0, 1] if self.n3 else [0, 1, 1, 2, 3])):
            if self.chance(0.6):
                chain.append((PSC, bytes([self.pick([0, 1, 2]) << 4, self.pick(QFIS)])))
            else:
                chain.append((self.pick([0x40, 0xC0, 0x81]), bytes(self.pick([2, 6]))))
        return chain

    def gtpu(self, payload: bytes) -> bytes:
        chain = self.gtp_extensions()
        encoded = b""
        for index, (_, content) in enumerate(chain):
            next_type = chain[index + 1][0] if index + 1 < len(chain) else 0
            encoded += bytes([(len(content) + 2) // 4]) + content + bytes([next_type])
        if chain and not self.n3 and self.chance(0.03):
            # The chain goes on to a header of length 0 (TS 29.281: invalid) that ends the message,
            # in fewer than its 4 octets or not: cut short and malformed (trunc_gtp), or malformed.
            encoded = encoded[:-1] + bytes([self.pick([PSC, 0x40])])
            payload = bytes(1 + self.rng.randrange(6))
        seq = self.chance(0.2)
        optional = struct.pack("!HBB", 1, 0, chain[0][0] if chain else 0) if chain or seq else b""
        flags = 0x30 | (0x04 if chain else 0) | (0x02 if seq else 0)
        msg_type = 0xFF if self.chance(0.95) else self.pick([1, 2, 26, 254])
        length = len(optional) + len(encoded) + len(payload)
        return struct.pack("!BBHI", flags, msg_type, length, self.pick(TEIDS)) + optional + encoded + payload

    # --- whole frames ---------------------------------------------------------------------------

    def l4(self, family: int, depth: str) -> tuple[bytes, int]:
        """A transport header no one decapsulates at this depth: (bytes, protocol)."""
        kind = self.pick(["udp", "tcp", "sctp", "icmp", "other"])
        sport, dport = self.port(), self.port()
        if kind == "udp":
            if depth != "ue":
                dport = self.pick([p for p in PORTS if p not in (VXLAN_PORT, GENEVE_PORT, GTPU_PORT)])
            return struct.pack("!HHHH", sport, dport, 8 + 2, 0) + b"ue", 17
        if kind == "tcp":
            return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 0x50, 2, 1024, 0, 0), 6
        if kind == "sctp":
            return struct.pack("!HHII", sport, dport, 0x1234, 0) + bytes(self.pick([0, 16])), 132
        if kind == "icmp":
            message = bytes([self.pick([0, 3, 8, 128]), self.pick([0, 3]), 0, 0]) + bytes(4)
            return message, 1 if family == 4 else 58
        return bytes(self.rng.randrange(0, 12)), self.pick([50, 89, 103, 59])

    def innermost(self, depth: str) -> tuple[bytes, int]:
        family = self.family()
        if self.chance(0.05):
            return self.ip(bytes(16), self.pick([6, 17, 132]), family, later_fragment=True)
        segment, proto = self.l4(family, depth)
        return self.ip(segment, proto, family)

    def frame(self) -> bytes:
        self.n3 = self.chance(0.2)
        overlay = self.pick([None, None, "vxlan", "geneve-eth", "geneve-ip", "gre-eth", "gre-ip"])
        with_gtp = self.chance(0.5)
        if self.n3:
            overlay, with_gtp = "vxlan", True
        if with_gtp and self.chance(0.05):
            tail, tail_type = b"\x00" + bytes(self.rng.randrange(20)), None  # a non-IP T-PDU
        else:
            tail, tail_type = self.innermost("ue" if with_gtp else "inner" if overlay else "outer")
        if with_gtp:
            gtp = self.cut(self.gtpu(self.cut(tail)))
            tail, tail_type = self.ip(self.udp(gtp, GTPU_PORT), 17, self.family())
        if overlay is not None:
            tail, tail_type = self.wrap_overlay(overlay, tail, tail_type)
        frame = self.ether(tail, tail_type, self.vlan_count([0, 0, 0, 1, 2]))
        return self.damage(frame)

    def wrap_overlay(self, overlay: str, inner: bytes, ethertype: int) -> tuple[bytes, int]:
        if overlay.endswith("-eth") or overlay == "vxlan":
            if self.chance(0.95):
                inner = self.ether(inner, ethertype, self.vlan_count([0, 0, 1]))
            else:  # a tenant frame that is not IP
                inner = self.ether(bytes(28), ETH_ARP, 0)
            ethertype = ETH_TEB
        family, inner = self.family(), self.cut(inner)
        if overlay == "vxlan":
            return self.ip(self.udp(self.cut(self.vxlan(inner)), VXLAN_PORT), 17, family)
        if overlay.startswith("geneve"):
            return self.ip(self.udp(self.cut(self.geneve(inner, ethertype)), GENEVE_PORT), 17, family)
        return self.ip(self.cut(self.gre(inner, ethertype)), 47, family)

    def cut(self, payload: bytes) -> bytes:
        """Sometimes a payload cut short before it is wrapped: the lengths around it agree, so the
        header cut through is the one that must say so."""
        return payload[: self.rng.randrange(len(payload) + 1)] if payload and self.chance(0.04) else payload

    def damage(self, frame: bytes) -> bytes:
        if len(frame) < 60 or self.chance(0.1):  # what a NIC pads short frames with, or junk
            if self.chance(0.5):
                frame += bytes(max(0, 60 - len(frame)))
            else:
                frame += self.rng.randbytes(self.rng.randrange(1, 30))
        if self.chance(0.07):
            frame = frame[: self.rng.randrange(MIN_FRAME, len(frame) + 1)]
        if self.chance(0.05):
            at = self.rng.randrange(len(frame))
            frame = frame[:at] + bytes([self.rng.randrange(256)]) + frame[at + 1 :]
        return frame


# --- intents ------------------------------------------------------------------------------------


def _prefix(rng: random.Random, family: int) -> str:
    address = rng.choice(V4 if family == 4 else V6)
    return str(ipaddress.ip_network(f"{address}/{24 if family == 4 else 64}", strict=False))


# Match templates: each draws a match; a ruleset uses a few of them (the data plane holds 16 shapes).
TEMPLATES: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "port": lambda r: {"protocol": r.choice(["udp", "tcp", "sctp"]), "dst_port": r.choice(PORTS)},
    "ports": lambda r: {"protocol": r.choice(["udp", "tcp", "sctp"]), "src_port": r.choice(PORTS),
                        "dst_port": r.choice(PORTS)},
    "dst": lambda r: {"dst": _prefix(r, r.choice([4, 6]))},
    "src-protocol": lambda r: {"src": _prefix(r, 4), "protocol": r.choice(["udp", "tcp", "icmp", "sctp"])},
    "vni": lambda r: {"overlay": r.choice(["vxlan", "geneve", "gre"]), "vni": r.choice(VNIS)},
    "overlay": lambda r: {"overlay": r.choice(["vxlan", "geneve", "gre"])},
    "teid": lambda r: {"teid": r.choice(TEIDS)},
    "teid-qfi": lambda r: {"teid": r.choice(TEIDS), "qfi": r.choice(QFIS)},
    "qfi": lambda r: {"qfi": r.choice(QFIS)},
    "vlan": lambda r: {"vlan": r.choice(VLANS)},
    "dscp": lambda r: {"dscp": r.choice(DSCPS)},
    "protocol": lambda r: {"protocol": r.choice(["udp", "tcp", "sctp", "icmp", 0])},
    "catch-all": lambda r: {},
    "paper": lambda r: {"overlay": "vxlan", "vni": r.choice(VNIS), "teid": r.choice(TEIDS),
                        "src": _prefix(r, 4), "protocol": "udp", "dst_port": r.choice(PORTS)},
}  # fmt: skip
ACTIONS = [
    {"type": "drop"},
    {"type": "pass"},
    {"type": "forward", "alternative": 0},
    {"type": "steer", "cpu": 127},  # outside the CPU set: to the alternative group, or the default
]


def random_document(rng: random.Random, intents: int = 14) -> dict[str, Any]:
    """Intents over a few templates, priorities that often tie, one alternative group, no CPUs."""
    templates = rng.sample(sorted(TEMPLATES), 7)
    chosen, seen = [], set()
    for index in range(intents):
        match = TEMPLATES[rng.choice(templates)](rng)
        identity = (refclassify.shape_of(match), refclassify.masked_match(match))
        if identity in seen:
            continue  # a collision: the compiler would report it (tested elsewhere)
        seen.add(identity)
        action = dict(rng.choice(ACTIONS))
        intent = {"id": f"i{index:02d}", "priority": rng.choice([50, 100, 100, 200]), "match": match,
                  "action": action}  # fmt: skip
        if action["type"] == "steer" and rng.random() < 0.5:
            intent["alternative"] = 0
        chosen.append(intent)
    return {
        "intents": chosen,
        "alternatives": [{"id": 0, "members": [{"mac": "02:00:00:00:0a:01", "ip4": "10.99.0.1"}]}],
        "default_verdict": "drop",
    }


# --- running and comparing ----------------------------------------------------------------------


@dataclass
class Disagreement:
    frame: bytes
    program: dict[str, Any]
    reference: dict[str, Any]

    def describe(self) -> str:
        return (
            f"frame {self.frame.hex()}\n  program:   {self.program}\n  reference: {self.reference}"
        )


@dataclass
class Report:
    packets: int = 0
    agreed: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)
    outcomes: Counter = field(default_factory=Counter)  # parse reasons and "ok", for coverage
    matched: int = 0  # frames the program gave an intent
    fast: int = 0  # frames the N3 fast path parsed

    def summary(self) -> str:
        covered = ", ".join(f"{name} {count}" for name, count in sorted(self.outcomes.items()))
        return (
            f"{self.packets} packets: {self.agreed} agree, {len(self.disagreements)} disagree; "
            f"{self.matched} matched an intent, {self.fast} took the fast path\nparser outcomes: {covered}"
        )


def program_answer(outcome, key_of: Callable[[dict], dict]) -> dict[str, Any]:
    """What the program did with a frame, in the reference's terms."""
    parsed = ("reason", outcome.reason) if outcome.reason in refclassify.rp.REASON_CODES else (
        "ok", {**key_of(outcome.key), "ifindex": 0})
    return {"parsed": parsed, "intent": outcome.intent, "verdict": outcome.verdict}


def compare(frame: bytes, document: dict[str, Any], outcome, key_of) -> Optional[Disagreement]:
    expected = refclassify.classify(frame, document)
    program = program_answer(outcome, key_of)
    if (program["parsed"] == expected.parsed and program["intent"] in expected.intents
            and program["verdict"] in expected.verdicts):  # fmt: skip
        return None
    reference = {"parsed": expected.parsed, "intent": sorted(expected.intents, key=str),
                 "verdict": sorted(expected.verdicts)}  # fmt: skip
    return Disagreement(frame, program, reference)


def frames(seed: int, count: int) -> Iterator[bytes]:
    maker = FrameMaker(random.Random(seed))
    for _ in range(count):
        yield maker.frame()


def run(packets: int, seed: int, open_dataplane: Callable[[dict], Any], key_of, per_ruleset: int = 400,
        on_disagreement: Optional[Callable[[Disagreement], None]] = None) -> Report:
    """packets frames against a fresh random intent document every per_ruleset frames.

    open_dataplane(document) returns a traced instance with document applied (closed here)."""
    rng = random.Random(seed)
    report = Report()
    done = 0
    while done < packets:
        document = random_document(rng)
        batch = min(per_ruleset, packets - done)
        dataplane = open_dataplane(document)
        try:
            for frame in frames(rng.randrange(2**32), batch):
                outcome = dataplane.test_run(frame)
                disagreement = compare(frame, document, outcome, key_of)
                report.packets += 1
                report.matched += outcome.intent is not None
                report.fast += bool(outcome.fast_path)
                parsed = refclassify.rp.parse(frame)
                report.outcomes[parsed[1] if parsed[0] == "reason" else "ok"] += 1
                if disagreement is None:
                    report.agreed += 1
                else:
                    report.disagreements.append(disagreement)
                    if on_disagreement is not None:
                        on_disagreement(disagreement)
        finally:
            dataplane.close()
        done += batch
    return report
