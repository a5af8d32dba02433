"""The policers' per-packet cost through the real XDP code (dataplane/bpf/xdp_police.bpf.c, which
polices every frame with nf/qos/police.h): each algorithm with pass and with drop decisions, on each
clock (the kernel's precise one, its coarse one, a time the frame gives), one policer hot (every repetition the same: the best case) and 1,000,000 cold (every repetition another),
against the same frames through xdp_police_skip (the path without the policer) and the harness's
empty program (the floor).

    python -m bench.qos --out bench/results/qos.json [--before OTHER/dataplane]

With --before, both builds are loaded twice, in the order this, before, before, this, and the blocks
alternate the two pairs: "this - before" holds as many blocks of either load order (the maps made
first are slower by tens of ns cold).

Methodology: bench/README.md, "bench/qos".
"""
