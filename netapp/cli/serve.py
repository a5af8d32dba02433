"""`netapp serve`: the REST API over the NetApp service, until SIGINT or SIGTERM."""

from __future__ import annotations

import functools
import logging
import signal
import ssl
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from pydantic import ValidationError

from netapp.cli.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_FAILED, fail
from netapp.core.config import CONFIG_ENV, Settings, load_settings
from netapp.intents.errors import IntentError
from netapp.service.contract import DataplaneUnavailable, IntentService, ServiceError

# How long open requests may take to finish once a shutdown signal arrives.
GRACEFUL_SHUTDOWN_S = 10
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

log = logging.getLogger("netapp.serve")


def serve(
    config: Annotated[
        Optional[Path],
        typer.Option("--config", help=f"Settings file (YAML); default: ${CONFIG_ENV}.", dir_okay=False),
    ] = None,
    host: Annotated[Optional[str], typer.Option("--host", help="Address to listen on (api_host).")] = None,
    port: Annotated[
        Optional[int], typer.Option("--port", min=1, max=65535, help="Port to listen on (api_port).")
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
) -> None:
    """Serve the REST API (TLS when tls_cert and tls_key are set); SIGTERM stops it gracefully."""
    settings = load_cli_settings(config, host, port)
    _require_system_libraries()
    logging.basicConfig(level=log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    service = _service(settings)
    pfcp = _pfcp(settings, service)
    routing = _routing(settings, service, pfcp)
    frer = _frer(settings, service)
    atsss = _atsss(settings, service)
    acks = _atsss_acks(settings, service, atsss)
    telemetry = _telemetry(settings, service)
    usage = _usage(settings, pfcp, telemetry)
    _atsss_telemetry(settings, atsss, acks, telemetry)
    try:
        _run(settings, service, telemetry, log_level, pfcp, routing, frer, atsss)
    except _StopRequested:
        pass  # uvicorn has finished the open requests already
    finally:
        if acks is not None:
            acks.stop()
        if usage is not None:
            usage.stop()
        if telemetry is not None:
            telemetry.stop()
        if routing is not None:
            routing.close()
        if pfcp is not None:
            pfcp.close()
        _close(service)


def load_cli_settings(config: Optional[Path], host: Optional[str] = None, port: Optional[int] = None) -> Settings:
    """The settings of `--config` (else $NETAPP_CONFIG) and the environment; a bad file is one line, exit 2."""
    if config is not None:
        if not config.is_file():
            fail(f"--config {config}: no such file", EXIT_BAD_INPUT)
    overrides: dict[str, Any] = {}
    if host is not None:
        overrides["api_host"] = host
    if port is not None:
        overrides["api_port"] = port
    try:
        return load_settings(config, **overrides)
    except ValueError as exc:  # pydantic's ValidationError is one
        fail(f"settings: {_one_line(exc)}", EXIT_BAD_INPUT)


def _require_system_libraries() -> None:
    """Stop at once, in one line, when a system library libdpp links (libbpf, libelf) is missing."""
    from netapp.dataplane.binding import LibraryNotFoundError, check_system_libraries

    try:
        check_system_libraries()
    except LibraryNotFoundError as exc:
        fail(str(exc), EXIT_ENVIRONMENT)


def _service(settings: Settings) -> IntentService:
    """The NetApp service, started: store open, maps reconciled (the intents' rules and the UPF's of its
    stored sessions together), interfaces attached."""
    try:
        from netapp.service.service import NetAppService
    except ImportError as exc:
        fail(f"the NetApp service is not available in this build ({exc}); nothing to serve", EXIT_ENVIRONMENT)
    service = NetAppService(settings)
    if settings.pfcp.address is not None:  # the UPF's SDF rules stay in the maps over a restart
        from netapp.upf.runtime import stored_rules

        service.load_function_rules("upf", functools.partial(stored_rules, settings))
    from netapp.atsss.flow_states import stored_rules_afresh

    # MTS sessions' flow filters stay in the maps too, the flow states no rule of the maps names zeroed
    # first (the service's data plane: start() opens it before it loads the rules)
    service.load_function_rules("atsss", lambda store: stored_rules_afresh(store, getattr(service, "dataplane", None)))
    try:
        service.start()
    except ServiceError as exc:  # the message says which of store, data plane, interface failed
        service.close()
        fail(f"the NetApp service did not start: {exc.detail}", _start_exit_code(exc))
    return service


def _pfcp(settings: Settings, service: IntentService) -> Optional[Any]:
    """The UPF's PFCP endpoint over the service's store (None unless pfcp.address is set)."""
    if settings.pfcp.address is None:
        return None
    from netapp.upf.pfcp.server import settle_collector
    from netapp.upf.runtime import start_pfcp

    try:
        dataplane = getattr(service, "dataplane", None)  # the service's own, once started
        function_rules = getattr(service, "function_rules", None)  # the service's rule machinery, for SDF filters
        rules = function_rules("upf") if dataplane is not None and function_rules is not None else None
        server = start_pfcp(settings, service.store, dataplane=dataplane, rules=rules)  # type: ignore[attr-defined]
    except OSError as exc:
        _close(service)
        fail(f"pfcp.address: cannot listen on {settings.pfcp.address}: {exc}", EXIT_ENVIRONMENT)
    settle_collector()  # the sessions are loaded: the collector's pauses stay short (p99 of N4)
    buffering = getattr(server, "buffering", None)
    if buffering is not None:  # its replays hold their lock through a reload; /readyz shows its heal
        service.serve_function("upf", buffering)  # type: ignore[attr-defined]
    return server


def _routing(settings: Settings, service: IntentService, pfcp: Optional[Any]) -> Optional[Any]:
    """The private routing tables over the service's data plane: the stored routes in the maps, the
    neighbour watch on (None without a data plane: the API then keeps the routes in the store only).
    The route cache's generation is the UPF's route watch's, when it runs."""
    dataplane = getattr(service, "dataplane", None)
    if dataplane is None:
        return None
    from netapp.routing.service import Routing

    watch = getattr(pfcp, "route_watch", None)
    return Routing.start(service.store, settings.upf, dataplane.table,  # type: ignore[attr-defined]
                         watch.bump if watch is not None else lambda: None)


def _frer(settings: Settings, service: IntentService) -> Optional[Any]:
    """FRER's streams over the service's data plane: the stored streams in its maps, the intents'
    protected streams among them (None without a data plane: the API then keeps the streams in the
    store only)."""
    dataplane = getattr(service, "dataplane", None)
    if dataplane is None:
        return None
    from netapp.frer.dataplane import FrerDataplane
    from netapp.frer.service import Frer

    frer = Frer.start(service.store, dataplane.table, FrerDataplane(dataplane),  # type: ignore[attr-defined]
                      settings.netns, lock=getattr(service, "lock", None))
    protect_with = getattr(service, "protect_with", None)
    if protect_with is not None:  # intents' action.protect writes FRER's maps too
        protect_with(frer)
    return frer


def _atsss(settings: Settings, service: IntentService) -> Optional[Any]:
    """ATSSS's sessions over the service's data plane: the stored sessions in its maps, its copy
    programs requeued by a reload, its heal in /readyz (None without a data plane: the API then
    keeps the sessions in the store only)."""
    dataplane = getattr(service, "dataplane", None)
    if dataplane is None:
        return None
    from netapp.atsss.service import Atsss

    atsss = Atsss.start(service.store, dataplane.table, settings.netns,  # type: ignore[attr-defined]
                        program_fd=dataplane.program_fd,  # type: ignore[attr-defined]
                        rules=service.function_rules("atsss"))  # type: ignore[attr-defined]
    service.serve_function("atsss", atsss)  # type: ignore[attr-defined]  # a reload requeues its copies
    return atsss


def _atsss_acks(settings: Settings, service: IntentService, atsss: Optional[Any]) -> Optional[Any]:
    """The sender of the DCCP-Acks ATSSS's uplink owes the UEs (netapp.atsss.acks), started (None
    without ATSSS over a data plane, whose ring it drains)."""
    if atsss is None:
        return None
    from netapp.atsss.acks import AckRing, AckSender

    sender = AckSender(AckRing(service.dataplane.map_fd("dpp_atsss_acks")), settings.netns)  # type: ignore[attr-defined]
    sender.start()
    return sender


def _telemetry(settings: Settings, service: IntentService) -> Optional[Any]:
    """The collector over the started service, polling (None when telemetry is disabled)."""
    from netapp.telemetry.runtime import Telemetry
    from netapp.telemetry.subscription_store import SubscriptionStoreError

    try:
        telemetry = Telemetry.from_settings(settings, service)  # type: ignore[arg-type]
    except SubscriptionStoreError as exc:
        _close(service)
        fail(f"telemetry: {exc}", EXIT_ENVIRONMENT)
    if telemetry is not None:
        try:
            telemetry.start()
        except OSError as exc:  # the metrics listener's address
            _close(service)
            listener = settings.telemetry.metrics_listener
            where = f"{listener.host} port {listener.port}"
            fail(f"telemetry.metrics_listener: cannot listen on {where}: {exc}", EXIT_ENVIRONMENT)
    return telemetry


def _usage(settings: Settings, pfcp: Optional[Any], telemetry: Optional[Any]) -> Optional[Any]:
    """The UPF's URR logic: on the telemetry's polls, or on its own ticks without telemetry (returned,
    to be stopped)."""
    if pfcp is None:
        return None
    from netapp.upf.telemetry import BufferingPoints, UsagePoints, UsageTicker

    if telemetry is not None:
        node, per_session = settings.telemetry.node, settings.telemetry.upf_session_metrics
        telemetry.collector.add_source(UsagePoints(pfcp.usage, node, per_session))
        if getattr(pfcp, "buffering", None) is not None:
            telemetry.collector.add_source(BufferingPoints(pfcp.buffering, node))
        return None
    ticker = UsageTicker(pfcp.usage, settings.telemetry.interval_s)
    ticker.start()
    return ticker


def _atsss_telemetry(settings: Settings, atsss: Optional[Any], acks: Optional[Any], telemetry: Optional[Any]) -> None:
    """ATSSS's paths in every poll (dpp_atsss_path), and in every scrape with
    telemetry.atsss_path_metrics, and the Ack sender's counters (dpp_atsss_ack), when both run;
    each poll's measured losses checked against MEC 015's QoS sessions (netapp.atsss.qos_watch.QosWatch),
    each change of their qosStatus a point of the poll (dpp_atsss_qos)."""
    if atsss is None or telemetry is None:
        return
    from netapp.atsss.qos_watch import QosWatch
    from netapp.atsss.telemetry import AckPoints, AtsssPoints

    if acks is not None:
        telemetry.collector.add_source(AckPoints(acks.counters, settings.telemetry.node))
    watch = QosWatch(atsss, settings.telemetry.atsss_loss_weight)
    telemetry.collector.add_source(AtsssPoints(atsss.readings, settings.telemetry.node,
                                               settings.telemetry.atsss_path_metrics, on_losses=watch,
                                               served=atsss.served_paths))


def _start_exit_code(exc: ServiceError) -> int:
    return EXIT_ENVIRONMENT if isinstance(exc, DataplaneUnavailable) else EXIT_FAILED


def _run(
    settings: Settings,
    service: IntentService,
    telemetry: Optional[Any],
    log_level: str,
    pfcp: Optional[Any] = None,
    routing: Optional[Any] = None,
    frer: Optional[Any] = None,
    atsss: Optional[Any] = None,
) -> None:
    # Imported here: the other commands (and `netapp --help`) need neither uvicorn nor FastAPI.
    import uvicorn

    from netapp.api.auth import TokensFileError
    from netapp.api.main import create_app

    try:
        app = create_app(settings, service, telemetry)
    except TokensFileError as exc:
        fail(f"tokens: {exc}", EXIT_BAD_INPUT)
    if pfcp is not None:  # the sessions' usage in GET /api/v1/upf/sessions/{seid}
        app.state.upf_usage = pfcp.usage
        app.state.upf_buffering = getattr(pfcp, "buffering", None)
        app.state.upf_policers = getattr(pfcp.upf.applier, "policers", None)  # None: no data path
    if routing is not None:  # /api/v1/routes writes the maps too
        app.state.routing = routing
    if frer is not None:  # and /api/v1/frer/streams
        app.state.frer = frer
    if atsss is not None:  # /api/v1/atsss and /mts/v1
        app.state.atsss = atsss
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=settings.api_host,
            port=settings.api_port,
            ssl_certfile=str(settings.tls_cert) if settings.tls_cert else None,
            ssl_keyfile=str(settings.tls_key) if settings.tls_key else None,
            log_level=log_level.lower(),
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
            lifespan="off",
        )
    )
    # uvicorn handles SIGINT/SIGTERM: it stops accepting and lets open requests finish. Then it
    # raises the signal again under the handler it found, which is ours: the service is closed and
    # the process exits 0, rather than being killed by the default action of SIGTERM.
    # A port it cannot bind is logged by uvicorn, which then exits with status 1.
    for stop_signal in STOP_SIGNALS:
        signal.signal(stop_signal, _request_stop)
    try:
        server.run()
    except (OSError, ssl.SSLError) as exc:
        if settings.tls_cert is None:
            raise
        fail(f"TLS: cannot use tls_cert/tls_key: {exc}", EXIT_BAD_INPUT)


class _StopRequested(Exception):
    """A stop signal arrived after uvicorn's graceful shutdown."""


def _request_stop(signum: int, frame: Any) -> None:
    raise _StopRequested(signal.Signals(signum).name)


def _close(service: IntentService) -> None:
    # Pinned maps and XDP links stay: traffic keeps flowing while the API is down.
    close = getattr(service, "close", None)
    if callable(close):
        close()
    log.info("stopped; the pinned data plane keeps forwarding")


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return IntentError.from_validation(exc).line()
    return str(exc).splitlines()[0]
