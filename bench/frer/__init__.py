"""What eliminating one frame costs (IEEE 802.1CB sequence recovery, dataplane/bpf/nf/frer/recover.h,
run alone by dataplane/bpf/xdp_frer.bpf.c): a frame in order, a duplicate, an in-order frame whose
R-tag is popped, with one stream (hot: the best case) and a duplicate among 4,096 streams (every
repetition another), against the same frames through xdp_frer_skip (the headers read, no recovery)
and the harness's empty program (the floor). Every repetition starts from the original frame (the
harness writes it back).

    python -m bench.frer --out bench/results/frer.json

Methodology: bench/README.md, "bench/frer".
"""
