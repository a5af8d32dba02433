"""The QoS function's policers: a maximum bit rate and a burst per policer, enforced in XDP by one of
three algorithms (token bucket, fixed window, sliding window), with a gate and counters.

BPF: dataplane/bpf/nf/qos/ (police.h, maps.h); ABI header: dataplane/include/dpp/nf/qos.h, mirrored
in `abi`; the reference model of the algorithms: `model`; policers written and read through the
generic tables: `applier`. No libdpp calls of its own: its maps are plain tables.
"""
