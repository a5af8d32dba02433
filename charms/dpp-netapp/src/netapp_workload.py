"""The NetApp on this machine, without ops.

Install it, write its settings, run `netapp serve` as the systemd service `dpp-netapp`, read the
addresses of an interface, and call its REST API (api/rest.md) with the charm's admin token. Every
path hangs off `root` so the file-writing parts can be tested on a temporary directory; commands go
through `run` so tests can replace them.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import quote, urlencode

import httpx
import yaml

from charm_config import CharmConfig

SERVICE = "dpp-netapp"
# What the NetApp needs from the system: the venv module, `ip`, and the libbpf libdpp links (its
# package depends on libelf, named libelf1 or libelf1t64 depending on the release).
APT_PACKAGES = ("python3-venv", "iproute2", "libbpf1")
# The charm's folder of wheels (`make package`, netapp/packaging/wheels.py) and its hash-pinned list.
WHEELS_DIR = "wheels"
WHEELS_REQUIREMENTS = "requirements.txt"
# The VNF package's MEC 010-2 AppD in the charm, which `make package` copies there
# (netapp/packaging/charm.py APPD_FILE): what apply-appd applies when neither the action nor the
# appd option gives one.
SHIPPED_APPD = "appd.json"
CHARM_TOKEN_NAME = "juju-charm"
CHARM_TENANT = "operator"
API_TIMEOUT_S = 30.0

Runner = Callable[..., subprocess.CompletedProcess]


class WorkloadError(Exception):
    """A step on the machine failed (a command, a missing file)."""


class ApiError(Exception):
    """The NetApp answered with an error (RFC 9457 problem) or could not be reached."""

    def __init__(self, status: Optional[int], message: str):
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status


@dataclass(frozen=True)
class InterfaceAddress:
    """An interface's MAC and its first global IPv4 and IPv6 addresses (None: it has none)."""

    mac: str
    ip4: Optional[str] = None
    ip6: Optional[str] = None


def render_settings(config: CharmConfig, paths: "Paths") -> dict[str, Any]:
    """The NetApp's settings file (netapp/core/config.py Settings) for this config."""
    settings: dict[str, Any] = {
        "state_dir": str(paths.state_dir_on_host),
        "interfaces": [{"name": name, "mode": config.xdp_mode} for name in config.interfaces],
        "default_verdict": config.default_verdict,
        "flow_cache": config.flow_cache,
        "max_rules": config.max_rules,
        "api_host": config.api_host,
        "api_port": config.api_port,
        "tokens_file": str(paths.on_host(paths.tokens)),
        "telemetry": {"interval_s": config.telemetry_interval},
    }
    if config.tls:
        settings["tls_cert"] = str(paths.on_host(paths.tls_cert))
        settings["tls_key"] = str(paths.on_host(paths.tls_key))
    if config.influxdb_url:
        settings["telemetry"]["influxdb"] = {
            "url": config.influxdb_url,
            "token": config.influxdb_token,
            "org": config.influxdb_org,
            "bucket": config.influxdb_bucket,
        }
    settings["telemetry"]["metrics_listener"] = _metrics_listener(config)
    if config.callback_allow:
        settings["telemetry"]["subscriptions"] = {"callback_allow": list(config.callback_allow)}
    if config.alt_interface and config.alt_default:
        settings["default_alternative"] = config.alt_group
    return settings


def _metrics_listener(config: CharmConfig) -> dict[str, Any]:
    """The unauthenticated /metrics listener; the charm's port 0 is "off" (the NetApp's is "any port").
    Without an address (the charm could not learn the management address) it stays off rather than
    falling back to every address."""
    if not config.metrics_enabled or not config.metrics_host:
        return {"enabled": False}
    return {"enabled": True, "host": config.metrics_host, "port": config.metrics_port}


def render_unit(config: CharmConfig, paths: "Paths") -> str:
    """The systemd unit running `netapp serve` with the settings file."""
    lines = [
        "[Unit]",
        "Description=DPP NetApp (XDP data-plane accelerator)",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        f"Environment=NETAPP_CONFIG={paths.on_host(paths.settings)}",
        f"ExecStart={paths.on_host(paths.netapp_bin)} serve",
        "Restart=on-failure",
        "RestartSec=2",
        "LimitMEMLOCK=infinity",
    ]
    if config.cpus:
        lines.append("CPUAffinity=" + " ".join(str(cpu) for cpu in config.cpus))
    lines += ["", "[Install]", "WantedBy=multi-user.target", ""]
    return "\n".join(lines)


class Paths:
    """Where the NetApp's files live, under `root` ("/" on a real machine)."""

    def __init__(self, root: Path = Path("/")):
        self.root = root
        self.etc = root / "etc" / SERVICE
        self.settings = self.etc / "settings.yaml"
        self.requirements = self.etc / "requirements.txt"
        self.tokens = self.etc / "tokens.yaml"
        self.charm_token = self.etc / "charm.token"
        self.tls_cert = self.etc / "tls.crt"
        self.tls_key = self.etc / "tls.key"
        self.clouds_yaml = self.etc / "clouds.yaml"
        # Nova sets a KVM guest's SMBIOS system UUID to the instance's id.
        self.product_uuid = root / "sys" / "class" / "dmi" / "id" / "product_uuid"
        self.unit = root / "etc" / "systemd" / "system" / f"{SERVICE}.service"
        self.venv = root / "opt" / SERVICE
        self.netapp_bin = self.venv / "bin" / "netapp"
        self.state_dir = root / "var" / "lib" / SERVICE
        self.state_dir_on_host = self.on_host(self.state_dir)
        self.sys_net = root / "sys" / "class" / "net"

    def on_host(self, path: Path) -> Path:
        """The path as the service sees it (relative to "/" rather than `root`)."""
        return Path("/") / path.relative_to(self.root)


class NetApp:
    """The NetApp service on this machine."""

    def __init__(self, root: Path = Path("/"), run: Runner = subprocess.run):
        self.paths = Paths(root)
        self._run = run

    # --- install and remove ------------------------------------------------------------------

    def install(self, source: str, wheels: Path, index_requirements: str = "") -> None:
        """Install the NetApp into a fresh venv in /opt/dpp-netapp, every file checked against its
        SHA-256 and binary only: from the charm's `wheels` folder without any index (source "charm",
        its requirements.txt), or from the package index (source "index", `index_requirements`,
        every line pinned and hashed). The list installed is kept in /etc/dpp-netapp/requirements.txt."""
        if source == "charm":
            listed = wheels / WHEELS_REQUIREMENTS
            if not listed.is_file():
                raise WorkloadError(f"{listed}: not found (`make package` puts the NetApp's wheels in the charm)")
            requirements, origin = listed.read_text(), ["--no-index", "--find-links", str(wheels)]
        else:
            requirements, origin = index_requirements, []
        self._cmd("apt-get", "update")
        self._cmd("apt-get", "install", "-y", "--no-install-recommends", *APT_PACKAGES)
        _write(self.paths.requirements, requirements, 0o644)
        self._cmd("python3", "-m", "venv", "--clear", str(self.paths.venv))
        pip = str(self.paths.venv / "bin" / "pip")
        listed_here = str(self.paths.requirements)
        self._cmd(pip, "install", "--require-hashes", "--only-binary=:all:", *origin, "-r", listed_here)

    def version(self) -> str:
        """The installed NetApp's version (`netapp --version` prints "netapp 0.1.0")."""
        words = (self._cmd(str(self.paths.netapp_bin), "--version").stdout or "").split()
        if not words:
            raise WorkloadError("netapp --version printed nothing")
        return words[-1]

    def is_installed(self) -> bool:
        """Whether the `netapp` command is in place."""
        return self.paths.netapp_bin.exists()

    def remove(self) -> None:
        """Undo install and configure, data plane first.

        Stop and disable the service; take the data plane off every interface and remove its pins
        (`netapp dataplane unload`: a stopped service leaves them, so that traffic keeps flowing);
        then remove the unit, /etc/dpp-netapp (settings, tokens, TLS files) and the venv. The state
        directory stays, as a removed package's data does: the store of intents, slices and
        subscriptions, which a later install takes up again. A failed unload raises before anything
        is removed, so that a retry still finds the `netapp` command and its settings.
        """
        self._cmd("systemctl", "disable", "--now", SERVICE, check=False)
        if self.is_installed() and self.paths.settings.exists():
            self._cmd(str(self.paths.netapp_bin), "dataplane", "unload", "--config", str(self.paths.settings))
        self.paths.unit.unlink(missing_ok=True)
        self._cmd("systemctl", "daemon-reload", check=False)
        for tree in (self.paths.etc, self.paths.venv):
            shutil.rmtree(tree, ignore_errors=True)

    # --- configure ---------------------------------------------------------------------------

    def configure(self, config: CharmConfig) -> bool:
        """Write settings, TLS files and unit; make the charm's token. True when anything changed."""
        self.paths.etc.mkdir(parents=True, exist_ok=True, mode=0o750)
        self.paths.state_dir.mkdir(parents=True, exist_ok=True, mode=0o750)
        changed = False
        if config.tls:
            changed |= _write(self.paths.tls_cert, config.tls_cert, 0o644)
            changed |= _write(self.paths.tls_key, config.tls_key, 0o600)
        else:
            for path in (self.paths.tls_cert, self.paths.tls_key):
                if path.exists():
                    path.unlink()
                    changed = True
        settings = yaml.safe_dump(render_settings(config, self.paths), sort_keys=False)
        changed |= _write(self.paths.settings, settings, 0o600)
        unit_changed = _write(self.paths.unit, render_unit(config, self.paths), 0o644)
        if unit_changed:
            self._cmd("systemctl", "daemon-reload")
            self._cmd("systemctl", "enable", SERVICE)
        changed |= self.ensure_token()
        return changed or unit_changed

    def ensure_token(self) -> bool:
        """Make the charm's admin token (`netapp tokens add`) unless it exists. True when made."""
        if self.paths.charm_token.exists():
            return False
        done = self._cmd(
            str(self.paths.netapp_bin),
            "tokens",
            "add",
            "--name",
            CHARM_TOKEN_NAME,
            "--tenant",
            CHARM_TENANT,
            "--scope",
            "admin",
            "--file",
            str(self.paths.tokens),
        )
        lines = (done.stdout or "").strip().splitlines()
        if not lines:
            raise WorkloadError("netapp tokens add printed no token")
        _write(self.paths.charm_token, lines[-1].strip() + "\n", 0o600)
        return True

    # --- run ---------------------------------------------------------------------------------

    def restart(self) -> None:
        """(Re)start the service."""
        self._cmd("systemctl", "restart", SERVICE)

    def stop(self) -> None:
        """Stop the service."""
        self._cmd("systemctl", "stop", SERVICE, check=False)

    def is_running(self) -> bool:
        """Whether systemd reports the service active."""
        return self._cmd("systemctl", "is-active", "--quiet", SERVICE, check=False).returncode == 0

    # --- host networking -----------------------------------------------------------------------

    def interface_address(self, name: str) -> InterfaceAddress:
        """The MAC and global addresses of an interface of this machine; WorkloadError if there is none."""
        return InterfaceAddress(self._mac_of(name), *_global_addresses(self._addr_info(name)))

    def _mac_of(self, name: str) -> str:
        try:
            return (self.paths.sys_net / name / "address").read_text().strip().lower()
        except OSError:
            raise WorkloadError(f"no interface {name!r} on this machine") from None

    def _addr_info(self, name: str) -> list[dict[str, Any]]:
        done = self._cmd("ip", "-j", "addr", "show", "dev", name)
        try:
            links = json.loads(done.stdout or "[]")
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"ip addr show dev {name}: unreadable answer ({exc.msg})") from None
        return [info for link in links for info in link.get("addr_info", [])]

    # --- OpenStack ---------------------------------------------------------------------------

    def instance_id(self) -> Optional[str]:
        """This machine's SMBIOS UUID, its Nova instance id on OpenStack; None when unreadable."""
        try:
            value = self.paths.product_uuid.read_text().strip().lower()
        except OSError:
            return None
        return value or None

    def check_openstack(
        self, clouds_yaml: str, cloud: str, server: str, data_networks: list[str]
    ) -> subprocess.CompletedProcess:
        """`netapp openstack check --json` on `server`, with `clouds_yaml` written owner-only to
        /etc/dpp-netapp/clouds.yaml and named by OS_CLIENT_CONFIG_FILE. Its exit code says: 0 met,
        1 unmet (both with the JSON report on stdout), 2 a bad option, 3 the cloud unreadable."""
        _write(self.paths.clouds_yaml, clouds_yaml, 0o600)
        argv = [str(self.paths.netapp_bin), "openstack", "check", "--cloud", cloud, "--server", server]
        for network in data_networks:
            argv += ["--data-network", network]
        env = {**_command_env(), "OS_CLIENT_CONFIG_FILE": str(self.paths.clouds_yaml)}
        return self._cmd(*argv, "--json", check=False, env=env)

    # --- API ---------------------------------------------------------------------------------

    def client(self, config: CharmConfig) -> "NetAppClient":
        """A client of the local API with the charm's token."""
        if not self.paths.charm_token.exists():
            raise ApiError(None, "the charm has no API token yet (the NetApp is not configured)")
        token = self.paths.charm_token.read_text().strip()
        host = "127.0.0.1" if config.api_host in ("0.0.0.0", "::", "") else config.api_host
        scheme = "https" if config.tls else "http"
        host = f"[{host}]" if ":" in host else host
        verify: Any = _pinned(self.paths.tls_cert) if config.tls else True
        return NetAppClient(f"{scheme}://{host}:{config.api_port}", token, verify=verify)

    def _cmd(self, *argv: str, check: bool = True, env: Optional[dict[str, str]] = None) -> subprocess.CompletedProcess:
        try:
            done = self._run(list(argv), capture_output=True, text=True, check=False, env=env or _command_env())
        except OSError as exc:
            raise WorkloadError(f"{argv[0]}: {exc}") from exc
        if check and done.returncode != 0:
            raise WorkloadError(f"{' '.join(argv[:3])} failed ({done.returncode}): {(done.stderr or '').strip()}")
        return done


def _command_env() -> dict[str, str]:
    """The charm's environment without the Python path dispatch gives the charm (its own lib:venv):
    inherited, it would make the NetApp's pip take the charm's packages as installed and skip them,
    and the NetApp's commands import them."""
    return {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "PYTHONHOME")}


def _global_addresses(infos: list[dict[str, Any]]) -> tuple[Optional[str], Optional[str]]:
    """The first usable global IPv4 and IPv6 address in `ip -j addr` order (the primary first)."""
    found: dict[str, str] = {}
    for info in infos:
        # Tentative and failed IPv6 addresses do not answer yet or at all; link-local ones do not route.
        if info.get("scope") != "global" or info.get("tentative") or info.get("dadfailed"):
            continue
        found.setdefault(info.get("family", ""), info.get("local", ""))
    return found.get("inet") or None, found.get("inet6") or None


def _pinned(cert: Path) -> ssl.SSLContext:
    """Trust exactly the configured certificate.

    It names the public address while the charm connects over the local hop, so the host name is
    not checked, but the chain must end at this certificate.
    """
    context = ssl.create_default_context(cafile=str(cert))
    context.check_hostname = False
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context


def _write(path: Path, text: str, mode: int) -> bool:
    """Write `text` unless the file holds it already. True when written."""
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return True


class NetAppClient:
    """The NetApp's REST API, one method per charm action."""

    def __init__(self, base_url: str, token: str, verify: Any = True, timeout: float = API_TIMEOUT_S):
        self.base_url = base_url
        self._headers = {"Authorization": f"Bearer {token}"}
        self._verify = verify
        self._timeout = timeout

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """Call the API; the decoded JSON answer (None when empty); ApiError on a failure."""
        return self._send(method, path, body)[1]

    def _send(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Call the API; its status code and decoded JSON answer; ApiError on a failure."""
        try:
            with httpx.Client(
                base_url=self.base_url, headers=self._headers, verify=self._verify, timeout=self._timeout
            ) as http:
                response = http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise ApiError(None, f"cannot reach the NetApp at {self.base_url}: {exc}") from exc
        if response.status_code >= 400:
            raise ApiError(response.status_code, _problem_text(response))
        if not response.content:
            return response.status_code, None
        return response.status_code, response.json()

    def add_intent(self, intent: dict[str, Any]) -> Any:
        """POST /api/v1/intents."""
        return self.request("POST", "/api/v1/intents", intent)

    def remove_intent(self, intent_id: str) -> None:
        """DELETE /api/v1/intents/{id}."""
        self.request("DELETE", f"/api/v1/intents/{_seg(intent_id)}")

    def list_intents(self) -> list[Any]:
        """Every page of GET /api/v1/intents."""
        return self._all_pages("/api/v1/intents")

    def get_slice(self, slice_id: str) -> Optional[Any]:
        """GET /api/v1/slices/{id}; None when there is none."""
        try:
            return self.request("GET", f"/api/v1/slices/{_seg(slice_id)}")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def put_slice(self, spec: dict[str, Any]) -> tuple[Any, bool]:
        """PUT /api/v1/slices/{id}: the slice, and True when created (201) rather than replaced (200)."""
        status, record = self._send("PUT", f"/api/v1/slices/{_seg(str(spec['id']))}", spec)
        return record, status == 201

    def delete_slice(self, slice_id: str) -> None:
        """DELETE /api/v1/slices/{id}."""
        self.request("DELETE", f"/api/v1/slices/{_seg(slice_id)}")

    def put_alternative(self, group: dict[str, Any]) -> Any:
        """PUT /api/v1/alternatives/{id}."""
        return self.request("PUT", f"/api/v1/alternatives/{int(group['id'])}", group)

    def delete_alternative(self, group_id: int, missing_ok: bool = False) -> None:
        """DELETE /api/v1/alternatives/{id}; with `missing_ok`, a group that is not there is no error."""
        try:
            self.request("DELETE", f"/api/v1/alternatives/{int(group_id)}")
        except ApiError as exc:
            if not (missing_ok and exc.status == 404):
                raise

    def stats(self) -> Any:
        """GET /api/v1/stats."""
        return self.request("GET", "/api/v1/stats")

    def dataplane(self) -> Any:
        """GET /api/v1/dataplane."""
        return self.request("GET", "/api/v1/dataplane")

    def attach(self, interface: str, mode: str) -> Any:
        """POST /api/v1/dataplane/attach."""
        return self.request("POST", "/api/v1/dataplane/attach", {"interface": interface, "mode": mode})

    def detach(self, interface: str) -> None:
        """POST /api/v1/dataplane/detach."""
        self.request("POST", "/api/v1/dataplane/detach", {"interface": interface})

    def subscribe(self, callback_uri: str, measurements: list[str], period: int) -> Any:
        """POST /api/v1/subscriptions."""
        body: dict[str, Any] = {
            "subscriptionType": "TelemetryNotificationSubscription",
            "callbackReference": callback_uri,
            "period": period,
        }
        if measurements:
            body["filterCriteria"] = {"measurements": measurements}
        return self.request("POST", "/api/v1/subscriptions", body)

    def unsubscribe(self, subscription_id: str) -> None:
        """DELETE /api/v1/subscriptions/{id}."""
        self.request("DELETE", f"/api/v1/subscriptions/{_seg(subscription_id)}")

    def put_cpu(self, spec: dict[str, Any]) -> Any:
        """PUT /api/v1/dataplane/cpus/{cpu}: add the CPU to the steering set or change it."""
        return self.request("PUT", f"/api/v1/dataplane/cpus/{int(spec['cpu'])}", spec)

    def delete_cpu(self, cpu: int, missing_ok: bool = False) -> None:
        """DELETE /api/v1/dataplane/cpus/{cpu}: take the CPU out of the steering set; with
        `missing_ok`, a CPU that is not in it is no error."""
        try:
            self.request("DELETE", f"/api/v1/dataplane/cpus/{int(cpu)}")
        except ApiError as exc:
            if not (missing_ok and exc.status == 404):
                raise

    def apply_appd(self, appd: dict[str, Any], app_instance_id: str, values: dict[str, str]) -> Any:
        """PUT /api/v1/mec/applications/{id}/appd: the AppD's rules and services made the instance's,
        its <name> placeholders given `values`."""
        query = urlencode([("value", f"{name}={value}") for name, value in sorted(values.items())])
        return self.request("PUT", f"/api/v1/mec/applications/{_seg(app_instance_id)}/appd?{query}", appd)

    def wait_answering(self, timeout: float) -> None:
        """Return once GET /healthz answers (a service just started binds its port after a while);
        the last ApiError when it has not within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.request("GET", "/healthz")
                return
            except ApiError as exc:
                if exc.status is not None or time.monotonic() >= deadline:
                    raise
            time.sleep(0.2)

    def reload_dataplane(self) -> dict[str, Any]:
        """Swap in the data-plane program of the installed NetApp under traffic (an upgrade):
        rules, counters and attachments stay; the previous program runs on if it fails."""
        return self.request("POST", "/api/v1/dataplane/reload")

    def _all_pages(self, path: str) -> list[Any]:
        items: list[Any] = []
        offset = 0
        while True:
            page = self.request("GET", f"{path}?offset={offset}&limit=500")
            if isinstance(page, list):
                return page
            batch = page.get("items", [])
            items.extend(batch)
            offset += len(batch)
            if not batch or offset >= page.get("total", offset):
                return items


def _seg(value: str) -> str:
    return quote(value, safe="")


def _problem_text(response: httpx.Response) -> str:
    try:
        problem = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(problem, dict):
        text = problem.get("detail") or problem.get("title") or json.dumps(problem)
        errors = problem.get("errors") or problem.get("invalid_params")
        if errors:
            text = f"{text} {json.dumps(errors)[:500]}"
        return str(text)
    return json.dumps(problem)[:500]
