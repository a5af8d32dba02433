"""Settings of the NetApp service: a YAML file (NETAPP_CONFIG) and NETAPP_* environment variables,
the environment winning. Validated on load; settings that would expose the data plane are refused."""

from __future__ import annotations

import contextvars
import ipaddress
import os
import socket
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, IPvAnyAddress, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings import YamlConfigSettingsSource

from netapp.core.destinations import allow_entry
from netapp.intents.compiler import MAX_SHAPES
from netapp.intents.models import MAX_ALT_GROUPS

CONFIG_ENV = "NETAPP_CONFIG"
# The settings file a load_settings call names, which wins over NETAPP_CONFIG for that call.
_config_file: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("config_file", default=None)


class InterfaceSetting(BaseModel):
    """An interface the service attaches the pipeline to when it starts."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=15)
    mode: Literal["native", "generic", "offload"] = "native"
    netns: Optional[str] = Field(None, description="its network namespace, when not the site's (Settings.netns)")


class InfluxSettings(BaseModel):
    """Where the collector writes: InfluxDB 2.x, or 1.8 through its v2-compatible API (token
    "user:password", org "-", bucket "database/retention-policy")."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(pattern=r"^https?://", description="e.g. http://127.0.0.1:8086")
    token: SecretStr = Field(description='API token; InfluxDB 1.8: "user:password"')
    org: str = Field("-", min_length=1, description='InfluxDB 1.8: "-"')
    bucket: str = Field(min_length=1, description='InfluxDB 1.8: "database/retention-policy"')
    buffer_points: int = Field(
        1_000_000, ge=1000, description="points held while InfluxDB is slow or down; beyond, counted and dropped"
    )
    batch_lines: int = Field(5000, ge=1, le=100_000, description="points per write request")
    flush_interval_ms: int = Field(1000, ge=10, description="longest a partial batch waits")
    retry_interval_ms: int = Field(1000, ge=10, description="first retry delay; doubles up to max_retry_delay_ms")
    max_retry_delay_ms: int = Field(30_000, ge=10)
    timeout_ms: int = Field(10_000, ge=100, description="one write request")


class SubscriptionSettings(BaseModel):
    """Callback subscriptions (POST /api/v1/subscriptions): how many, and how notifications go out."""

    model_config = ConfigDict(extra="forbid")

    max_per_tenant: int = Field(100, ge=1, le=10_000, description="subscriptions one tenant may hold")
    workers: int = Field(4, ge=1, le=64, description="notifications sent at once (one callback each)")
    queue: int = Field(
        10_000, ge=1, description="notifications waiting to be sent; beyond, counted and dropped"
    )
    max_points: int = Field(10_000, ge=1, description="points in one notification; beyond, truncated")
    timeout_ms: int = Field(5000, ge=100, le=60_000, description="one callback request")
    max_retries: int = Field(5, ge=0, le=20, description="attempts after the first before giving up")
    retry_interval_ms: int = Field(
        1000, ge=10, description="first retry delay; doubles up to max_retry_delay_ms"
    )
    max_retry_delay_ms: int = Field(60_000, ge=10)
    callback_allow: list[str] = Field(
        default_factory=list,
        description="networks (CIDR) and host names (*.example.net: the names under it) callbacks may "
        "reach besides public addresses; empty: public addresses only (netapp.core.destinations)",
    )
    proxy: Optional[str] = Field(
        None,
        pattern=r"^https?://",
        description="HTTP proxy the notifications go through; None: direct (HTTP(S)_PROXY are ignored)",
    )

    @field_validator("callback_allow")
    @classmethod
    def _allow_entries(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            allow_entry(entry)  # ValueError naming the entry
        return entries


class StreamSettings(BaseModel):
    """The event stream (GET /api/v1/telemetry/stream)."""

    model_config = ConfigDict(extra="forbid")

    max_clients: int = Field(32, ge=1, le=10_000, description="streams open at once, all tenants together")
    queue_polls: int = Field(
        16, ge=1, le=10_000, description="polls a slow client may lag behind; beyond, the oldest are dropped"
    )
    keepalive_s: float = Field(
        15.0, gt=0, le=300, description="a comment line when no poll came for this long"
    )


class MetricsListenerSettings(BaseModel):
    """An unauthenticated, read-only `/metrics` on an address of its own, for a Prometheus that
    cannot send a bearer token (OSM's). It shows every tenant's counters: bind it to the
    management network."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    host: IPvAnyAddress = Field(ipaddress.IPv4Address("127.0.0.1"), description="address to listen on; 0.0.0.0: all")
    port: int = Field(9464, ge=0, le=65535, description="TCP port; 0: any free port")


class TelemetrySettings(BaseModel):
    """The collector: how often it reads the counters and where the points go."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    interval_s: float = Field(1.0, ge=0.05, le=3600, description="seconds between polls")
    upf_session_metrics: bool = Field(
        False, description="/metrics shows every URR (dpp_upf_urr_*, a series per session); by default the UPF's "
        "usage per association only (InfluxDB always gets both)"
    )
    atsss_path_metrics: bool = Field(
        False, description="/metrics shows every ATSSS path (dpp_atsss_path_*, a series per path of every session); "
        "by default none (InfluxDB always gets them): 10,000 sessions of two paths are 16 MB a scrape"
    )
    atsss_loss_weight: float = Field(
        0.3, gt=0, le=1, description="the weight of a poll's window in an ATSSS path's average loss, which MEC 015's "
        "QoS sessions (mtsMode 4) are checked against: average = weight * window + (1 - weight) * average; a window "
        "without Ack Vectors leaves it as is; 1: each window alone. 0.3: a lossy window moves the average 30% of the "
        "way, a lasting change is 90% in after 7 windows"
    )
    node: str = Field(
        default_factory=socket.gethostname,
        min_length=1,
        max_length=64,
        description="the node tag of every point (default: the host name)",
    )
    intent_rates: bool = Field(
        True,
        description="per-intent packets_rate/bytes_rate fields; InfluxDB's cost is per field, so at "
        "100k+ intents on a small node turn them off and derive rates with non_negative_derivative()",
    )
    influxdb: Optional[InfluxSettings] = Field(None, description="None: no InfluxDB writes")
    subscriptions: SubscriptionSettings = Field(default_factory=SubscriptionSettings)
    stream: StreamSettings = Field(default_factory=StreamSettings)
    metrics_listener: MetricsListenerSettings = Field(default_factory=MetricsListenerSettings)


class LivenessSettings(BaseModel):
    """The GTP-U echo end point (netapp.forwarding.liveness): answers Echo Requests on UDP 2152 and
    probes the alternative nodes marked `probe`."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        True,
        description="answer and probe; false (or port 2152 taken on the node, e.g. by a UPF): members "
        "marked probe are forwarded to unchecked, as members without it are",
    )
    interval_ms: int = Field(100, ge=10, le=10_000, description="milliseconds between probes of a node")
    detect_multiplier: int = Field(
        3, ge=2, le=50, description="probes a node may leave unanswered: down after interval_ms x this"
    )


class PfcpPeerSetting(BaseModel):
    """An entry of pfcp.peers: where SMFs may send from, and which Node IDs may associate from there."""

    model_config = ConfigDict(extra="forbid")

    prefix: str = Field(description='an address or prefix, e.g. "10.40.0.2" or "10.40.0.0/24"')
    node_ids: list[str] = Field(default_factory=list, description="the Node IDs that may associate from it; empty: any")

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, prefix: str) -> str:
        return str(_network(prefix))


class PfcpSettings(BaseModel):
    """The UPF's N4 endpoint (PFCP, netapp.upf.pfcp): off unless `address` is set."""

    model_config = ConfigDict(extra="forbid")

    address: Optional[str] = Field(
        None,
        description='where to answer PFCP: "host", "host:port" or "[v6]:port" (port 8805 by default); None: off',
    )
    node_id: Optional[str] = Field(None, description="our Node ID (an address or FQDN); None: n3_ipv4, else the host")
    n3_ipv4: Optional[ipaddress.IPv4Address] = Field(None, description="the N3 address of the TEIDs we choose (CHOOSE)")
    n3_ipv6: Optional[ipaddress.IPv6Address] = None
    peers: list[PfcpPeerSetting] = Field(
        default_factory=list,
        description='who may use N4: entries of an address or prefix ("10.40.0.2", "10.40.0.0/24") or '
        '{prefix, node_ids}; required with pfcp.address (["0.0.0.0/0", "::/0"]: anyone)',
    )

    @field_validator("peers", mode="before")
    @classmethod
    def _peers(cls, peers: Any) -> Any:
        """An entry may be the prefix alone."""
        if not isinstance(peers, list):
            return peers
        return [{"prefix": peer} if isinstance(peer, str) else peer for peer in peers]

    @model_validator(mode="after")
    def _address(self) -> "PfcpSettings":
        if self.address is not None:
            host, _ = pfcp_bind(self.address)  # ValueError naming what is wrong
            if ipaddress.ip_address(host).is_unspecified and self.n3_ipv4 is None and self.n3_ipv6 is None:
                raise ValueError(f"pfcp.n3_ipv4 or pfcp.n3_ipv6: required with pfcp.address {self.address}")
            if not self.peers:
                raise ValueError(
                    f"pfcp.peers: required with pfcp.address {self.address}: the addresses or prefixes of the "
                    'SMFs that may associate, e.g. ["10.40.0.2"] (["0.0.0.0/0", "::/0"]: anyone)'
                )
        return self


class UpfSettings(BaseModel):
    """The UPF's data path (netapp.upf.applier): which interfaces it serves, and how packets leave."""

    model_config = ConfigDict(extra="forbid")

    n3_interfaces: list[str] = Field(default_factory=list, description="interfaces towards the RAN (GTP-U)")
    n9_interfaces: list[str] = Field(default_factory=list, description="interfaces towards other UPFs (GTP-U)")
    n6_interfaces: dict[str, str] = Field(
        default_factory=dict, description="interface -> the network instance (data network) it reaches"
    )
    output: Literal["fib", "tx", "redirect", "pass"] = Field(
        "fib", description="how forwarded packets leave: routed (FIB), XDP_TX, a port (DEVMAP), the kernel"
    )
    # FAR BUFF: the packets user space keeps until the FAR forwards (netapp.upf.buffering); a packet
    # past a limit is dropped (the newest: those kept are the first of their flows), counted.
    buffer_session_packets: int = Field(256, ge=0, description="buffered packets per session at most")
    buffer_session_bytes: int = Field(1 << 20, ge=0, description="buffered bytes per session at most")
    buffer_packets: int = Field(65536, ge=0, description="buffered packets of all sessions at most")
    buffer_bytes: int = Field(64 << 20, ge=0, description="buffered bytes of all sessions at most")
    peer_networks: Optional[list[str]] = Field(
        None,
        description="where the UPF may send GTP-U (a FAR's outer header creation to gNBs and N9 peers, End "
        'Markers, duplicated packets): addresses or prefixes; required with pfcp.address (["0.0.0.0/0", "::/0"]: '
        "anywhere; []: nowhere)",
    )

    ue_pools: dict[str, str] = Field(
        default_factory=dict,
        description="network instance -> the IPv4 prefix of the UE addresses the UPF assigns in it (a PDR's UE IP "
        "Address with CHV4, TS 29.244 8.2.62); none: CHV4 is refused",
    )
    routing: dict[str, Literal["fib", "private"]] = Field(
        default_factory=dict,
        description="network instance -> where its forwarded packets' next hops come from: the host's FIB "
        '("fib", the default) or the instance\'s own routing table, written through /api/v1/routes ("private": '
        "isolated, no fallback to the FIB; with output fib only)",
    )

    def net_instances(self) -> dict[str, int]:
        """The network instances of n6_interfaces, numbered in the order of their names from 1."""
        return {name: number for number, name in enumerate(sorted(set(self.n6_interfaces.values())), start=1)}

    def private_instances(self) -> dict[str, int]:
        """The network instances routed by their private table: name -> id."""
        return {name: ni for name, ni in self.net_instances().items() if self.routing.get(name) == "private"}

    @model_validator(mode="after")
    def _routing(self) -> "UpfSettings":
        instances = self.net_instances()
        for name, choice in self.routing.items():
            if name not in instances:
                known = ", ".join(sorted(instances)) or "none: upf.n6_interfaces names none"
                raise ValueError(f"upf.routing.{name}: no such network instance (known: {known})")
            if choice == "private" and self.output != "fib":
                raise ValueError(
                    f"upf.routing.{name}: private routing needs upf.output fib (it is {self.output}): the private "
                    "table gives the next hop that the FIB would"
                )
        return self

    @field_validator("peer_networks")
    @classmethod
    def _peer_networks(cls, prefixes: Optional[list[str]]) -> Optional[list[str]]:
        return None if prefixes is None else [str(_network(prefix)) for prefix in prefixes]

    @field_validator("ue_pools")
    @classmethod
    def _ue_pools(cls, pools: dict[str, str]) -> dict[str, str]:
        networks = {}
        for name, prefix in pools.items():
            network = _network(prefix)
            if network.version != 4:
                raise ValueError(f"upf.ue_pools.{name}: {prefix}: not an IPv4 prefix (the UPF assigns IPv4 only)")
            networks[name] = network
        for name, network in networks.items():
            for other, overlapping in networks.items():
                if other < name and network.overlaps(overlapping):
                    raise ValueError(f"upf.ue_pools.{name}: {network} overlaps the pool of {other} ({overlapping})")
        return {name: str(network) for name, network in networks.items()}


class DispatchSettings(BaseModel):
    """The GTP-U dispatcher ("XDP RSS", netapp.qos.dispatch): on its interfaces, the receiving CPU
    spreads GTP-U tunnels over the worker CPUs by a hash of (TEID, QFI) through CPUMAP, and the
    pipeline (the UPF first) runs on the worker. A steering intent's CPU wins when it is a worker.
    Off unless both lists are given."""

    model_config = ConfigDict(extra="forbid")

    interfaces: list[str] = Field(
        default_factory=list, description="interfaces whose GTP-U is dispatched (N3); each one of `interfaces`"
    )
    workers: list[int] = Field(
        default_factory=list, description="CPU ids the tunnels are spread over, e.g. [1, 2, 3] (the receiving "
        "CPU may be one, or not: a dedicated dispatcher)"
    )
    queue_size: int = Field(2048, ge=1, le=16384, description="frames a worker's CPUMAP queue holds")

    @field_validator("workers")
    @classmethod
    def _workers(cls, workers: list[int]) -> list[int]:
        from netapp.dataplane.handle import possible_cpus
        from netapp.qos.rss_abi import MAX_RSS_WORKERS

        cpus = possible_cpus()
        for cpu in workers:
            if not 0 <= cpu < cpus:
                raise ValueError(f"dispatch.workers: CPU {cpu}: not a CPU of this node (0..{cpus - 1})")
        if len(set(workers)) != len(workers):
            raise ValueError(f"dispatch.workers: {workers}: a CPU listed twice")
        if len(workers) > MAX_RSS_WORKERS:
            raise ValueError(f"dispatch.workers: {len(workers)} CPUs: at most {MAX_RSS_WORKERS}")
        return workers

    @model_validator(mode="after")
    def _both(self) -> "DispatchSettings":
        if bool(self.interfaces) != bool(self.workers):
            given, missing = ("interfaces", "workers") if self.interfaces else ("workers", "interfaces")
            raise ValueError(f"dispatch.{missing}: required with dispatch.{given} (both lists, or neither: off)")
        return self


class QosSettings(BaseModel):
    """What a policer is given when its QER does not say (netapp.upf.policing): the algorithm, and the
    burst as the rate's worth of this many milliseconds (at least two 1500-byte packets)."""

    model_config = ConfigDict(extra="forbid")

    default_algorithm: Literal["token_bucket", "fixed_window", "sliding_window", "gcra"] = "token_bucket"
    default_burst_ms: int = Field(10, ge=1, le=10_000, description="a policer's burst: its rate over this long")


class DataplaneSettings(BaseModel):
    """How the data plane is loaded (more of its settings are top-level: max_rules, flow_cache)."""

    model_config = ConfigDict(extra="forbid")

    map_sizes: dict[str, int] = Field(
        default_factory=dict,
        description="map name -> entries, for the maps whose size is a capacity (dpp_upf_uplink, "
        "dpp_upf_downlink: PDRs; dpp_upf_teids: the TEIDs the UPF chooses; dpp_upf_ue4: the UE addresses of "
        "upf.ue_pools, the pools one after the other; dpp_upf_dl4: ways for the UE IPv4 addresses the SMF gives, "
        "four a bucket (give it twice the addresses); dpp_upf_usage: URR slots; "
        "dpp_upf_sdf_pdrs: PDRs with SDF filters), applied when the instance is loaded; a pinned "
        "instance keeps its sizes until it is unpinned. Unnamed maps keep their built-in size",
    )

    @field_validator("map_sizes")
    @classmethod
    def _sizable(cls, sizes: dict[str, int]) -> dict[str, int]:
        from netapp.dataplane.abi import map_size_refusal
        from netapp.dataplane.handle import possible_cpus

        for name, entries in sizes.items():
            refusal = map_size_refusal(name, entries, possible_cpus())
            if refusal:
                raise ValueError(f"dataplane.map_sizes.{name}: {refusal}")
        return sizes


def _network(prefix: str) -> "ipaddress.IPv4Network | ipaddress.IPv6Network":
    try:
        return ipaddress.ip_network(prefix)
    except ValueError as exc:
        raise ValueError(f"{prefix!r}: an address or a prefix without host bits, e.g. 10.40.0.0/24 ({exc})") from None


def pfcp_bind(address: str) -> tuple[str, int]:
    """(host, port) of a `pfcp.address`."""
    host, port = address, "8805"
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else "8805"
    elif address.count(":") == 1:
        host, port = address.split(":")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"pfcp.address {address!r}: an IP address, optionally with :port") from None
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"pfcp.address {address!r}: the port is 0..65535")
    return host, int(port)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NETAPP_", env_nested_delimiter="__", extra="forbid")

    state_dir: Path = Field(Path("/var/lib/dpp-netapp"), description="where the SQLite store lives")
    instance: str = Field("default", pattern=r"^[A-Za-z0-9_-]{1,32}$", description="bpffs instance name")
    netns: Optional[str] = Field(
        None,
        description="network namespace (under /var/run/netns) of the NetApp's interfaces: names resolve "
        "and links, ports and alternatives are set up there; None: the service's own",
    )
    interfaces: list[InterfaceSetting] = Field(default_factory=list)
    default_verdict: Literal["pass", "drop"] = "pass"
    default_alternative: Optional[int] = Field(
        None,
        ge=0,
        le=MAX_ALT_GROUPS - 1,
        description="alternative group that takes the overflow of intents naming none (the paper's "
        "legacy message, a slice without one); None: their overflow gets default_verdict",
    )
    cpumap_priority: Optional[int] = Field(
        None,
        ge=1,
        le=99,
        description="SCHED_FIFO priority of the CPUMAP kernel threads that run the stack for steered "
        "packets, so no normal task on their CPU delays priority traffic; None: normal scheduling",
    )
    flow_cache: bool = True
    max_rules: int = Field(65536, ge=1, le=1 << 24)
    # The classifier searches 16 shapes for every rule of the node (netapp.intents.compiler.MAX_SHAPES):
    # a function's own rules capped here leave the rest to the intents and the other functions'. Only
    # the functions that install rules of their own are keys: a misspelt one would leave its function
    # uncapped unseen.
    function_shapes: dict[Literal["atsss", "upf"], Annotated[int, Field(ge=0, le=MAX_SHAPES)]] = Field(
        default_factory=lambda: {"atsss": 8},
        description="network function -> the classifier's shapes its own rules may take at most (ATSSS: the "
        "MTS sessions' flow filters, every tenant's together; each tenant besides at most 4); a function "
        "not named: no cap (0: it may take none)",
    )
    meter_window_ms: Optional[int] = Field(
        None,
        ge=1,
        le=256_000,
        description="length of the window each CPU's capacity_pps is metered over: a window takes "
        "capacity_pps x window (at least 1) packets, the rest overflows; None: the library's 1 ms. "
        "Longer windows meter low rates (hundreds of packets per second) without treating every "
        "two packets in one millisecond as a burst",
    )

    api_host: str = "127.0.0.1"
    api_port: int = Field(8080, ge=1, le=65535)
    api_max_body_bytes: int = Field(
        4 << 20,
        ge=1024,
        le=1 << 30,
        description="the largest request body taken (413 beyond); the default holds a batch of 1000 "
        "intents with every field at its longest, indented",
    )
    api_max_json_depth: int = Field(
        32, ge=8, le=512, description="how deeply a body's arrays and objects may nest (400 beyond)"
    )
    tokens_file: Optional[Path] = Field(None, description="bearer tokens with tenants and scopes (YAML)")
    auth_disabled: bool = Field(False, description="no authentication: refused unless on loopback")
    tls_cert: Optional[Path] = None
    tls_key: Optional[Path] = None

    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    liveness: LivenessSettings = Field(default_factory=LivenessSettings)
    pfcp: PfcpSettings = Field(default_factory=PfcpSettings)
    upf: UpfSettings = Field(default_factory=UpfSettings)
    dataplane: DataplaneSettings = Field(default_factory=DataplaneSettings)
    dispatch: DispatchSettings = Field(default_factory=DispatchSettings)
    qos: QosSettings = Field(default_factory=QosSettings)

    @property
    def db_path(self) -> Path:
        return self.state_dir / "netapp.db"

    @model_validator(mode="after")
    def _refuse_unsafe(self) -> "Settings":
        if not self.auth_disabled and self.tokens_file is None:
            raise ValueError("tokens_file: required (or set auth_disabled on a loopback api_host)")
        if self.auth_disabled and not _is_loopback(self.api_host):
            raise ValueError(f"auth_disabled: refused with api_host {self.api_host}, which is not loopback")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert, tls_key: give both or neither")
        if not _is_loopback(self.api_host) and self.tls_cert is None:
            raise ValueError(f"tls_cert: required to serve on {self.api_host}, which is not loopback")
        attached = {setting.name for setting in self.interfaces}
        for name in self.dispatch.interfaces:
            if name not in attached:
                raise ValueError(f"dispatch.interfaces: {name}: not one of `interfaces` (the pipeline must run there)")
        if self.pfcp.address is not None and self.upf.peer_networks is None:
            raise ValueError(
                "upf.peer_networks: required with pfcp.address: the prefixes of the gNBs and N9 peers GTP-U may be "
                'sent to, e.g. ["10.31.0.0/16"] (["0.0.0.0/0", "::/0"]: anywhere)'
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = _config_file.get() or os.environ.get(CONFIG_ENV)
        if config_file:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=config_file))
        return tuple(sources)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_settings(config: Optional[Path] = None, **overrides: Any) -> Settings:
    """Settings from the file (`config`, else NETAPP_CONFIG) and the environment, and explicit
    overrides, which win. The process's environment is left as it was."""
    token = _config_file.set(str(config) if config is not None else None)
    try:
        return Settings(**overrides)
    finally:
        _config_file.reset(token)
