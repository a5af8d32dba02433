"""The next-hop lookups' per-packet cost through the real XDP code (dataplane/bpf/xdp_route.bpf.c):
a private routing table's LPM lookup and its neighbour at 1,000 and 1,000,000 routes (every
repetition another route: cold) and at one destination (hot, the best case), the route cache's hit
for a private and a FIB answer (one destination: best case) and bpf_fib_lookup uncached (one
destination), against the same frames through xdp_route_skip (the path without a lookup) and the
harness's empty program (the floor).

    python -m bench.routing --out bench/results/routing.json

Methodology: bench/README.md, "bench/routing".
"""
