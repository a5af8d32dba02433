"""A subscriber's callback for tests: an HTTP server on 127.0.0.1 (a port the kernel picked) that
records every notification POSTed to it and answers with the statuses the test scripts."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

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

    `answer(503, 503)` makes the next two requests fail with 503; after the script, 204. `hold`
    makes every request wait that many seconds before answering (a slow receiver).
    """

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._script: list[int] = []
        self.hold_s = 0.0
        self._arrived = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="callback-receiver",
            daemon=True,
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/notify"

    def __enter__(self) -> "CallbackReceiver":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, *statuses: int) -> None:
        with self._arrived:
            self._script.extend(statuses)

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
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if receiver.hold_s:
                    time.sleep(receiver.hold_s)
                status = receiver._next_status()
                headers = {name.lower(): value for name, value in self.headers.items()}
                # Recorded before answering: once the sender has its answer, the test sees it.
                receiver._record(Received(self.path, headers, body, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Iterable[Any]) -> None:
                pass  # quiet: pytest shows what the test asserts

        return Handler
