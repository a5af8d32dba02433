"""QoS, routing and RSS: the data-plane functions after the 2020 gateway and the 2023 UPF.
`dispatch` is the GTP-U dispatcher ("XDP RSS"): its BPF is dataplane/bpf/nf/qos/rss.h (maps in
rss_maps.h), its ABI header dataplane/include/dpp/nf/rss.h, mirrored in `rss_abi`."""
