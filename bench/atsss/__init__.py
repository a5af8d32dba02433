"""What the ATSSS downlink costs per packet (dataplane/bpf/nf/atsss/downlink.h, run alone by
dataplane/bpf/xdp_atsss.bpf.c): a UE packet scheduled and put into MP-DCCP (IPv4, DCCP-Data with
MP_SEQ, both checksums) by each scheduler (round-robin, smooth weighted round-robin, active-standby,
two paths), for one session (hot: the best case) and among 10,000 sessions (every repetition
another UE), against the harness's empty program (the floor). Every repetition starts from the
original packet (the harness puts the head back and writes the packet again).

    python -m bench.atsss --out bench/results/atsss.json

Methodology: bench/README.md, "bench/atsss".
"""
