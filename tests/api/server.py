"""A real uvicorn server in a background thread, on 127.0.0.1 and a port the kernel picked."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any, Optional

import uvicorn

START_TIMEOUT_S = 10.0


class ServerThread:
    """`with ServerThread(app) as server:` serves `app` at `server.url` until the block ends."""

    def __init__(
        self, app: Any, certfile: Optional[Path] = None, keyfile: Optional[Path] = None, port: int = 0
    ):
        """port: 0 for one the kernel picks; a stopped server's to start it again where it was."""
        # Bound here and handed to uvicorn, so no other process can take the port in between.
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(("127.0.0.1", port))
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan="off",
            ssl_certfile=str(certfile) if certfile else None,
            ssl_keyfile=str(keyfile) if keyfile else None,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, name="uvicorn", daemon=True
        )
        self.scheme = "https" if certfile else "http"

    @property
    def url(self) -> str:
        host, port = self.socket.getsockname()
        return f"{self.scheme}://{host}:{port}"

    def __enter__(self) -> "ServerThread":
        self.thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.should_exit = True
        self.thread.join(START_TIMEOUT_S)
        self.socket.close()
