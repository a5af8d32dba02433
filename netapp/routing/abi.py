"""The router's part of the data plane ABI (dataplane/include/dpp/nf/routing.h) as ctypes mirrors:
its constants, enums, structs and maps. netapp.dataplane.abi joins them to the core's, so that
tests/dataplane/test_abi.py checks them against the BTF of the built object like every other.

Only ctypes, enum and netapp.dataplane.cenum here: netapp.dataplane.abi imports this module while it is
being built.
"""

from __future__ import annotations

import enum
from ctypes import Structure, c_uint8, c_uint32

from netapp.dataplane.cenum import c_enum

MAX_ROUTES = 1_048_576
MAX_NEIGHS = 65536
ROUTE_KEY_PREFIX = 64  # bits of the key matched whole before the address: instance, family
REASON_BASE_ROUTING = 144

CONSTANTS = {
    "DPP_MAX_ROUTES": MAX_ROUTES,
    "DPP_MAX_NEIGHS": MAX_NEIGHS,
    "DPP_ROUTE_KEY_PREFIX": ROUTE_KEY_PREFIX,
    "DPP_REASON_BASE_ROUTING": REASON_BASE_ROUTING,
}

U32x4 = c_uint32 * 4
Mac = c_uint8 * 6


class RoutePath(enum.IntEnum):
    NONE = 0
    FIB = 1
    FIB_CACHED = 2
    PRIVATE = 3
    PRIVATE_CACHED = 4
    UNRESOLVED = 5
    NO_ROUTE = 6


class RouteFlag(enum.IntFlag):
    ONLINK = 1


class RouteKey(Structure):
    C_NAME = "dpp_route_key"
    _fields_ = [("prefixlen", c_uint32), ("net_instance", c_uint32), ("family", c_uint32), ("addr", U32x4)]


class RouteValue(Structure):
    C_NAME = "dpp_route"
    _fields_ = [("gateway", U32x4), ("ifindex", c_uint32), ("flags", c_uint32)]


class NeighKey(Structure):
    C_NAME = "dpp_neigh_key"
    _fields_ = [("net_instance", c_uint32), ("family", c_uint32), ("addr", U32x4)]


class Neigh(Structure):
    C_NAME = "dpp_neigh"
    _fields_ = [("dmac", Mac), ("smac", Mac), ("ifindex", c_uint32)]


ENUMS = (
    c_enum("dpp_route_path", "DPP_ROUTE_PATH_")(RoutePath),
    c_enum("dpp_route_flags", "DPP_ROUTE_")(RouteFlag),
)
STRUCTS = (RouteKey, RouteValue, NeighKey, Neigh)

# name -> (map type name, key, value, size): netapp.dataplane.abi makes them MapSpecs.
MAPS = {
    "dpp_routes": ("LPM_TRIE", RouteKey, RouteValue, "DPP_MAX_ROUTES"),
    "dpp_neighs": ("HASH", NeighKey, Neigh, "DPP_MAX_NEIGHS"),
}
# Both are capacities, chosen at load (libdpp's list in maps.c).
SIZABLE = frozenset(MAPS)
