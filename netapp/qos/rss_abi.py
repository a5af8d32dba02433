"""The GTP-U dispatcher's part of the data plane ABI (dataplane/include/dpp/nf/rss.h) as ctypes
mirrors: its constants, structs and maps, and the hash that picks a tunnel's worker. netapp.dataplane.abi
joins them to the core's, so that tests/dataplane/test_abi.py checks them against the object's BTF.

Only ctypes here: netapp.dataplane.abi imports this module while it is being built.
"""

from __future__ import annotations

from ctypes import Structure, c_uint32

MAX_RSS_IFACES = 64
MAX_RSS_WORKERS = 128
QFI_MUL = 0x9E3779B9
MIX1 = 0x85EBCA6B
MIX2 = 0xC2B2AE35

CONSTANTS = {
    "DPP_MAX_RSS_IFACES": MAX_RSS_IFACES,
    "DPP_MAX_RSS_WORKERS": MAX_RSS_WORKERS,
    "DPP_RSS_QFI_MUL": QFI_MUL,
    "DPP_RSS_MIX1": MIX1,
    "DPP_RSS_MIX2": MIX2,
}

_U32 = 0xFFFFFFFF


class RssIface(Structure):
    C_NAME = "dpp_rss_iface"
    _fields_ = [("ifindex", c_uint32), ("workers", c_uint32)]


class RssWorker(Structure):
    C_NAME = "dpp_rss_worker"
    _fields_ = [("cpu", c_uint32)]


class CpumapVal(Structure):
    """struct bpf_cpumap_val (linux/bpf.h): a CPUMAP queue's size and program (an fd written, an id read)."""

    C_NAME = "bpf_cpumap_val"
    _fields_ = [("qsize", c_uint32), ("bpf_prog", c_uint32)]


STRUCTS = (RssIface, RssWorker)
KERNEL_STRUCTS = (CpumapVal,)

# Plain tables: name -> (map type name, key, value, size). The counters are read as a per-CPU table.
MAPS = {
    "dpp_rss_ifaces": ("ARRAY", c_uint32, RssIface, "DPP_MAX_RSS_IFACES"),
    "dpp_rss_workers": ("ARRAY", c_uint32, RssWorker, "DPP_MAX_RSS_WORKERS"),
    "dpp_rss_cpu_map": ("CPUMAP", c_uint32, CpumapVal, "DPP_MAX_CPUS"),
}
# Per-CPU counters (struct dpp_counter, netapp.dataplane.abi.Counter): name -> size.
COUNTERS = {"dpp_rss_stats": "DPP_MAX_CPUS"}


def rss_hash(teid: int, qfi: int) -> int:
    """The program's rss_hash: murmur3's 32-bit finalizer of TEID + QFI * QFI_MUL."""
    h = (teid + qfi * QFI_MUL) & _U32
    h ^= h >> 16
    h = (h * MIX1) & _U32
    h ^= h >> 13
    h = (h * MIX2) & _U32
    return h ^ (h >> 16)


def worker_slot(teid: int, qfi: int, workers: int) -> int:
    """The slot of dpp_rss_workers the program picks for a tunnel among `workers` (no QFI: 0)."""
    return (rss_hash(teid, qfi) * workers) >> 32
