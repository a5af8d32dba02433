"""Forwarding to alternative nodes: a forward action, or a steered flow's overflow, rewrites the
packet's addresses to a member of an alternative node group (picked by flow hash) and sends it
out, back through its ingress interface or through an egress port. Members may be probed with
GTP-U echo and forwarded to only while they answer.

Here: the groups' models (`models`), their contract (`contract`), domain service (`service`), the
GTP-U echo end point and prober (`liveness`), REST routes (`routes`, /api/v1/alternatives) and the
compiler of the groups and of the forward action (`compiler`; the action itself is an intent's,
netapp.intents.native, registered in netapp.intents.compiler's RULE_ACTIONS). In the data plane:
its BPF under dataplane/bpf/nf/forward/ (the member choice and header rewrites), its ABI in
dataplane/include/dpp/nf/forward.h; it has no libdpp code of its own: its groups are a generic
table (dataplane/src/tables.c), written by the facade's site half (netapp.dataplane.site).
"""
