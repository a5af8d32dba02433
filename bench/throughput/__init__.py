"""Throughput of an emulated edge node under the paper's traffic: the NetApp against the kernel path.

`python -m bench.throughput` runs it (see bench/README.md). Modules: frames (the 16 services' frames
per size), generator (dpp-pktgen's paced live-frame runs), sink (XDP counters on the receiving
veths), systems (the node as the kernel path or with the NetApp), accounting (per flow and class:
offered, delivered, forwarded, lost), search (RFC 2544 binary search and the offered-load sweep),
trial (one measured trial), report (document, table, plots), run (the command).
"""
