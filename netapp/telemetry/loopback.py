"""A server process of the demo's and the tests' own (influxd, prometheus): its files under one
directory, its port on 127.0.0.1, started, waited for, stopped."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

LOOPBACK = "127.0.0.1"
LOG_TAIL_LINES = 20
READY_POLL_S = 0.05
PORTS_ENV = "DPP_LOOPBACK_PORTS"
FIRST_LOOPBACK_PORT = 10000  # above the well-known servers' (influxd's 8086, prometheus's 9090)
EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
_next_port_offset = random.randrange(1 << 16)  # two processes of the same range start apart


def find_executable(
    env: str, name: str, hint: str, not_found: type[Exception], bundled: Optional[Path] = None
) -> Path:
    """The `name` binary: $`env`, else `bundled`, else on PATH; `not_found` (with `hint`) if none."""
    configured = os.environ.get(env)
    if configured:
        if not _is_executable(Path(configured)):
            raise not_found(f"{env}={configured} is not an executable file")
        return Path(configured)
    if bundled is not None and _is_executable(bundled):
        return bundled
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    where = f"${env}, {bundled}" if bundled is not None else f"${env}"
    raise not_found(f"no {name}: not in {where} or on PATH; {hint}")


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def loopback_ports() -> range:
    """The ports `free_loopback_port` picks from: $DPP_LOOPBACK_PORTS ("FIRST-LAST") when set, else
    the larger of those from FIRST_LOOPBACK_PORT up to the kernel's ephemeral range and those above
    it: ports a bind to port 0 or a connect never hand out, so that no client socket of the machine
    takes a port we picked before the server we picked it for binds it (one of the ephemeral range
    could be). A machine whose ephemeral range leaves neither gets every port from
    FIRST_LOOPBACK_PORT, that race open."""
    configured = os.environ.get(PORTS_ENV)
    if configured:
        return _configured_ports(configured)
    low, high = _ephemeral_range()
    below, above = range(FIRST_LOOPBACK_PORT, low), range(max(high + 1, FIRST_LOOPBACK_PORT), 65536)
    widest = max(below, above, key=len)
    return widest if widest else range(FIRST_LOOPBACK_PORT, 65536)


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = (int(bound) for bound in Path(EPHEMERAL_RANGE).read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _configured_ports(configured: str) -> range:
    first, dash, last = configured.partition("-")
    try:
        ports = range(int(first), int(last) + 1) if dash else range(0)
    except ValueError:
        ports = range(0)
    if not ports or ports.start < 1 or ports.stop > 65536:
        raise ValueError(f"{PORTS_ENV}={configured!r}: give FIRST-LAST, 1 <= FIRST <= LAST <= 65535")
    return ports


def free_loopback_port(kind: socket.SocketKind = socket.SOCK_STREAM) -> int:
    """A port of `kind` free on 127.0.0.1 now, from `loopback_ports()`, each call of the process
    starting past the last one's (so that it does not hand the same port out twice while the first
    server to get it has not bound it yet)."""
    global _next_port_offset
    ports = loopback_ports()
    for step in range(len(ports)):
        port = ports[(_next_port_offset + step) % len(ports)]
        with socket.socket(socket.AF_INET, kind) as probe:
            try:
                probe.bind((LOOPBACK, port))
            except OSError:
                continue
        _next_port_offset += step + 1
        return port
    raise OSError(f"no free port on {LOOPBACK} from {ports.start} to {ports.stop - 1} ({PORTS_ENV})")


class LoopbackServer:
    """One process of `binary` over `data_dir`, on LOOPBACK:`port`. Subclasses name it (`NAME`,
    used in messages and file names), write their config and give the command line
    (`_command`), say when it is ready (`_is_ready`) and what error to raise (`ERROR`)."""

    NAME = "server"
    ERROR: type[Exception] = RuntimeError

    def __init__(self, data_dir: Path, port: int, binary: Path):
        self.data_dir = Path(data_dir)
        self.binary = binary
        self.port = port or free_loopback_port()
        self._process: Optional[subprocess.Popen[bytes]] = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / f"{self.NAME}.log"

    @property
    def pid(self) -> Optional[int]:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _command(self) -> Sequence[str]:
        """Write the config; the command line."""
        raise NotImplementedError

    def _is_ready(self) -> bool:
        raise NotImplementedError

    def start(self, timeout_s: float = 30.0) -> Any:
        """Start the server and wait until it is ready; the server (self)."""
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [str(part) for part in self._command()]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop it in order
            )
        try:
            self._wait_ready(timeout_s)
        except self.ERROR:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited within `timeout_s`."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        process.send_signal(signal.SIGCONT)  # a suspended server only sees the SIGTERM once resumed
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running:
                raise self.ERROR(f"{self.NAME} exited while starting; {self._log_excerpt()}")
            if self._is_ready():
                return
            time.sleep(READY_POLL_S)
        raise self.ERROR(f"{self.NAME} was not ready on {self.url} within {timeout_s:g} s; {self._log_excerpt()}")

    def _answers(self, path: str, status: int) -> bool:
        """GET `path` answers `status`."""
        try:
            with urllib.request.urlopen(f"{self.url}{path}", timeout=1.0) as response:
                return response.status == status
        except OSError:  # refused until it listens; URLError and HTTPError are OSErrors
            return False

    def _log_excerpt(self) -> str:
        return f"the end of {self.log_path}:\n{self.log_tail()}"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            with open(self.log_path, errors="replace") as log:
                return "".join(deque(log, maxlen=lines))
        except FileNotFoundError:
            return "(no log)"
