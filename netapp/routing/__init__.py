"""The router's private routing tables: per network instance, routes the control plane writes, for
isolation (the 2020 eBPF mobile gateway's choice beside the host FIB). A forwarded UPF packet of an
instance set to "private" (setting upf.routing) takes its next hop from its instance's longest
matching route and that route's resolved neighbour; no route is a drop, never the host's FIB.

BPF: dataplane/bpf/nf/routing/ (maps.h, lookup.h; the route cache, nf/upf/route.h, keeps private
answers too). ABI: dataplane/include/dpp/nf/routing.h, mirrored in abi.py. No libdpp code: both maps
are generic tables. Here: the models (models.py), the stored routes (store.py, schema.py), the maps'
writer (table.py), the neighbour watch that copies the kernel's answers for the gateways
(neighbours.py), the service over them (service.py), the REST router (routes.py) and the CLI
(cli.py).
"""
