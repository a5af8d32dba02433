"""The metrics listener: `/metrics` without a token, on an address of its own, for a Prometheus
that cannot send one (OSM's, scraping every VNF on its management address).

It serves the same exposition as the API's `/metrics` for an admin, and nothing else: no route
changes state, and the API port (tokens, TLS) stays as it is. It is off by default
(`telemetry.metrics_listener.enabled`); whoever reaches it sees every intent's and tenant's
counters, so bind it to the management network only.
"""

from __future__ import annotations

import logging
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Optional

from netapp.core.config import MetricsListenerSettings
from netapp.telemetry.prometheus import CONTENT_TYPE, scrape

if TYPE_CHECKING:
    from netapp.telemetry.collector import Collector

log = logging.getLogger("netapp.telemetry")

METRICS_PATH = "/metrics"


class MetricsListener:
    """A small threaded HTTP server on its own thread; start() binds, stop() closes."""

    def __init__(self, collector: "Collector", settings: MetricsListenerSettings):
        self.collector = collector
        self.settings = settings
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def port(self) -> int:
        """The bound port (the setting's, or the one the kernel chose for port 0)."""
        if self._server is None:
            raise RuntimeError("the metrics listener is not started")
        return self._server.server_address[1]

    def start(self) -> None:
        """Bind now, so a port in use fails `netapp serve` at start, not silently later."""
        self._server = _server_class(self.settings.host.version)(
            (str(self.settings.host), self.settings.port), _handler(self.collector)
        )
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-listener", daemon=True
        )
        self._thread.start()
        host = self.settings.host
        shown = f"[{host}]" if host.version == 6 else str(host)
        log.info("metrics: http://%s:%d%s (no token)", shown, self.port, METRICS_PATH)

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = self._thread = None


def _server_class(ip_version: int) -> type[ThreadingHTTPServer]:
    if ip_version == 4:
        return ThreadingHTTPServer

    class IPv6Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6

    return IPv6Server


def _handler(collector: "Collector") -> type[BaseHTTPRequestHandler]:
    class MetricsHandler(BaseHTTPRequestHandler):
        server_version = "dpp-netapp-metrics"

        def do_GET(self) -> None:  # the name http.server dispatches to
            if self.path.split("?", 1)[0] != METRICS_PATH:
                self._answer(HTTPStatus.NOT_FOUND, b"only /metrics is served here\n", "text/plain")
                return
            try:
                body = scrape(collector, tenant=None)
            except Exception as exc:  # a failed counter read must not end the listener
                log.warning("metrics scrape failed: %s", exc)
                message = f"counters unavailable: {exc}\n".encode()
                self._answer(HTTPStatus.SERVICE_UNAVAILABLE, message, "text/plain")
                return
            self._answer(HTTPStatus.OK, body, CONTENT_TYPE)

        def do_HEAD(self) -> None:
            self._answer(HTTPStatus.METHOD_NOT_ALLOWED, b"", "text/plain", allow="GET")

        do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD  # read-only

        def _answer(self, status: HTTPStatus, body: bytes, content_type: str, allow: str = "") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if allow:
                self.send_header("Allow", allow)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("metrics listener: " + format, *args)

    return MetricsHandler
