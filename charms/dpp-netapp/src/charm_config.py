"""The charm's Juju config as a validated model (no ops import): `CharmBase.load_config(CharmConfig)`."""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

INTERFACE_NAME = re.compile(r"^[^\s/:,]{1,15}$")
CPU_ITEM = re.compile(r"^(\d+)(?:-(\d+))?$")
# Group ids the data plane has (netapp/intents/models.py MAX_ALT_GROUPS; tests/charm checks it).
MAX_ALT_GROUPS = 64
# The steering set's bounds (netapp/intents/models.py MAX_CPUS; netapp/steering/models.py
# MAX_CAPACITY_PPS, MAX_QUEUE_SIZE).
MAX_CPUS = 128
MAX_CAPACITY_PPS = (1 << 32) - 1
MAX_QUEUE_SIZE = 16384
STEER_CPU_ITEM = re.compile(r"^(\d+)(?::(\d+))?$")
# netapp-index-requirements: each requirement pinned to one version with its SHA-256 (what
# `pip-compile --generate-hashes` and `pip hash` write); the only option line is the index's URL.
HASHED_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==[^\s=;]+(\s+--hash=sha256:[0-9a-f]{64})+$")
INDEX_URL = re.compile(r"^--index-url[ =]https://\S+$")
NETAPP_PROJECT = "dpp-netapp"


class CharmConfig(BaseModel):
    """Config options of charmcraft.yaml, dashes turned into underscores by ops."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    netapp_source: Literal["charm", "index"] = "charm"
    netapp_index_requirements: str = ""
    interfaces: list[str] = Field(default_factory=list)
    xdp_mode: Literal["native", "generic", "offload"] = "native"
    cpus: list[int] = Field(default_factory=list)
    # steer-cpus: CPU -> capacity_pps, the data plane's steering set on day 1 (PUT /api/v1/dataplane/cpus).
    steer_cpus: dict[int, int] = Field(default_factory=dict)
    max_rules: int = Field(65536, ge=1, le=1 << 24)
    default_verdict: Literal["pass", "drop"] = "pass"
    flow_cache: bool = True
    api_host: str = "127.0.0.1"
    api_port: int = Field(8080, ge=1, le=65535)
    tls_cert: str = ""
    # The secret options (charmcraft.yaml `type: secret`): load_config gives the ops.Secret the
    # option names (None: unset), and the charm puts the content it reads in its place
    # (charm.py SECRET_KEYS), so that the workload only ever sees text.
    tls_key: Any = None
    influxdb_url: str = ""
    influxdb_token: Any = None
    influxdb_org: str = Field("-", min_length=1)
    influxdb_bucket: str = ""
    telemetry_interval: float = Field(1.0, ge=0.05, le=3600)
    callback_allow: list[str] = Field(default_factory=list)
    metrics_host: str = ""
    metrics_port: int = Field(9464, ge=0, le=65535)
    openstack_cloud: str = ""
    openstack_credentials: Any = None  # a secret option (above): the clouds.yaml text
    alt_interface: str = ""
    alt_group: int = Field(63, ge=0, le=MAX_ALT_GROUPS - 1)
    alt_default: bool = True
    # appd: a MEC 010-2 AppD (JSON) applied on day 1 (PUT /api/v1/mec/applications/{appName}/appd).
    appd: str = ""

    @field_validator("interfaces", mode="before")
    @classmethod
    def _split_interfaces(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        names = [name.strip() for name in value.split(",") if name.strip()]
        for name in names:
            if not INTERFACE_NAME.match(name):
                raise ValueError(f"{name!r} is not an interface name (1-15 characters, no space, / or :)")
        if len(set(names)) != len(names):
            raise ValueError("an interface is listed twice")
        return names

    @field_validator("callback_allow", mode="before")
    @classmethod
    def _split_callback_allow(cls, value: object) -> object:
        # Checked entry by entry by the NetApp's settings (telemetry.subscriptions.callback_allow).
        if not isinstance(value, str):
            return value
        return [entry.strip() for entry in value.split(",") if entry.strip()]

    @field_validator("netapp_index_requirements")
    @classmethod
    def _check_index_requirements(cls, value: str) -> str:
        """Every requirement pinned and hashed, dpp-netapp among them; comments and blank lines go."""
        lines = [line.split("#", 1)[0].strip() for line in value.replace("\\\n", " ").splitlines()]
        lines = [" ".join(line.split()) for line in lines if line]
        names = set()
        for line in lines:
            pin = HASHED_PIN.match(line)
            if pin:
                names.add(re.sub(r"[-_.]+", "-", pin["name"]).lower())
            elif not INDEX_URL.match(line):
                raise ValueError(
                    f"{line!r} is neither name==version --hash=sha256:<64 hex digits> nor --index-url https://..."
                )
        if lines and NETAPP_PROJECT not in names:
            raise ValueError(f"names no {NETAPP_PROJECT}==<version> --hash=sha256:<digest>")
        return "\n".join(lines)

    @field_validator("appd")
    @classmethod
    def _check_appd(cls, value: str) -> str:
        if not value.strip():
            return ""
        try:
            appd = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON ({exc})") from None
        if not isinstance(appd, dict) or not isinstance(appd.get("appName"), str) or not appd["appName"]:
            raise ValueError("a MEC 010-2 AppD is a JSON object with an appName (the instance is named after it)")
        return value

    @field_validator("alt_interface")
    @classmethod
    def _check_alt_interface(cls, value: str) -> str:
        value = value.strip()
        if value and not INTERFACE_NAME.match(value):
            raise ValueError(f"{value!r} is not an interface name (1-15 characters, no space, / or :)")
        return value

    @field_validator("metrics_host")
    @classmethod
    def _check_metrics_host(cls, value: str) -> str:
        if not value.strip():
            return ""  # the unit's management address, which the charm asks Juju for
        try:
            return str(ipaddress.ip_address(value.strip()))
        except ValueError:
            raise ValueError(f"{value!r} is not an IP address (empty for the management address)") from None

    @field_validator("cpus", mode="before")
    @classmethod
    def _parse_cpus(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        cpus: set[int] = set()
        for item in (part.strip() for part in value.split(",")):
            if not item:
                continue
            found = CPU_ITEM.match(item)
            if not found:
                raise ValueError(f"{item!r} is neither a CPU number nor a range like 2-5")
            first, last = int(found[1]), int(found[2] or found[1])
            if last < first:
                raise ValueError(f"{item!r}: the range ends before it starts")
            cpus.update(range(first, last + 1))
        return sorted(cpus)

    @field_validator("steer_cpus", mode="before")
    @classmethod
    def _parse_steer_cpus(cls, value: object) -> object:
        """"2,3" or "2:500000,3:500000": each CPU, with its capacity in packets per second (0 or
        none: unmetered)."""
        if not isinstance(value, str):
            return value
        cpus: dict[int, int] = {}
        for item in (part.strip() for part in value.split(",")):
            if not item:
                continue
            found = STEER_CPU_ITEM.match(item)
            if not found:
                raise ValueError(f"{item!r} is not cpu[:capacity_pps], e.g. 2 or 2:500000")
            cpu, capacity = int(found[1]), int(found[2] or 0)
            if cpu >= MAX_CPUS:
                raise ValueError(f"{item!r}: CPU {cpu} is above {MAX_CPUS - 1}")
            if capacity > MAX_CAPACITY_PPS:
                raise ValueError(f"{item!r}: capacity {capacity} pps is above 2^32-1 ({MAX_CAPACITY_PPS})")
            if cpu in cpus:
                raise ValueError(f"CPU {cpu} is listed twice")
            cpus[cpu] = capacity
        return cpus

    @field_validator("influxdb_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        if value and not re.match(r"^https?://\S+$", value):
            raise ValueError("must start with http:// or https://")
        return value

    @model_validator(mode="after")
    def _check_together(self) -> "CharmConfig":
        if self.netapp_source == "index" and not self.netapp_index_requirements:
            raise ValueError(
                "netapp-index-requirements: required with netapp-source index (dpp-netapp and its "
                "dependencies, each name==version --hash=sha256:<digest>)"
            )
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls-cert, tls-key: give both or neither")
        if not self.is_loopback and not self.tls_cert:
            raise ValueError(f"tls-cert: required to serve the API on {self.api_host}, which is not loopback")
        if self.influxdb_url and not (self.influxdb_token and self.influxdb_bucket):
            raise ValueError("influxdb-token, influxdb-bucket: required with influxdb-url")
        if self.metrics_port and self.metrics_port == self.api_port:
            raise ValueError(f"metrics-port: {self.metrics_port} is the api-port; pick another or 0 for off")
        return self

    @property
    def install_source(self) -> str:
        """What the NetApp is installed from: a change of it means installing again."""
        if self.netapp_source == "charm":
            return "charm"
        return f"index\n{self.netapp_index_requirements}"

    @property
    def is_loopback(self) -> bool:
        """Whether the API listens on loopback only."""
        if self.api_host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.api_host).is_loopback
        except ValueError:
            return False

    @property
    def metrics_enabled(self) -> bool:
        """Whether the NetApp serves the unauthenticated metrics listener."""
        return self.metrics_port != 0

    @property
    def metrics_is_loopback(self) -> bool:
        """Whether the metrics listener is reachable from this machine only (or has no address yet)."""
        return not self.metrics_host or ipaddress.ip_address(self.metrics_host).is_loopback

    @property
    def tls(self) -> bool:
        """Whether the API is served over HTTPS."""
        return bool(self.tls_cert)


def describe_error(error: ValidationError) -> str:
    """One line naming the config options at fault, in Juju's spelling (dashes)."""
    parts = []
    for item in error.errors():
        option = "-".join(str(part) for part in item["loc"] if isinstance(part, str)).replace("_", "-")
        message = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{option}: {message}" if option else message)
    return "; ".join(parts)
