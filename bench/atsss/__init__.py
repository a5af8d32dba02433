"""What ATSSS costs per packet (dataplane/bpf/nf/atsss/, run alone by dataplane/bpf/xdp_atsss.bpf.c).
Uplink (bench/atsss/uplink.py): an MP-DCCP Data frame checked, its path found and moved on,
decapsulated, with no Ack owed and with an Ack into the ring for every packet; the UE's Acks on one
path, without an Ack Vector and with a short and a long one, each Ack judging its numbers (the
loss estimate's cost: against the build before it with --before). Downlink: a UE packet
scheduled and put into MP-DCCP (IPv4, DCCP-Data with MP_SEQ, both checksums) by each scheduler
(round-robin, with the DCCP checksum over the whole packet and over the header only; smooth weighted
round-robin, active-standby, smallest delay, priority; redundant's marking, its copies not made in
the harness), two paths. Each for one session (hot: the best case) and among 10,000 sessions (every
repetition another UE), against the harness's empty program (the floor). Every repetition starts
from the original packet (the harness puts the head back and writes the packet again). The pipeline
(bench/atsss/gate.py): a frame that is not ATSSS's with the gate closed and open; flows
(bench/atsss/flows.py): a downlink frame through the pipeline, its session without flow rules, and
with them (MEC 015 flow filters), the frame matched by a rule and not. Then live
(bench/atsss/live.py): round-robin against redundant with its two copies made. With --before, the
downlink, Ack and pipeline cases also run another build's objects in the same blocks; each downlink
row then has its differences taken block by block (this build less the floor, less the other build)
with their quartiles, each build its program's size, and the one-session row the instructions each
build executes on the frame (bench/insns.py: counted in Python, checked against the kernel's run;
what a change takes off a path shows there, whatever the load). Split
(bench/atsss/split.py): weighted round-robin's paths' counts over --split-packets packets against
their weights' shares. Round-robin's downlink by stage (parse, lookup, schedule, encapsulation,
checksum, counters): bench/atsss/stages.py. A session in the hash against one in the index (what
moving it into a way freed saves a packet): bench/atsss/placement.py.

    python -m bench.atsss --out bench/results/atsss.json [--before OTHER/dataplane/build]

Methodology: bench/README.md, "bench/atsss".
"""
