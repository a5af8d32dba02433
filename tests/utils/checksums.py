"""Is every checksum of a frame right? Recomputed by scapy over the whole frame, so an incremental
update in the data plane is checked against a from-scratch computation."""

from __future__ import annotations

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

CHECKSUMMED = (IP, UDP, TCP)


def _present(packet: Ether) -> list:
    """Layers whose checksum the frame carries; a UDP checksum of 0 means "none" (RFC 768)."""
    return [layer for layer in CHECKSUMMED
            if layer in packet and not (layer is UDP and packet[UDP].chksum == 0)]


def checksums_valid(frame: bytes) -> bool:
    """The first IPv4 header's and its UDP/TCP header's checksums equal freshly computed ones."""
    packet = Ether(frame)
    rebuilt = Ether(frame)
    layers = _present(packet)
    for layer in layers:
        del rebuilt[layer].chksum
    rebuilt = Ether(bytes(rebuilt))
    return bool(layers) and all(packet[layer].chksum == rebuilt[layer].chksum for layer in layers)
