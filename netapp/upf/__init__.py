"""The user plane function (UPF): its N4 (PFCP) endpoint, its session model and tables.

| module                      | what it holds                                                  |
|-----------------------------|----------------------------------------------------------------|
| netapp.upf.models           | sessions and their rules (PDR, FAR, QER, URR), validated        |
| netapp.upf.flows            | SDF filters: IPFilterRule flow descriptions, parsed             |
| netapp.upf.sessions         | associations and sessions, changed all or nothing               |
| netapp.upf.held             | what a change holds: its map part, and the sessions in memory   |
| netapp.upf.store            | their rows in the NetApp's SQLite store                         |
| netapp.upf.pfcp             | the PFCP endpoint (UDP 8805), its codec adapter, its messages   |
| netapp.upf.abi              | its data path ABI mirrors (dataplane/include/dpp/nf/upf.h)      |
| netapp.upf.compiler         | a session to its PDR entries (BPF in dataplane/bpf/nf/upf/)     |
| netapp.upf.applier          | those entries written as deltas, with undo                      |
| netapp.upf.policing         | which QER polices a PDR, and the policer it asks for            |
| netapp.upf.ways             | the set-associative downlink of SMF-given UE IPv4 addresses     |
| netapp.upf.views            | what the REST API shows of them, by tenant (read-only)          |
| netapp.upf.routes           | the REST router: /api/v1/upf                                    |
| netapp.upf.cli              | `netapp sessions`: the sessions through the REST API            |
"""
