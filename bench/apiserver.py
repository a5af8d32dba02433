"""`netapp serve` for bench/api.py: a settings and a tokens file in a temporary directory, a store
filled ahead of the start, the server as a child process (as deployed), and a teardown that stops
it and unpins its instance whatever happened.

The server runs in its own process so that the benchmark's clients do not share its interpreter
(and its GIL): what is measured is what a client on the same machine sees.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Sequence

import httpx
import yaml

from netapp.api.auth import TokenEntry, TokensFile, new_token, token_hash, write_tokens_file
from netapp.dataplane import binding
from netapp.intents.models import MAX_U32, Intent
from netapp.service.contract import IntentRecord, Scope
from netapp.service.store import Store
from netapp.telemetry.loopback import free_loopback_port
from netapp.tenancy.models import TenantQuotas, TenantRecord, TenantSpec, TrafficGrant

REPO = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 120.0  # the start compiles and installs every stored intent
STOP_TIMEOUT_S = 15.0  # uvicorn's graceful shutdown is 10 s (netapp.cli.serve)
TENANT = "bench"
TENANT_SCOPES = [Scope.READ, Scope.INTENTS_WRITE, Scope.SLICES_WRITE]
MAX_RULES = 65536  # the settings' default


class ServerError(RuntimeError):
    """The server did not start or answer; the message ends with its log."""


@dataclass
class Served:
    """A running `netapp serve`: where it listens, the tokens to use, its instance, its start."""

    url: str
    instance: str
    pid: int
    tenant_token: str
    admin_token: str
    preload_s: float  # writing the preloaded intents into the store
    ready_s: float  # from starting the process to /readyz saying ready

    def client(self, admin: bool = False) -> httpx.Client:
        token = self.admin_token if admin else self.tenant_token
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


@contextlib.contextmanager
def served(preload: Sequence[Intent]) -> Iterator[Served]:
    """A server whose store held `preload` (the tenant's) before it started; it installs them
    into the maps on start, as it does after every restart."""
    instance = f"bench-api-{secrets.token_hex(3)}"
    with tempfile.TemporaryDirectory(prefix="bench-api-") as temporary, contextlib.ExitStack() as stack:
        directory = Path(temporary)
        tenant_token, admin_token = _write_tokens(directory / "tokens.yaml")
        config = _write_settings(directory, instance)
        preload_s = _preload(directory / "state" / "netapp.db", preload)
        stack.callback(_unpin, instance)  # registered first: runs after the server has stopped
        port = _free_port()
        log = directory / "serve.log"
        started = time.monotonic()
        process = _start(config, port, log)
        stack.callback(_stop, process)
        _wait_ready(process, f"http://127.0.0.1:{port}", log)
        ready_s = time.monotonic() - started
        url = f"http://127.0.0.1:{port}"
        yield Served(url, instance, process.pid, tenant_token, admin_token, preload_s, ready_s)


def _write_tokens(path: Path) -> tuple[str, str]:
    tenant_token, admin_token = new_token(), new_token()
    entries = [
        TokenEntry(name="bench", sha256=token_hash(tenant_token), tenant=TENANT, scopes=TENANT_SCOPES),
        TokenEntry(name="admin", sha256=token_hash(admin_token), tenant="operator", scopes=[Scope.ADMIN]),
    ]
    write_tokens_file(path, TokensFile(tokens=entries))
    return tenant_token, admin_token


def _write_settings(directory: Path, instance: str) -> Path:
    settings = {
        "state_dir": str(directory / "state"),
        "instance": instance,
        "max_rules": MAX_RULES,
        "tokens_file": str(directory / "tokens.yaml"),
    }
    path = directory / "netapp.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return path


def _preload(db_path: Path, intents: Sequence[Intent]) -> float:
    """Write the intents into the store in one transaction, as if created earlier: creating 10,000
    through the API first would take longer than the benchmark. Returns the seconds taken."""
    started = time.monotonic()
    now = datetime.now(timezone.utc)
    store = Store.open(db_path)
    try:
        with store.transaction():
            store.put_tenant(bench_tenant(now))
            for intent in intents:
                record = IntentRecord(intent=intent, tenant=TENANT, created_at=now, updated_at=now)
                store.insert_intent(record)
    finally:
        store.close()
    return time.monotonic() - started


def bench_tenant(now: datetime) -> TenantRecord:
    """The benchmark's tenant, confined as a tenant is, to every TEID (its intents all name one, so
    none is narrowed), with a quota above what the phases create."""
    every_teid = TrafficGrant.model_validate({"teids": {"first": 0, "last": MAX_U32}})
    spec = TenantSpec(traffic=[every_teid], quotas=TenantQuotas(intents=1 << 24))
    return TenantRecord(tenant=TENANT, spec=spec, updated_at=now)


def _free_port() -> int:
    return free_loopback_port()


def _start(config: Path, port: int, log: Path) -> subprocess.Popen:
    # Log level warning: at info uvicorn writes an access line per request, which is the
    # deployment's choice and not the service's cost.
    command = [sys.executable, "-m", "netapp.cli.main", "serve", "--config", str(config)]
    command += ["--port", str(port), "--log-level", "warning"]
    with log.open("w") as out:
        return subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)


def _wait_ready(process: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerError(f"netapp serve exited {process.returncode}:\n{_tail(log)}")
        with contextlib.suppress(httpx.TransportError):  # not listening yet
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return
        time.sleep(0.05)
    raise ServerError(f"netapp serve not ready after {READY_TIMEOUT_S:.0f} s:\n{_tail(log)}")


def _tail(log: Path, chars: int = 3000) -> str:
    try:
        return log.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM (graceful), then SIGKILL if it does not end in time."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _unpin(instance: str) -> None:
    """Remove the instance's pins, so nothing of the run stays in the kernel. Opening a name that
    was never pinned creates it first, which the unpin then removes too."""
    handle = binding.DppHandle.open(binding.load_libdpp(), instance)
    try:
        handle.unpin()
    finally:
        handle.close()


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, every thread) a process has used so far (/proc/PID/stat)."""
    # The command name, field 2, may hold spaces; the fields after its closing ')' do not.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def rules_map(instance: str) -> binding.DppHandle:
    """A second handle on the instance, for reading dpp_rules as another process would."""
    return binding.DppHandle.open(binding.load_libdpp(), instance)
