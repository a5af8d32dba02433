"""The data path with many active flows: per-packet cost through BPF_PROG_TEST_RUN when every
repetition is another flow of N (a pseudo-random walk), at several rule counts and shape counts,
flow cache on and off, against the floor of the same harness around an empty program.

    python -m bench.flows --out bench/results/flows.json

Methodology: bench/README.md, "bench/flows".
"""
