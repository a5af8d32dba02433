"""ATSSS, the MP-DCCP multi-access proxy: the data path's ABI (abi), the reference model of its
schedulers (model)."""
