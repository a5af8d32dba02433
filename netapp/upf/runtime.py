"""The UPF in `netapp serve`: its PFCP endpoint over the service's store, when `pfcp.address` is set,
and its data path (netapp.upf.applier) over the service's data plane when there is one.

Start-up compiles each stored session once: the service's start-up reconcile asks for their SDF
rules (`stored_rules`) and the entries compiled with them are kept (`StartupCompile`, by store) for
the UPF's own reconcile in `start_pfcp`, which compiles again only a session whose row changed in
between (its URRs given slots) or all of them if the settings' interfaces did. A stored session
whose tunnels go outside `upf.peer_networks` (the setting narrowed since) is left out of both, as
one that no longer compiles is.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import weakref
from typing import Callable, Iterable, Optional, Union

from netapp.core.config import PfcpSettings, QosSettings, Settings, UpfSettings, pfcp_bind
from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import Dataplane, interface_index
from netapp.intents.compiler import CompiledRule
from netapp.service.store import Store
from netapp.upf.abi import Output, Role
from netapp.upf.applier import BpfApplier, Rules, compile_stored, iface_entries
from netapp.upf.buffering import Buffering, Limits
from netapp.qos.abi import Algo
from netapp.upf.compiler import Entries, Port, Site
from netapp.upf.policing import PoliceDefaults
from netapp.upf.endmarker import EndMarkers
from netapp.upf.models import RuleError, Session
from netapp.upf.nexthop import RouteWatch
from netapp.upf.peers import Destinations, SmfPeer, SmfPeers
from netapp.upf.pfcp.server import PfcpServer
from netapp.upf.pools import Pools
from netapp.upf.sessions import Applier, Upf
from netapp.upf.store import load_sessions

log = logging.getLogger("netapp.upf")


def bpf_applier(
    dataplane: Dataplane, upf: UpfSettings, pfcp: PfcpSettings, rules: Optional[Rules] = None,
    qos: Optional[QosSettings] = None,
) -> BpfApplier:
    """The applier over `dataplane`, its interface roles written from the settings; `rules`: where
    the rules of PDRs with SDF filters go (the service's, netapp.service.function_rules)."""
    site, roles = _site(upf, pfcp, qos)
    ue4 = Pools(upf.ue_pools).layout(site.net_instances, dataplane.table("dpp_upf_ue4").max_entries)
    return BpfApplier(dataplane.table, site, iface_entries(roles, site.n3_ipv4, site.n3_ipv6, ue4), rules)


def smf_peers(pfcp: PfcpSettings) -> SmfPeers:
    """pfcp.peers as the endpoint's allow-list."""
    return SmfPeers(SmfPeer(ipaddress.ip_network(peer.prefix), frozenset(peer.node_ids)) for peer in pfcp.peers)


def destinations(upf: UpfSettings) -> Destinations:
    """upf.peer_networks as the allow-list of GTP-U destinations (unset: none; the settings require it
    with pfcp.address)."""
    return Destinations(upf.peer_networks or ())


Compiled = Union[Entries, RuleError]


class StartupCompile:
    """The stored sessions compiled once at start-up, by SEID with the row they were compiled from."""

    def __init__(self, site: Site, allowed: Destinations):
        self.site, self._allowed = site, allowed
        self._compiled: dict[int, tuple[str, Compiled]] = {}

    def add(self, session: Session, body: str) -> Compiled:
        self._compiled[session.seid] = (body, outcome := self._compile(session))
        return outcome

    def entries(self, seid: int, body: str, session: Callable[[], Session]) -> Entries:
        """The entries of the session whose row is `body` (compiled now unless it was from that
        row); RuleError: it does not compile, or its tunnels go where upf.peer_networks does not allow."""
        held = self._compiled.pop(seid, None)
        outcome = held[1] if held is not None and held[0] == body else self._compile(session())
        if isinstance(outcome, RuleError):
            raise outcome
        return outcome

    def _compile(self, session: Session) -> Compiled:
        try:
            self._allowed.check_session(session)
            return compile_stored(session, self.site)
        except RuleError as exc:
            return exc


# A store's start-up compile, from stored_rules to start_pfcp (netapp serve calls both, with one store).
_STARTUP: "weakref.WeakKeyDictionary[Store, StartupCompile]" = weakref.WeakKeyDictionary()


def stored_rules(settings: Settings, store: Store) -> dict[str, CompiledRule]:
    """The classifier rules of the stored sessions' PDRs with SDF filters, as start_pfcp's reconcile
    installs them: for the service's start-up reconcile (NetAppService.load_function_rules), so that
    a restart never takes them out of the maps. The sessions' compiled entries are kept for
    start_pfcp. A session that does not compile is left out here; start_pfcp names it. None at all
    when the settings' interfaces do not resolve (start_pfcp says so)."""
    try:
        site, _ = _site(settings.upf, settings.pfcp, settings.qos)
    except DataplaneError:
        return {}
    startup = _STARTUP[store] = StartupCompile(site, destinations(settings.upf))
    rules: dict[str, CompiledRule] = {}
    with store.transaction():
        for session, body in load_sessions(store):
            outcome = startup.add(session, body)
            if not isinstance(outcome, RuleError):
                rules.update(outcome.rules)
    return rules


def police_defaults(qos: Optional[QosSettings]) -> PoliceDefaults:
    """The QERs' policers' algorithm and burst, from the settings (qos.*)."""
    qos = qos or QosSettings()
    return PoliceDefaults(algo=Algo[qos.default_algorithm.upper()], burst_ms=qos.default_burst_ms)


def _site(upf: UpfSettings, pfcp: PfcpSettings,
          qos: Optional[QosSettings] = None) -> tuple[Site, dict[int, tuple[Role, int]]]:
    """The compiler's site and the interface roles (ifindex -> role, network instance id)."""
    n3_ipv4 = str(pfcp.n3_ipv4) if pfcp.n3_ipv4 else None
    n3_ipv6 = str(pfcp.n3_ipv6) if pfcp.n3_ipv6 else None
    instances = upf.net_instances()
    ports = [Port(interface_index(name), Role.N3) for name in upf.n3_interfaces]
    ports += [Port(interface_index(name), Role.N9) for name in upf.n9_interfaces]
    ports += [Port(interface_index(name), Role.N6, ni) for name, ni in upf.n6_interfaces.items()]
    roles = {port.ifindex: (port.role, instances.get(port.net_instance, 0)) for port in ports}  # type: ignore[arg-type]
    site = Site(
        net_instances=instances,
        default_instance=_default_instance(upf),
        n3_ipv4=n3_ipv4,
        n3_ipv6=n3_ipv6,
        output=Output[upf.output.upper()],
        ports=tuple(ports),
        police=police_defaults(qos),
        private_instances=frozenset(upf.private_instances()),
    )
    return site, roles


def _default_instance(upf: UpfSettings) -> Optional[str]:
    """The network instance of a PDR that names none: the only one of upf.n6_interfaces, if so."""
    instances = upf.net_instances()
    return next(iter(instances)) if len(instances) == 1 else None


def start_pfcp(
    settings: Settings,
    store: Store,
    applier: Optional[Applier] = None,
    dataplane: Optional[Dataplane] = None,
    rules: Optional[Rules] = None,
) -> Optional[PfcpServer]:
    """The PFCP endpoint, serving (None when pfcp.address is not set); OSError if it cannot bind.
    With a data plane, sessions act on packets; without one they are kept and answered only. With
    `rules` (the service's), PDRs with SDF filters too."""
    pfcp = settings.pfcp
    if pfcp.address is None:
        return None
    buffering = None
    allowed = destinations(settings.upf)
    if not allowed.networks:
        log.warning("upf.peer_networks is empty: every FAR with outer header creation is refused")
    if applier is None and dataplane is not None:  # handovers send End Markers to the old gNB
        n3 = [str(address) if address else None for address in (pfcp.n3_ipv4, pfcp.n3_ipv6)]
        applier = EndMarkers(bpf_applier(dataplane, settings.upf, pfcp, rules, settings.qos), *n3, allowed=allowed)
        # FAR BUFF, NOCP and DUPL: the frames the data path punts (netapp.upf.buffering)
        applier = buffering = Buffering(applier, dataplane, Limits.of(settings.upf), allowed=allowed)
    host, port = pfcp_bind(pfcp.address)
    upf = Upf(
        store,
        applier,
        n3_ipv4=str(pfcp.n3_ipv4) if pfcp.n3_ipv4 else None,
        n3_ipv6=str(pfcp.n3_ipv6) if pfcp.n3_ipv6 else None,
        destinations=allowed,
        ue_pools=Pools(settings.upf.ue_pools, _default_instance(settings.upf)),
        rules_lock=rules.lock if rules is not None else None,  # with a data plane: every transaction takes it
    )
    if buffering is not None:  # the FARs of the sessions the reconcile below puts in the maps
        buffering.sessions = upf.sessions
    if applier is not None:  # a restart: the maps hold what the store holds, and nothing else
        for seid, error in _reconcile(upf, applier, _STARTUP.pop(store, None), allowed).items():
            log.warning("session %#x is stored but not in the data path: %s", seid, error)
    server = PfcpServer(upf, host, port, node_id=pfcp.node_id, peers=smf_peers(pfcp))
    server.start()
    if buffering is not None:  # read until the endpoint has stopped
        server.buffering = buffering
        buffering.report = server.report_downlink_data
        server.close_with(buffering.start().close)
    if dataplane is not None:  # the data path's route cache, on while its generation is kept
        # closed after the endpoint, before the data plane is (netapp serve's order)
        server.route_watch = RouteWatch(dataplane.table("dpp_upf_route_gen")).start()
        server.close_with(server.route_watch.close)
    return server



def _reconcile(upf: Upf, applier: Applier, startup: Optional[StartupCompile], allowed: Destinations) -> dict:
    """The applier's reconcile of the stored sessions, with the entries compiled at start-up where
    they are still those of the session (same row, same site); the refusals by SEID."""
    reconcile_compiled = getattr(applier, "reconcile_compiled", None)
    site = getattr(applier, "site", None)
    if reconcile_compiled is None or site is None:  # an applier of its own (tests)
        return applier.reconcile(upf.sessions.values())
    if startup is None or startup.site != site:
        startup = StartupCompile(site, allowed)
    table = upf.sessions
    compiled: Iterable = (
        (seid, functools.partial(startup.entries, seid, table.body(seid), functools.partial(table.__getitem__, seid)))
        for seid in list(table)
    )
    return reconcile_compiled(compiled)
