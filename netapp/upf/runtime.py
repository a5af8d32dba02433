"""The UPF in `netapp serve`: its PFCP endpoint over the service's store, when `pfcp.address` is set."""

from __future__ import annotations

from typing import Optional

from netapp.core.config import Settings, pfcp_bind
from netapp.service.store import Store
from netapp.upf.pfcp.server import PfcpServer
from netapp.upf.sessions import Applier, Upf


def start_pfcp(settings: Settings, store: Store, applier: Optional[Applier] = None) -> Optional[PfcpServer]:
    """The PFCP endpoint, serving (None when pfcp.address is not set); OSError if it cannot bind.
    Until the data path of the UPF exists, sessions are kept and answered but not applied."""
    pfcp = settings.pfcp
    if pfcp.address is None:
        return None
    host, port = pfcp_bind(pfcp.address)
    upf = Upf(
        store,
        applier,
        n3_ipv4=str(pfcp.n3_ipv4) if pfcp.n3_ipv4 else None,
        n3_ipv6=str(pfcp.n3_ipv6) if pfcp.n3_ipv6 else None,
    )
    server = PfcpServer(upf, host, port, node_id=pfcp.node_id)
    server.start()
    return server
