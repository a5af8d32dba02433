"""`netapp serve` as a child process, as an operator runs it: a settings file, a tokens file, start,
wait until /readyz says ready, kill (SIGKILL: no cleanup of any kind) or stop (SIGTERM). With a
network namespace, the process runs in it (nsenter: bpffs stays the host's, unlike `ip netns exec`),
as on a node whose interfaces and addresses (PFCP's too) are all there."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

import httpx
import yaml

from netapp.api.auth import TokenEntry, TokensFile, new_token, token_hash, write_tokens_file
from netapp.core.netns import NETNS_DIR, entered
from netapp.service.contract import Scope
from netapp.telemetry.loopback import free_loopback_port

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 30.0  # a start reconciles the maps; two busy cores make Python imports slow
STOP_TIMEOUT_S = 15.0  # uvicorn's graceful shutdown is 10 s (netapp.cli.serve)
LOG_TAIL_CHARS = 3000


def free_port() -> int:
    """A TCP port nobody listens on now, none a client socket can take (free_loopback_port); serve
    binds it with SO_REUSEADDR, so a restart gets it again."""
    return free_loopback_port()


def write_admin_tokens(path: Path, tenant: str) -> str:
    """A tokens file holding one admin token (its hash); returns the token."""
    token = new_token()
    entry = TokenEntry(name="admin", sha256=token_hash(token), tenant=tenant, scopes=[Scope.ADMIN])
    write_tokens_file(path, TokensFile(tokens=[entry]))
    return token


def write_settings(path: Path, **settings: Any) -> Path:
    """A settings YAML file, as `netapp serve --config` reads it."""
    plain = {name: str(value) if isinstance(value, Path) else value for name, value in settings.items()}
    path.write_text(yaml.safe_dump(plain, sort_keys=False), encoding="utf-8")
    return path


def write_node_settings(
    workdir: Path, instance: str, netns: str, interfaces: list[str], tenant: str, **more: Any
) -> tuple[Path, str]:
    """The settings of a NetApp node in `netns` (attached natively to `interfaces` there, its state
    and an admin token of `tenant` in `workdir`): (the settings file, the token)."""
    token = write_admin_tokens(workdir / "tokens.yaml", tenant=tenant)
    config = write_settings(
        workdir / "netapp.yaml",
        state_dir=workdir / "state",
        instance=instance,
        tokens_file=workdir / "tokens.yaml",
        netns=netns,  # where interface names (the alternatives' egress too) resolve and ports are set
        interfaces=[{"name": name, "netns": netns, "mode": "native"} for name in interfaces],
        **more,
    )
    return config, token


class ServeProcess:
    """One `netapp serve` at a time on a fixed port; each start logs to its own file in log_dir."""

    def __init__(self, config: Path, port: int, log_dir: Path, netns: Optional[str] = None):
        self.config = config
        self.port = port
        self.log_dir = log_dir
        self.netns = netns
        self.process: Optional[subprocess.Popen] = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"serve-{self.starts}.log"

    def start(self) -> float:
        """Start and wait until ready; returns the seconds that took."""
        assert self.process is None or self.process.poll() is not None, "already running"
        self.starts += 1
        prefix = ["nsenter", f"--net={NETNS_DIR}/{self.netns}"] if self.netns else []  # execs: one pid
        command = [*prefix, sys.executable, "-m", "netapp.cli.main", "serve", "--config", str(self.config)]
        command += ["--port", str(self.port), "--log-level", "warning"]
        started = time.monotonic()
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready(started + READY_TIMEOUT_S)
        return time.monotonic() - started

    def _wait_ready(self, deadline: float) -> None:
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"netapp serve exited {self.process.returncode}:\n{self.log_tail()}")
            try:
                with entered(self.netns) if self.netns else contextlib.nullcontext():
                    ready = httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200
                if ready:
                    return
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(0.05)
        raise AssertionError(f"netapp serve not ready after {READY_TIMEOUT_S} s:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would: no signal handler, no close()."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """SIGTERM (graceful), SIGKILL if that does not end it in time. Safe to call when stopped."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        except OSError:
            return "(no log)"
