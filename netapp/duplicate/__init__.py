"""Duplicating packets: an intent's `duplicate` action (and MEC 011's DUPLICATE_*) sends each matching
packet out of several interfaces, through the replication FRER uses (a DEVMAP broadcast)."""
