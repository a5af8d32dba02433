"""The ring of the proxy's DCCP-Acks (dpp_atsss_acks, nf/atsss/uplink.h), read as the NetApp's
sender reads it (netapp.atsss.acks.AckRing): (ifindex, frame) records. The benchmark drains it
between runs; the tests read the Acks from it."""

from __future__ import annotations

from netapp.atsss.acks import AckRing

__all__ = ["AckRing"]
