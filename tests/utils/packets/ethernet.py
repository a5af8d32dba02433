"""L2: Ethernet with VLAN tags (802.1Q, 802.1ad QinQ), and ARP as the non-IP frame."""

from __future__ import annotations

from collections.abc import Sequence

from scapy.layers.l2 import ARP, Dot1AD, Dot1Q, Ether
from scapy.packet import Packet

from .common import (
    ETH_P_8021AD,
    ETH_P_8021Q,
    MAC_DST,
    MAC_SRC,
    OUTER4,
    Payload,
    _as_packet,
    _ethertype_for,
    _required,
)


def ether(
    payload: Payload,
    *,
    vlans: Sequence[int] = (),
    tpids: Sequence[int] | None = None,
    ethertype: int | None = None,
    pcp: int = 0,
) -> Packet:
    """An Ethernet frame with optional VLAN tags, outermost first.

    tpids defaults to 0x8100 for one tag and 802.1ad QinQ (0x88a8 then 0x8100) for two or more.
    """
    payload = _as_packet(payload)
    final_type = ethertype if ethertype is not None else _required(_ethertype_for(payload), "ethertype")
    if tpids is None:
        tpids = (ETH_P_8021Q,) if len(vlans) == 1 else (ETH_P_8021AD,) + (ETH_P_8021Q,) * (len(vlans) - 1)
    # Each header's type field names the next header: TPIDs first, then the payload's ethertype.
    next_types = list(tpids[: len(vlans)]) + [final_type]
    frame: Packet = Ether(src=MAC_SRC, dst=MAC_DST, type=next_types[0])
    for vlan_id, tpid, next_type in zip(vlans, tpids[: len(vlans)], next_types[1:], strict=True):
        tag_class = Dot1AD if tpid == ETH_P_8021AD else Dot1Q
        frame = frame / tag_class(prio=pcp, vlan=vlan_id, type=next_type)
    return frame / payload


def arp_frame(*, vlans: Sequence[int] = ()) -> Packet:
    return ether(ARP(psrc=OUTER4[0], pdst=OUTER4[1]), vlans=vlans)
