"""DUPLICATE's part of the data plane ABI (dataplane/include/dpp/nf/duplicate.h): its constants and
its map of copy groups, checked against the BTF of the built object by tests/duplicate/test_abi.py.

Only ctypes here, as the other functions' ABI modules."""

from __future__ import annotations

from ctypes import Structure, c_uint8, c_uint16, c_uint32

MAX_GROUPS = 256
MAX_COPIES = 8
GROUP_DECAP = 0x40000000  # a group id's bit: a port of the group decapsulates its copies

CONSTANTS = {
    "DPP_MAX_DUP_GROUPS": MAX_GROUPS,
    "DPP_MAX_DUP_COPIES": MAX_COPIES,
    "DPP_DUP_GROUP_DECAP": GROUP_DECAP,
}
DECAP_PROG = "dpp_dup_decap"  # the devmap program of a port that decapsulates its copies (dpp.bpf.c)



class DupMeta(Structure):
    """What each frame of a decapsulating group carries to the egress program (XDP metadata): never
    written from Python, mirrored so that its layout is checked with the others'."""

    C_NAME = "dpp_dup_meta"
    _fields_ = [("ue_off", c_uint16), ("family", c_uint8), ("pad", c_uint8)]


STRUCTS = (DupMeta,)
# name -> (map type, key, value, size); a map of maps: a group's entry is written as an inner map's
# fd and read back as its id
MAPS = {
    "dpp_dup_tx": ("HASH_OF_MAPS", c_uint32, c_uint32, "DPP_MAX_DUP_GROUPS"),
}
# maps of maps: name -> (their inner maps' type, key, value, size)
INNER_MAPS = {"dpp_dup_tx": ("DEVMAP", c_uint32, "bpf_devmap_val", MAX_COPIES)}
