"""FRER, IEEE 802.1CB frame replication and elimination: the data path's ABI (abi), the reference
model of sequence recovery (model)."""
