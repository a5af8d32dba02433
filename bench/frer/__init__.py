"""What eliminating one frame costs (IEEE 802.1CB sequence recovery, dataplane/bpf/nf/frer/recover.h,
run alone by dataplane/bpf/xdp_frer.bpf.c): a frame in order, a duplicate, an in-order frame whose
R-tag is popped, with one stream (hot: the best case) and a duplicate among 4,096 streams (every
repetition another), against the same frames through xdp_frer_skip (the headers read, no recovery)
and the harness's empty program (the floor). Every repetition starts from the original frame (the
harness writes it back). --compare NAME=OBJECT times another build's xdp_frer.bpf.o in the same
blocks.

    python -m bench.frer --out bench/results/frer.json [--compare before=OTHER/xdp_frer.bpf.o]

Methodology: bench/README.md, "bench/frer".
"""
