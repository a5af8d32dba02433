"""The tunnel action's part of the data plane ABI (dataplane/include/dpp/nf/tunnel.h) as ctypes mirrors:
its constants, enum and maps. Its entries are the UPF's struct dpp_upf_pdr (netapp.upf.abi.PdrAction), read
as the header says. netapp.dataplane.abi joins them to the core's, so that tests/dataplane/test_abi.py
checks them against the BTF of the built object like every other.

Only ctypes, the enum tag and the UPF's ABI module here: netapp.dataplane.abi imports this module while
it is being built.
"""

from __future__ import annotations

import enum
from ctypes import c_uint32

from netapp.dataplane.cenum import c_enum
from netapp.upf.abi import PdrAction

MAX_TUNNELS = 4096
REASON_BASE_TUNNEL = 176

CONSTANTS = {"DPP_MAX_TUNNELS": MAX_TUNNELS, "DPP_REASON_BASE_TUNNEL": REASON_BASE_TUNNEL}



@c_enum("dpp_tunnel_type", "DPP_TUNNEL_")
class TunnelType(enum.IntEnum):
    """The tunnel an ENCAP entry builds (PdrAction.far of its entry)."""

    GTPU = 0
    GRE = 1
    GRE_KEY = 2  # with the key PdrAction.teid holds


ENUMS = (TunnelType,)

# name -> (map type name, key, value, size): netapp.dataplane.abi makes them MapSpecs.
MAPS = {
    "dpp_tunnels": ("HASH", c_uint32, PdrAction, "DPP_MAX_TUNNELS"),
    "dpp_tunnel_scratch": ("PERCPU_ARRAY", c_uint32, PdrAction, 1),
}
SIZABLE: frozenset[str] = frozenset()
