"""A local InfluxDB 1.8 server for the demo, the tests and the benchmarks.

`LocalInfluxd` runs `influxd` with a config of its own: everything (config, meta, data, WAL, log)
under one directory, the HTTP API and the RPC port bound to 127.0.0.1 only, no usage reporting, no
`_internal` monitor database, Flux enabled and quiet logs. The NetApp writes to it through the
v2-compatible API that 1.8 serves: token "user:password" (anything: auth is off), org "-", bucket
"database/retention-policy" (`bucket()`).

    python -m netapp.telemetry.influxd --data-dir /tmp/influx --port 8086 --database dpp

runs one in the foreground until Ctrl-C. `make influxd` links .tools/bin/influxd to a build it keeps
outside the clone (scripts/influxd).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from netapp.telemetry.loopback import LOOPBACK, LoopbackServer, find_executable, free_loopback_port

REPO = Path(__file__).resolve().parents[2]
BUNDLED_INFLUXD = REPO / ".tools" / "bin" / "influxd"
INSTALL_HINT = "`make influxd` installs InfluxDB 1.8.10 into .tools/bin/influxd"


class InfluxdNotFoundError(FileNotFoundError):
    """No influxd binary where we look for one."""


class InfluxdError(RuntimeError):
    """influxd did not start, or a query it answered failed."""


def find_influxd() -> Path:
    """The influxd binary: $INFLUXD, else .tools/bin/influxd in the repository, else on PATH."""
    return find_executable("INFLUXD", "influxd", INSTALL_HINT, InfluxdNotFoundError, BUNDLED_INFLUXD)


def bucket(database: str, retention_policy: str = "autogen") -> str:
    """The v2 bucket name of a 1.8 database and retention policy."""
    return f"{database}/{retention_policy}"


class LocalInfluxd(LoopbackServer):
    """One influxd process over `data_dir`, on loopback. `restart()` keeps its ports and data.

    `flux`: serve Flux queries (Grafana's InfluxDB 2 data source uses them); it costs ~5 s at
    every start, while influxd compiles the Flux standard library, so tests that query with
    InfluxQL turn it off.
    """

    NAME = "influxd"
    ERROR = InfluxdError

    def __init__(self, data_dir: Path, port: int = 0, binary: Optional[Path] = None, *, flux: bool = True):
        super().__init__(data_dir, port, binary if binary is not None else find_influxd())
        self.flux = flux
        self.rpc_port = free_loopback_port()  # backup/restore RPC: unused, but it always binds

    @property
    def config_path(self) -> Path:
        return self.data_dir / "influxd.conf"

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self, timeout_s: float = 30.0) -> "LocalInfluxd":
        """Write the config, start influxd and wait until it answers /ping."""
        return super().start(timeout_s)

    def restart(self, timeout_s: float = 30.0) -> "LocalInfluxd":
        """Stop and start again on the same ports, over the same data."""
        self.stop()
        return self.start(timeout_s)

    def suspend(self) -> None:
        """SIGSTOP: the server keeps its sockets but answers nothing (a stalled InfluxDB)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def __enter__(self) -> "LocalInfluxd":
        return self.start()

    def _signal(self, signum: int) -> None:
        if not self.running:
            raise InfluxdError("influxd is not running")
        assert self._process is not None
        self._process.send_signal(signum)

    def _command(self) -> Sequence[str]:
        self.config_path.write_text(self._config())
        return [str(self.binary), "run", "-config", str(self.config_path)]

    def _is_ready(self) -> bool:
        return self._answers("/ping", 204)

    def _config(self) -> str:
        """influxd 1.8's TOML: only what differs from its defaults, and every listening address."""
        root = self.data_dir.resolve()
        return f"""\
reporting-disabled = true
bind-address = "{LOOPBACK}:{self.rpc_port}"

[meta]
  dir = "{root / "meta"}"
  logging-enabled = false

[data]
  dir = "{root / "data"}"
  wal-dir = "{root / "wal"}"
  query-log-enabled = false
  # The default (25 MB) snapshots the write cache to TSM several times a second at 100k points/s;
  # 256 MB cuts influxd's CPU per point ~2.6x here, for memory and a longer restart.
  cache-snapshot-memory-size = "256m"

[monitor]
  store-enabled = false

[continuous_queries]
  log-enabled = false

[http]
  enabled = true
  bind-address = "{LOOPBACK}:{self.port}"
  auth-enabled = false
  log-enabled = false
  write-tracing = false
  pprof-enabled = false
  flux-enabled = {str(self.flux).lower()}

[logging]
  level = "warn"
  suppress-logo = true
"""

    # --- InfluxQL ------------------------------------------------------------------------------

    def create_database(self, name: str) -> None:
        self.query(f"CREATE DATABASE {quote_identifier(name)}")

    def query(self, influxql: str, db: Optional[str] = None, epoch: str = "ns") -> dict[str, Any]:
        """Run InfluxQL through /query; the JSON answer. Times come as integers in `epoch` units.
        Raises InfluxdError when the request or any statement failed."""
        form = {"q": influxql, "epoch": epoch}
        if db is not None:
            form["db"] = db
        request = urllib.request.Request(
            f"{self.url}/query", data=urllib.parse.urlencode(form).encode(), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=30.0) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as exc:
            raise InfluxdError(
                f"{influxql!r}: HTTP {exc.code}: {exc.read().decode(errors='replace')}"
            ) from exc
        errors = [answer.get("error")] + [result.get("error") for result in answer.get("results", ())]
        failed = [error for error in errors if error]
        if failed:
            raise InfluxdError(f"{influxql!r}: {'; '.join(failed)}")
        return answer


def quote_identifier(name: str) -> str:
    """An InfluxQL identifier in double quotes."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- CLI ---------------------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m netapp.telemetry.influxd", description="Run a local InfluxDB 1.8 on 127.0.0.1."
    )
    parser.add_argument("--data-dir", type=Path, required=True, help="config, data and log go here")
    parser.add_argument("--port", type=int, default=8086, help="HTTP port (0: any free one)")
    parser.add_argument("--database", default="dpp", help="created at start (the NetApp's bucket)")
    parser.add_argument("--no-flux", action="store_true", help="InfluxQL only: starts ~5 s sooner")
    args = parser.parse_args(argv)
    try:
        server = LocalInfluxd(args.data_dir, args.port, flux=not args.no_flux).start()
    except (InfluxdNotFoundError, InfluxdError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        server.create_database(args.database)
        print(
            f"influxd on {server.url} (log: {server.log_path}); NetApp settings: telemetry.influxdb = "
            f'{{url: "{server.url}", token: "netapp:unused", org: "-", bucket: "{bucket(args.database)}"}}',
            flush=True,
        )
        _wait_for_termination(server)
    finally:
        server.stop()
    return 0


def _wait_for_termination(server: LocalInfluxd) -> None:
    """Until Ctrl-C or SIGTERM, or influxd exiting on its own."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while server.running:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
