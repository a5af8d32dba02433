"""A subscriber's callback for tests: an HTTP(S) server on a loopback address (127.0.0.1 unless the
test says; a port the kernel picked unless it says) that records every notification POSTed to it
and answers with the statuses the test scripts. And `Names`, the DNS the notifier asks in a test."""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional

from netapp.core.destinations import IPAddress, Resolver
from netapp.telemetry.notify import SIGNATURE_HEADER, SUBSCRIPTION_HEADER, TIMESTAMP_HEADER, verify_signature

WAIT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Received:
    """One request as the receiver got it: the raw body is what the signature covers."""

    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes
    status: int  # what the receiver answered

    def json(self) -> Any:
        return json.loads(self.body)

    def verifies(self, secret: str, **kwargs: Any) -> bool:
        return verify_signature(
            secret,
            self.body,
            self.headers.get(TIMESTAMP_HEADER.lower()),
            self.headers.get(SIGNATURE_HEADER.lower()),
            **kwargs,
        )


class CallbackReceiver:
    """`with CallbackReceiver() as receiver:` listens at `receiver.url` until the block ends.

    `answer(503, 503)` makes the next two requests fail with 503; after the script, 204; a 3xx
    comes with `location`. `hold()` makes every request wait unanswered until `release()` (a slow
    receiver, as slow as the test needs: no sleep to outlast), at most WAIT_TIMEOUT_S. With `tls` (certificate, key) it serves HTTPS and records the name each client
    asked for (TLS SNI) in `server_names`.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, tls: Optional[tuple[Path, Path]] = None):
        self.received: list[Received] = []
        self._script: list[int] = []
        self.holding = 0  # requests waiting, unanswered, for release()
        self._released = threading.Event()
        self._released.set()
        self.location = ""
        self.server_names: list[Optional[str]] = []
        self._arrived = threading.Condition()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self.scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            context.sni_callback = lambda _socket, name, _context: self.server_names.append(name)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="callback-receiver",
            daemon=True,
        )

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return self.url_for(self._server.server_address[0])

    def url_for(self, host: str) -> str:
        """Its URL with another host: a name the test's resolver gives this receiver's address."""
        return f"{self.scheme}://{host}:{self.port}/notify"

    def __enter__(self) -> "CallbackReceiver":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, *statuses: int) -> None:
        with self._arrived:
            self._script.extend(statuses)

    def hold(self) -> None:
        """Every request from now on waits, unanswered, until release()."""
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def wait_holding(self, count: int, timeout_s: float = WAIT_TIMEOUT_S) -> None:
        """Until `count` requests wait for release(); AssertionError after `timeout_s`."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: self.holding >= count, timeout_s):
                raise AssertionError(f"{self.holding} of {count} requests held")

    def _wait_for_release(self) -> None:
        with self._arrived:
            self.holding += 1
            self._arrived.notify_all()
        self._released.wait(WAIT_TIMEOUT_S)  # bounded: a test that forgot to release still ends
        with self._arrived:
            self.holding -= 1

    def accepted(self) -> list[Received]:
        """The requests answered with a 2xx."""
        with self._arrived:
            return [request for request in self.received if 200 <= request.status < 300]

    def wait_for(
        self,
        count: int,
        timeout_s: float = WAIT_TIMEOUT_S,
        accepted: bool = True,
        subscription: Optional[str] = None,
    ) -> list[Received]:
        """At least `count` requests (accepted ones only, by default; only those of `subscription`
        when given); AssertionError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._arrived:
            while len(self._counted(accepted, subscription)) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{len(self._counted(accepted, subscription))} of {count} notifications arrived: "
                        f"{self.received}"
                    )
                self._arrived.wait(left)
            return self._counted(accepted, subscription)

    def bodies(self) -> list[Any]:
        return [request.json() for request in self.accepted()]

    def _counted(self, accepted: bool, subscription: Optional[str] = None) -> list[Received]:
        return [
            request
            for request in self.received
            if (not accepted or 200 <= request.status < 300)
            and (subscription is None or request.headers.get(SUBSCRIPTION_HEADER.lower()) == subscription)
        ]

    def _next_status(self) -> int:
        with self._arrived:
            return self._script.pop(0) if self._script else 204

    def _record(self, request: Received) -> None:
        with self._arrived:
            self.received.append(request)
            self._arrived.notify_all()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keeps the connection open, as most receivers do

            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver._wait_for_release()
                status = receiver._next_status()
                headers = {name.lower(): value for name, value in self.headers.items()}
                # Recorded before answering: once the sender has its answer, the test sees it.
                receiver._record(Received(self.path, headers, body, status))
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Iterable[Any]) -> None:
                pass  # quiet: pytest shows what the test asserts

        return Handler


class Names:
    """The test's DNS. Each name has answers given in turn, the last one from then on (a test moves
    a name between two questions); an answer is addresses separated by spaces, "" that there is
    no such name. Names it does not have go to `otherwise` (none: there is no such name). Every
    question is recorded."""

    def __init__(self, answers: dict[str, list[str]], otherwise: Optional[Resolver] = None):
        self.answers = answers
        self.asked: list[str] = []
        self._otherwise = otherwise

    def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.asked.append(host)
        if host not in self.answers and self._otherwise is not None:
            return list(self._otherwise(host, port))
        queue = self.answers.get(host, [""])
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if not answer:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [ipaddress.ip_address(address) for address in answer.split()]
