"""The XDP preconditions of a NetApp VM on OpenStack: what each one requires, and the exact fix.

Plain data and judgement, no OpenStack import: the inspector turns what openstacksdk reads into a
`Target`, `evaluate` turns a Target into one `Finding` per precondition and subject. The required
values are those vnfd/dpp-netapp_vnfd.yaml declares (tests/openstack/test_vnfd_agrees.py).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping, Optional

# Flavor extra specs for the VNFD's `pinning: {policy: static, thread-policy: ISOLATE}`, as OSM's RO
# writes them: each vCPU on a host core of its own, no sibling thread shared with anyone.
PINNING_SPECS: Mapping[str, str] = {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"}
# The VNFD's `mempage-size: LARGE`; a flavor may also name a size (2MB, 1GB, 2048, ...).
HUGE_PAGES_SPEC = "hw:mem_page_size"
HUGE_PAGES_VALUE = "large"
NOT_HUGE_PAGES = frozenset({"small", "any"})  # "any" falls back to small pages: no guarantee
# The size `prepare` creates a missing flavor with: the VNFD's virtual-compute-desc and root disk.
FLAVOR_VCPUS, FLAVOR_RAM_MB, FLAVOR_DISK_GB = 8, 16384, 20

# virtio-net multiqueue: Nova gives each virtio port one queue pair per vCPU (up to
# [libvirt] max_queues) when the image property, or the flavor extra spec, says so.
MULTIQUEUE_PROPERTY = "hw_vif_multiqueue_enabled"
MULTIQUEUE_SPEC = "hw:vif_multiqueue_enabled"

# virtio_net refuses a single-buffer XDP program when the MTU exceeds one page less the XDP
# headroom and skb_shared_info, less the Ethernet header (virtnet_xdp_set): with 4 KiB pages
# 4096 - SKB_DATA_ALIGN(256 + 320) - 14 = 3506. The NetApp's programs are single-buffer.
MAX_VIRTIO_XDP_MTU = 3506

# Frames forwarded to alternative nodes keep their source addresses (the gNB's, the UE's):
# Neutron's anti-spoofing drops them unless port security is off or address pairs cover them.
ANY_SOURCE = ("0.0.0.0/0", "::/0")

# The liveness probe of alternative nodes: GTP-U Echo between the NetApp units on UDP 2152
# (api/rest.md "Liveness of alternative nodes"); a security group must let it in.
PROBE_PORT = 2152
# Neutron's protocol values that take UDP: none (any), its name, its number, "any" (Neutron 2023.1 on).
UDP_PROTOCOLS = frozenset({None, "udp", "17", "any"})

# Neutron vnic types whose guest driver is virtio_net; direct (SR-IOV VF) and direct-physical
# (passthrough) ports run the NIC's own driver, where MTU and queues are the NIC's.
VIRTIO_VNIC_TYPES = frozenset({"normal", "macvtap", "virtio-forwarder", "vdpa"})


class Status(str, Enum):
    OK = "ok"
    UNMET = "UNMET"
    GUEST = "guest"  # inside the VM: no OpenStack API sees it; the VNF's cloud-init does it


@dataclass(frozen=True)
class Finding:
    check: str  # stable id: cpu-pinning, huge-pages, multiqueue, mtu, port-security, liveness-probe, lro, queues
    subject: str  # what it is about: "flavor dpp", "port alt-port (network altnet)", "guest"
    status: Status
    what: str
    fix: str = ""  # the exact command(s); empty when ok


@dataclass(frozen=True)
class SecurityRule:
    """A Neutron security group rule; None is "any" (protocol, ports, remote)."""

    direction: str
    ethertype: str
    protocol: Optional[str] = None
    port_min: Optional[int] = None
    port_max: Optional[int] = None
    remote_ip_prefix: Optional[str] = None
    remote_group_id: Optional[str] = None

    def admits_probe(self, source: str) -> bool:
        """Whether GTP-U echo (UDP 2152) from every address of `source` gets in by this rule. A
        rule for a remote group admits that group's members, the NetApp units when they share it."""
        network = ipaddress.ip_network(source, strict=False)
        if self.direction != "ingress" or self.ethertype != f"IPv{network.version}":
            return False
        if (self.protocol or None) not in UDP_PROTOCOLS:
            return False
        if self.port_min is not None and not self.port_min <= PROBE_PORT <= (self.port_max or self.port_min):
            return False
        if self.remote_group_id or not self.remote_ip_prefix:
            return True
        remote = ipaddress.ip_network(self.remote_ip_prefix, strict=False)
        return remote.version == network.version and network.subnet_of(remote)


@dataclass(frozen=True)
class SecurityGroupState:
    id: str
    name: str
    rules: tuple[SecurityRule, ...] = ()

    @property
    def ref(self) -> str:
        return self.name or self.id


@dataclass(frozen=True)
class PortState:
    id: str
    name: str
    network_name: str
    network_mtu: Optional[int]
    vnic_type: str
    port_security: bool
    address_pairs: tuple[str, ...] = ()  # allowed_address_pairs' ip_address values
    security_groups: tuple[SecurityGroupState, ...] = ()  # read while port security is on
    subnets: tuple[str, ...] = ()  # CIDRs of its fixed IPs' subnets: where the other units are

    @property
    def label(self) -> str:
        return f"port {self.name or self.id} (network {self.network_name})"

    @property
    def ref(self) -> str:
        """How a command names the port: its name when it has one, else its id."""
        return self.name or self.id

    @property
    def virtio(self) -> bool:
        return self.vnic_type in VIRTIO_VNIC_TYPES


@dataclass(frozen=True)
class Target:
    """What a NetApp VM boots with: its flavor's extra specs, its image's properties, its
    data-plane ports (the management port is not one)."""

    flavor: str
    flavor_specs: Mapping[str, str]
    vcpus: int
    image: str
    image_properties: Mapping[str, object]
    ports: tuple[PortState, ...] = ()
    server: Optional[str] = None


@dataclass(frozen=True)
class Requirements:
    huge_pages: bool = True  # the VNFD asks for them; --no-huge-pages when the NetApp runs without
    sources: tuple[str, ...] = ANY_SOURCE  # source prefixes the forwarded frames may carry


@dataclass
class Report:
    target: Target
    findings: list[Finding] = field(default_factory=list)

    @property
    def unmet(self) -> list[Finding]:
        return [finding for finding in self.findings if finding.status is Status.UNMET]


def evaluate(target: Target, required: Requirements = Requirements()) -> Report:
    """One finding per precondition and subject, in the order an operator fixes them."""
    findings = [*_flavor_findings(target, required)]
    virtio = [port for port in target.ports if port.virtio]
    if virtio:
        findings.append(_multiqueue(target))
        findings.extend(_mtu(port) for port in virtio)
    findings.extend(_port_security(port, required.sources) for port in target.ports)
    findings.extend(_liveness_probe(port) for port in target.ports if port.port_security)
    findings.extend(_guest(target, virtio))
    return Report(target, findings)


def is_true(value: object) -> bool:
    """Glance and Nova keep these flags as strings; Nova reads them with oslo's bool_from_string."""
    return str(value).strip().lower() in {"true", "1", "yes", "y", "on"}


def pinning_unmet(specs: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in PINNING_SPECS.items() if specs.get(key, "").lower() != value}


def huge_pages_met(specs: Mapping[str, str]) -> bool:
    value = specs.get(HUGE_PAGES_SPEC, "").strip().lower()
    return bool(value) and value not in NOT_HUGE_PAGES


def multiqueue_met(flavor_specs: Mapping[str, str], image_properties: Mapping[str, object]) -> bool:
    return is_true(image_properties.get(MULTIQUEUE_PROPERTY)) or is_true(flavor_specs.get(MULTIQUEUE_SPEC))


def missing_sources(port: PortState, sources: tuple[str, ...]) -> list[str]:
    """The source prefixes that no allowed address pair of the port covers."""
    pairs = []
    for address in port.address_pairs:
        try:
            pairs.append(ipaddress.ip_network(address, strict=False))
        except ValueError:
            continue
    missing = []
    for source in sources:
        network = ipaddress.ip_network(source, strict=False)
        if not any(pair.version == network.version and network.subnet_of(pair) for pair in pairs):
            missing.append(source)
    return missing


def port_security_fix(port: PortState, sources: tuple[str, ...]) -> str:
    pairs = " ".join(f"--allowed-address ip-address={source}" for source in missing_sources(port, sources))
    return (
        f"openstack port set --no-security-group --disable-port-security {port.ref}"
        f"  (or keep port security: openstack port set {pairs} {port.ref})"
    )


def _flavor_findings(target: Target, required: Requirements) -> list[Finding]:
    subject = f"flavor {target.flavor}"
    unmet = pinning_unmet(target.flavor_specs)
    what = "pinned vCPUs, no shared cores or siblings (" + ", ".join(f"{k}={v}" for k, v in PINNING_SPECS.items()) + ")"
    findings = [
        Finding("cpu-pinning", subject, Status.UNMET, what, _flavor_set(unmet, target.flavor))
        if unmet
        else Finding("cpu-pinning", subject, Status.OK, what)
    ]
    if required.huge_pages:
        what = f"guest memory in huge pages ({HUGE_PAGES_SPEC}={HUGE_PAGES_VALUE}, or a page size)"
        if huge_pages_met(target.flavor_specs):
            findings.append(Finding("huge-pages", subject, Status.OK, what))
        else:
            fix = _flavor_set({HUGE_PAGES_SPEC: HUGE_PAGES_VALUE}, target.flavor)
            findings.append(Finding("huge-pages", subject, Status.UNMET, what, fix))
    return findings


def _flavor_set(specs: Mapping[str, str], flavor: str) -> str:
    properties = " ".join(f"--property {key}={value}" for key, value in specs.items())
    return f"openstack flavor set {properties} {flavor}"


def _multiqueue(target: Target) -> Finding:
    what = (
        f"virtio-net multiqueue: a queue pair per vCPU ({target.vcpus}) on each virtio port "
        f"({MULTIQUEUE_PROPERTY}=true on the image, or {MULTIQUEUE_SPEC}=true on the flavor)"
    )
    if multiqueue_met(target.flavor_specs, target.image_properties):
        return Finding("multiqueue", f"image {target.image}", Status.OK, what)
    fix = f"openstack image set --property {MULTIQUEUE_PROPERTY}=true {target.image}"
    return Finding("multiqueue", f"image {target.image}", Status.UNMET, what, fix)


def _mtu(port: PortState) -> Finding:
    mtu = "unknown" if port.network_mtu is None else str(port.network_mtu)
    what = f"MTU {mtu} leaves room for native XDP on virtio_net (at most {MAX_VIRTIO_XDP_MTU} with 4 KiB pages)"
    if port.network_mtu is not None and port.network_mtu <= MAX_VIRTIO_XDP_MTU:
        return Finding("mtu", port.label, Status.OK, what)
    fix = (
        f"openstack network set --mtu {MAX_VIRTIO_XDP_MTU} {port.network_name}"
        f"  (or in the guest: ip link set dev <dev> mtu {MAX_VIRTIO_XDP_MTU})"
    )
    return Finding("mtu", port.label, Status.UNMET, what, fix)


def _port_security(port: PortState, sources: tuple[str, ...]) -> Finding:
    what = "frames forwarded to alternative nodes keep their source addresses: port security off"
    if not port.port_security:
        return Finding("port-security", port.label, Status.OK, what)
    what = f"{what}, or allowed address pairs for {', '.join(sources)}"
    if not missing_sources(port, sources):
        return Finding("port-security", port.label, Status.OK, what + " (security groups still filter)")
    return Finding("port-security", port.label, Status.UNMET, what, port_security_fix(port, sources))


def probe_sources(port: PortState) -> tuple[str, ...]:
    """Where the other NetApp units probe this port from: its subnets (any IPv4 if it has none)."""
    return port.subnets or ("0.0.0.0/0",)


def probe_unmet(port: PortState) -> list[str]:
    """The probe sources no rule of the port's security groups lets UDP 2152 in from."""
    rules = [rule for group in port.security_groups for rule in group.rules]
    return [source for source in probe_sources(port) if not any(rule.admits_probe(source) for rule in rules)]


def probe_rule_command(group: str, source: str) -> str:
    return f"openstack security group rule create --protocol udp --dst-port {PROBE_PORT} --remote-ip {source} {group}"


def _liveness_probe(port: PortState) -> Finding:
    what = (
        f"with port security on, its security groups let in UDP {PROBE_PORT} (GTP-U echo, the liveness "
        f"probe between NetApp units) from {', '.join(probe_sources(port))}"
    )
    missing = probe_unmet(port)
    if not missing:
        return Finding("liveness-probe", port.label, Status.OK, what)
    if not port.security_groups:
        group = "dpp-gtpu-echo"
        commands = [f"openstack security group create {group}", *(probe_rule_command(group, s) for s in missing)]
        commands.append(f"openstack port set --security-group {group} {port.ref}")
    else:
        commands = [probe_rule_command(port.security_groups[0].ref, source) for source in missing]
    return Finding("liveness-probe", port.label, Status.UNMET, what, " && ".join(commands))


def _guest(target: Target, virtio: list[PortState]) -> list[Finding]:
    """What only the guest can do; the VNF's cloud-init does it (vnfd/cloud_init/)."""
    findings = [
        Finding(
            "lro",
            "guest",
            Status.GUEST,
            "LRO and hardware GRO off on every data-plane NIC (native XDP refuses large receive offload)",
            "ethtool -K <dev> lro off rx-gro-hw off",
        )
    ]
    if virtio:
        findings.append(
            Finding(
                "queues",
                "guest",
                Status.GUEST,
                f"all {target.vcpus} queue pairs in use; XDP_TX and redirect get TX queues of their own "
                "only if queue pairs >= pairs in use + CPUs, more than Nova's one per vCPU, so they share "
                "TX queues under a lock (Linux 5.13, 5.10.61, 5.4.143 on; older kernels refuse native XDP)",
                f"ethtool -L <dev> combined {target.vcpus}",
            )
        )
    return findings
