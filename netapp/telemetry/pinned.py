"""The notifier's HTTP transport: each request goes to an address of its host checked just before.

For every request the host is resolved once, every address it resolves to is checked against the
callback policy (netapp.core.destinations), and the connection goes to the first of them: the
request is sent to that address while its Host header, TLS SNI and certificate verification stay
on the name, so a resolver that answers differently a moment later (DNS rebinding) is never asked.
Connections are pooled per callback origin, never across names: a connection whose certificate
was verified for one name is not reused for another that resolves to the same address.

With a proxy (setting telemetry.subscriptions.proxy) the host is checked the same way, but the
proxy resolves the name itself: pinning is then the proxy's job. Proxies named in the environment
(HTTP_PROXY, HTTPS_PROXY, ALL_PROXY) are never used; SSL_CERT_FILE and SSL_CERT_DIR still name the
CAs that verify receivers. Redirects are the client's affair (the notifier follows none).

One transport per thread: it is not thread-safe.
"""

from __future__ import annotations

import ssl
from collections import OrderedDict
from typing import Optional

import httpx

from netapp.core.destinations import DestinationRefused, Destinations, IPAddress

# Origins (scheme, host, port) whose connections are kept; the least recently used beyond are closed.
MAX_ORIGINS = 64
DEFAULT_PORTS = {"http": 80, "https": 443}


def check_url(destinations: Destinations, url: httpx.URL) -> IPAddress:
    """The address to connect to for `url`'s host, checked (Destinations.check raises)."""
    return destinations.check(url.host, url.port or DEFAULT_PORTS[url.scheme])


def callback_refusal(destinations: Destinations, url: httpx.URL) -> Optional[str]:
    """Why notifications may not go to `url` (its host does not resolve, or not only to addresses
    the policy allows), said for the subscriber; None: they may. The notifier checks again at every
    delivery: a name may resolve elsewhere later."""
    try:
        check_url(destinations, url)
    except DestinationRefused as exc:
        return str(exc)
    except OSError as exc:
        return f"{url.host} does not resolve ({exc}); allowed: {destinations.allow}"
    return None


class PinnedTransport(httpx.BaseTransport):
    """Sends each request to the address `destinations` checked for its host (see the module)."""

    def __init__(
        self, destinations: Destinations, *, proxy: Optional[str] = None, max_origins: int = MAX_ORIGINS
    ):
        self.destinations = destinations
        # Made at the first connection, not here: loading the CA bundle costs some 30 ms of CPU, and
        # each notifier worker holds a transport whether or not anything is ever sent.
        self._ssl_context: Optional[ssl.SSLContext] = None
        self._proxied = self._transport(proxy) if proxy else None
        self._origins: OrderedDict[tuple[str, str, int], httpx.HTTPTransport] = OrderedDict()
        self._max_origins = max_origins

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        try:
            address = check_url(self.destinations, url)  # DestinationRefused goes up as it is
        except OSError as exc:
            raise httpx.ConnectError(f"cannot resolve {url.host}: {exc}", request=request) from exc
        if self._proxied is not None:
            return self._proxied.handle_request(request)
        extensions = dict(request.extensions)
        if url.scheme == "https":
            extensions["sni_hostname"] = url.host  # SNI and the certificate check: the name
        pinned = httpx.Request(
            request.method,
            url.copy_with(host=str(address)),
            headers=request.headers,  # Host: the name, as the client set it
            stream=request.stream,
            extensions=extensions,
        )
        origin = (url.scheme, url.host, url.port or DEFAULT_PORTS[url.scheme])
        return self._origin(origin).handle_request(pinned)

    def close(self) -> None:
        if self._proxied is not None:
            self._proxied.close()
        while self._origins:
            self._origins.popitem()[1].close()

    def _origin(self, origin: tuple[str, str, int]) -> httpx.HTTPTransport:
        transport = self._origins.pop(origin, None)
        if transport is None:
            transport = self._transport(None)
            while len(self._origins) >= self._max_origins:
                self._origins.popitem(last=False)[1].close()
        self._origins[origin] = transport  # the most recently used last
        return transport

    def _transport(self, proxy: Optional[str]) -> httpx.HTTPTransport:
        if self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context()
        return httpx.HTTPTransport(verify=self._ssl_context, proxy=proxy, trust_env=False)
