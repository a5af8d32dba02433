"""DUPLICATE's part of the data plane ABI (dataplane/include/dpp/nf/duplicate.h) as ctypes mirrors:
its constants and the key and value of a group's members, checked against the BTF of the built
object by tests/duplicate/test_abi.py.

Only ctypes here, as the other functions' ABI modules."""

from __future__ import annotations

from ctypes import Structure, c_uint32

MAX_GROUPS = 256
MAX_COPIES = 8
MAX_PORTS = 64

CONSTANTS = {
    "DPP_MAX_DUP_GROUPS": MAX_GROUPS,
    "DPP_MAX_DUP_COPIES": MAX_COPIES,
    "DPP_MAX_DUP_PORTS": MAX_PORTS,
}


class MemberKey(Structure):
    """struct dpp_dup_member_key: an interface (ifindex) of a copy group."""

    C_NAME = "dpp_dup_member_key"
    _fields_ = [("group", c_uint32), ("ifindex", c_uint32)]


class Member(Structure):
    """struct dpp_dup_member: present, nothing more (yet)."""

    C_NAME = "dpp_dup_member"
    _fields_ = [("reserved", c_uint32)]


STRUCTS = (MemberKey, Member)
# name -> (map type, key, value, size)
MAPS = {
    "dpp_dup_tx": ("DEVMAP_HASH", c_uint32, "bpf_devmap_val", "DPP_MAX_DUP_PORTS"),
    "dpp_dup_members": ("HASH", MemberKey, Member, MAX_GROUPS * MAX_COPIES),
}
