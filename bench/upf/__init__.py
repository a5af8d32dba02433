"""The UPF's per-packet cost through the real XDP program: uplink decapsulation + forwarding by the
FIB to N6, downlink encapsulation (IPv4 outer, PDU Session Container), N9 re-encapsulation and a
TEID miss, with 1 and 1,000,000 sessions installed and 1 to 1,000,000 of them active (every
repetition of BPF_PROG_TEST_RUN another session, the original packet), against the floor of the same
harness around an empty program.

    python -m bench.upf --out bench/results/upf.json

Methodology: bench/README.md, "bench/upf".
"""
