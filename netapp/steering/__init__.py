"""Steering: hand a flow to a chosen CPU through a CPUMAP, metered at the CPU's capacity; a flow
over it, or steered to an overloaded CPU or one outside the CPU set, falls back (its alternative
group, else the default verdict).

Here: the CPU set's model (`models`), its contract (`contract`), domain service (`service`), REST
routes (`routes`, under /api/v1/dataplane/cpus) and the steer action's compiler (`compiler`; the
action itself is an intent's, netapp.intents.native, registered in netapp.intents.compiler's
RULE_ACTIONS). In the data plane: its BPF under dataplane/bpf/nf/steer/ (the action, the per-CPU
meter), its ABI in dataplane/include/dpp/nf/steer.h, its libdpp calls in dataplane/src/cpus.c (the
CPUMAP queues, capacities and meters), bound in netapp.dataplane.binding and set by the facade's
site half (netapp.dataplane.site).
"""
