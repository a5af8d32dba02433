"""QoS, routing and RSS: the data-plane functions after the 2020 gateway and the 2023 UPF.

- The policers: a maximum bit rate and a burst per policer, enforced in XDP by one of four
  algorithms (token bucket, GCRA, fixed window, sliding window), with a gate and counters. BPF:
  dataplane/bpf/nf/qos/ (police.h, maps.h); ABI header: dataplane/include/dpp/nf/qos.h, mirrored in
  `abi`; the reference model of the algorithms: `model`; policers written and read through the
  generic tables: `applier`. No libdpp calls of their own: their maps are plain tables. The UPF's
  QERs police through them (netapp.upf.policing); what the REST API shows of a policer: `views`,
  `routes` (/api/v1/policers).
- `dispatch`, the GTP-U dispatcher ("XDP RSS"): its BPF is dataplane/bpf/nf/qos/rss.h (maps in
  rss_maps.h), its ABI header dataplane/include/dpp/nf/rss.h, mirrored in `rss_abi`.
"""
