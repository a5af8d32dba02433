"""The tunnel action's compiler: an intent's `tunnel` action (netapp.intents.native.TunnelAction) as a rule with
action TUNNEL and its entry of dpp_tunnels (dataplane/include/dpp/nf/tunnel.h).

Entries are named by their content: a rule's arg is a 31-bit digest of its entry, so compiling stays
pure, rules asking the same share an entry, and an entry never changes while a rule reads it (another
entry means another arg, and the rule is rewritten to it). The entries go into the map before the
rules that name them, as redirect's ports do (netapp.service.transaction), and go with the last rule
that names them (netapp.mec.tunnel_entries). Two different entries with one digest cannot both be
written: the second is refused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from typing import Iterable, Mapping, Optional, Union

from netapp.intents.actions import RuleAction, RuleArgument, resolve_interface
from netapp.intents.native import Intent, OuterTunnel, TunnelAction
from netapp.mec.tunnel_abi import TunnelType
from netapp.upf.abi import Output, PdrAction, PdrFlag

ANY_SOURCE = bytes(16)  # the entry's local: the address the packet's own tunnel was sent to
ENTRY_ID_MASK = 0x7FFFFFFF  # never DPP_NONE


@dataclass(frozen=True)
class TunnelEntry:
    """What dpp_tunnels holds for a rule: its flags (DECAP, ENCAP), its output (REDIRECT out of ifindex,
    or FIB towards peer), the addresses (16 bytes each, IPv4 in the first 4), and for ENCAP the
    tunnel's type (GTP-U, GRE) with GRE's key."""

    flags: int
    output: int
    ifindex: int = 0
    family: int = 0
    peer: bytes = bytes(16)
    local: bytes = ANY_SOURCE
    tunnel_type: int = TunnelType.GTPU
    key: int = 0

    @property
    def entry_id(self) -> int:
        """Its key in dpp_tunnels: a digest of what it holds (a GTP-U entry's as before GRE was added,
        so that an upgrade leaves their rules alone)."""
        text = f"{self.flags}/{self.output}/{self.ifindex}/{self.family}/{self.peer.hex()}/{self.local.hex()}"
        if self.tunnel_type != TunnelType.GTPU:
            text += f"/{self.tunnel_type}/{self.key}"
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") & ENTRY_ID_MASK

    def value(self) -> PdrAction:
        """The map's value (struct dpp_upf_pdr, read as dpp/nf/tunnel.h says: the type in far, the key
        in teid)."""
        value = PdrAction(flags=self.flags | PdrFlag.ENTRY, output=self.output, ifindex=self.ifindex,
                          family=self.family, far=self.tunnel_type, teid=self.key)
        value.peer = type(value.peer).from_buffer_copy(self.peer)
        value.local = type(value.local).from_buffer_copy(self.local)
        return value


def _address_bytes(address: Union[IPv4Address, IPv6Address, None]) -> bytes:
    return bytes(16) if address is None else address.packed.ljust(16, b"\0")


def tunnel_entry(action: TunnelAction, interfaces: Mapping[str, int], intent_id: Optional[str] = None) -> TunnelEntry:
    """The entry of a tunnel action; CompileError at action.interface when that is unknown."""
    if action.encapsulate is not None:
        tunnel = action.encapsulate
        return TunnelEntry(int(PdrFlag.ENCAP), int(Output.FIB), family=tunnel.peer.version,
                           peer=_address_bytes(tunnel.peer), local=_address_bytes(tunnel.source),
                           tunnel_type=_tunnel_type(tunnel), key=tunnel.key or 0)
    flags = int(PdrFlag.DECAP) if action.decapsulate else 0
    if action.interface is not None:
        ifindex = resolve_interface(action.interface, interfaces, "action.interface", intent_id)
        return TunnelEntry(flags, int(Output.REDIRECT), ifindex=ifindex)
    assert action.towards is not None  # the model gives one way out
    return TunnelEntry(flags, int(Output.FIB), family=action.towards.version, peer=_address_bytes(action.towards))


def _tunnel_type(tunnel: OuterTunnel) -> int:
    if tunnel.protocol == "gtpu":
        return TunnelType.GTPU
    return TunnelType.GRE if tunnel.key is None else TunnelType.GRE_KEY


def describe(action: TunnelAction) -> str:
    """How messages name what a tunnel action does."""
    if action.encapsulate is not None:
        tunnel = action.encapsulate
        kind = "GTP-U" if tunnel.protocol == "gtpu" else "GRE" if tunnel.key is None else f"GRE key {tunnel.key}"
        return f"into {kind} to {tunnel.peer}"
    out = f"to {action.interface}" if action.interface is not None else f"towards {action.towards}"
    return f"decapsulated {out}" if action.decapsulate else out


def tunnel_argument(intent: Intent, interfaces: Mapping[str, int]) -> RuleArgument:
    assert isinstance(intent.action, TunnelAction)
    entry = tunnel_entry(intent.action, interfaces, intent.id)
    return RuleArgument(entry.entry_id, describe(intent.action), entry=entry)


def tunnel_entries(entries: Iterable[Optional[TunnelEntry]]) -> dict[int, TunnelEntry]:
    """The entries rules name, by their key (None: a rule of another action)."""
    return {entry.entry_id: entry for entry in entries if entry is not None}


TUNNEL = RuleAction("TUNNEL", tunnel_argument)
