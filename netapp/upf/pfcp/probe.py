"""A PFCP Heartbeat from a client's side: does an N4 endpoint answer, and since when (its Recovery
Time Stamp)? What `netapp demo` asks of its UPF; any SMF-side tool may."""

from __future__ import annotations

import socket

from netapp.upf.pfcp.codec import MalformedMessage, decode, encode, leaf, message
from netapp.upf.pfcp.ies import IEType, MsgType
from netapp.upf.store import ntp_now

SEQ = 1


class NoAnswer(Exception):
    """The endpoint did not answer the heartbeat in time, or not with a Heartbeat Response."""


def heartbeat(host: str, port: int, timeout_s: float = 2.0) -> int:
    """Send a Heartbeat Request to host:port; the Recovery Time Stamp of its response (NTP seconds)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    stamp = leaf(IEType.RECOVERY_TIME_STAMP, timestamp=ntp_now())
    request = encode(message(MsgType.HEARTBEAT_REQUEST, SEQ, None, stamp))
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect((host, port))
        sock.send(request)
        try:
            response = decode(sock.recv(65535))
        except (OSError, MalformedMessage) as exc:  # timeout, refused (ICMP), not PFCP
            raise NoAnswer(f"no heartbeat response from {host}:{port}: {exc}") from exc
    theirs = response.ies.one(IEType.RECOVERY_TIME_STAMP)
    if response.type != MsgType.HEARTBEAT_RESPONSE or response.seq != SEQ or theirs is None:
        raise NoAnswer(f"{host}:{port} answered a heartbeat with message type {response.type}, no Recovery Time Stamp")
    return int(theirs["timestamp"])
