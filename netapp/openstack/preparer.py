"""Make a cloud meet the preconditions it can: flavor extra specs, image properties, port settings,
and (with port security kept, strategy allow-address-pairs) the security group rule the liveness
probe between NetApp units needs.

`plan` compares what is there with what is required and lists only the differences, so a second
run plans nothing; `apply` carries a plan out. Networks (their MTU) and the guest are not
touched: a network is shared with other ports, and the guest is cloud-init's.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from netapp.openstack.cloud import OpenStackError, describe, errors, sdk
from netapp.openstack.inspector import Inspected, find
from netapp.openstack.preconditions import (
    FLAVOR_DISK_GB,
    FLAVOR_RAM_MB,
    FLAVOR_VCPUS,
    HUGE_PAGES_SPEC,
    HUGE_PAGES_VALUE,
    MAX_VIRTIO_XDP_MTU,
    MULTIQUEUE_PROPERTY,
    PROBE_PORT,
    PortState,
    Requirements,
    SecurityGroupState,
    huge_pages_met,
    missing_sources,
    multiqueue_met,
    pinning_unmet,
    probe_unmet,
)

PORT_SECURITY_STRATEGIES = ("full", "allow-address-pairs")  # as OSM's port-security-disable-strategy
GLANCE_PATCH = "application/openstack-images-v2.1-json-patch"


@dataclass(frozen=True)
class Change:
    subject: str
    what: str
    apply: Callable[[], None] = field(compare=False, repr=False)


@dataclass(frozen=True)
class Options:
    flavor: Optional[str] = None  # the flavor to create or update; default the one inspected
    port_security: str = "full"  # full: off, no security groups; allow-address-pairs: pairs added
    vcpus: Optional[int] = None  # the size of a flavor prepare creates (default: the server's, else the VNFD's)
    ram_mb: Optional[int] = None
    disk_gb: Optional[int] = None
    required: Requirements = Requirements()


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what prepare leaves to the operator


def plan(connection: Any, inspected: Inspected, options: Options) -> Plan:
    result = Plan()
    flavor_name = options.flavor or inspected.target.flavor
    flavor = inspected.flavor
    if options.flavor and options.flavor != inspected.target.flavor:
        flavor = find(connection.compute.find_flavor, options.flavor, get_extra_specs=True)
    specs = dict(flavor.extra_specs or {}) if flavor is not None else {}
    wanted = _wanted_specs(specs, options.required)
    if flavor is None:
        result.changes.append(_create_flavor(connection, flavor_name, wanted, inspected, options))
    elif wanted:
        result.changes.append(_set_specs(connection, flavor, wanted))
    if any(port.virtio for port in inspected.target.ports):
        if not multiqueue_met({**specs, **wanted}, inspected.target.image_properties):
            result.changes.append(_image_multiqueue(connection, inspected))
    for resource, port in zip(inspected.ports, inspected.target.ports):
        if port.port_security and missing_sources(port, options.required.sources):
            result.changes.append(_port(connection, resource, port, options))
    if options.port_security == "allow-address-pairs":
        result.changes.extend(_probe_rules(connection, inspected.target.ports, result.notes))
    result.notes.extend(_notes(inspected, flavor_name, options.required))
    return result


def apply(changes: list[Change]) -> None:
    """Carry out each change in order; the first refusal stops the run and says what was done."""
    for done, change in enumerate(changes):
        try:
            change.apply()
        except errors() as exc:
            applied = f" ({done} change(s) before it were made)" if done else ""
            raise OpenStackError(f"{change.subject}: {change.what}: {describe(exc)}{applied}") from None


def _wanted_specs(specs: dict[str, str], required: Requirements) -> dict[str, str]:
    wanted = pinning_unmet(specs)
    if required.huge_pages and not huge_pages_met(specs):
        wanted[HUGE_PAGES_SPEC] = HUGE_PAGES_VALUE
    return wanted


def _spec_words(specs: dict[str, str]) -> str:
    return ", ".join(f"{key}={value}" for key, value in specs.items())


def _create_flavor(connection: Any, name: str, specs: dict[str, str], inspected: Inspected, options: Options) -> Change:
    vcpus, ram, disk = inspected.server_size or (FLAVOR_VCPUS, FLAVOR_RAM_MB, FLAVOR_DISK_GB)
    vcpus, ram = options.vcpus or vcpus, options.ram_mb or ram
    disk = disk if options.disk_gb is None else options.disk_gb

    def create() -> None:
        flavor = connection.compute.create_flavor(name=name, vcpus=vcpus, ram=ram, disk=disk)
        connection.compute.create_flavor_extra_specs(flavor, specs)

    what = f"create ({vcpus} vCPUs, {ram} MB, {disk} GB) with {_spec_words(specs)}"
    return Change(f"flavor {name}", what, create)


def _set_specs(connection: Any, flavor: Any, specs: dict[str, str]) -> Change:
    def set_specs() -> None:
        connection.compute.create_flavor_extra_specs(flavor, specs)  # POST os-extra_specs merges

    return Change(f"flavor {flavor.name}", f"set {_spec_words(specs)}", set_specs)


def _image_multiqueue(connection: Any, inspected: Inspected) -> Change:
    image = inspected.image
    # Glance keeps properties as strings: "true", as `openstack image set --property` sends it.
    op = "replace" if MULTIQUEUE_PROPERTY in inspected.target.image_properties else "add"
    body = [{"op": op, "path": f"/{MULTIQUEUE_PROPERTY}", "value": "true"}]

    def patch() -> None:
        response = connection.image.patch(
            f"images/{image.id}", json=body, headers={"Content-Type": GLANCE_PATCH}, raise_exc=False
        )
        sdk().exceptions.raise_from_response(response)

    return Change(f"image {inspected.target.image}", f"set {MULTIQUEUE_PROPERTY}=true", patch)


def _port(connection: Any, resource: Any, port: PortState, options: Options) -> Change:
    if options.port_security == "full":
        attrs: dict[str, Any] = {"security_groups": [], "port_security_enabled": False}
        what = "disable port security, remove its security groups"
    else:
        missing = missing_sources(port, options.required.sources)
        pairs = list(resource.allowed_address_pairs or []) + [{"ip_address": source} for source in missing]
        attrs = {"allowed_address_pairs": pairs}
        what = f"add allowed address pairs {', '.join(missing)}"

    def update() -> None:
        connection.network.update_port(resource, **attrs)

    return Change(port.label, what, update)


def _probe_rules(connection: Any, ports: tuple[PortState, ...], notes: list[str]) -> list[Change]:
    """A rule letting GTP-U echo (UDP 2152) in from each probe source a port with port security
    lacks, in its first security group; one per group and source when ports share a group."""
    changes: dict[tuple[str, str], Change] = {}
    for port in ports:
        missing = probe_unmet(port) if port.port_security else []
        if missing and not port.security_groups:
            notes.append(f"{port.label}: port security on and no security group, so nothing gets in: see netapp openstack check")
            continue
        for source in missing:
            group = port.security_groups[0]
            if (group.id, source) not in changes:
                changes[(group.id, source)] = _probe_rule(connection, group, source)
    return list(changes.values())


def _probe_rule(connection: Any, group: SecurityGroupState, source: str) -> Change:
    ethertype = f"IPv{ipaddress.ip_network(source, strict=False).version}"

    def create() -> None:
        connection.network.create_security_group_rule(
            security_group_id=group.id,
            direction="ingress",
            ethertype=ethertype,
            protocol="udp",
            port_range_min=PROBE_PORT,
            port_range_max=PROBE_PORT,
            remote_ip_prefix=source,
        )

    what = f"allow UDP {PROBE_PORT} (GTP-U echo, the liveness probe) in from {source}"
    return Change(f"security group {group.ref}", what, create)


def _notes(inspected: Inspected, flavor_name: str, required: Requirements) -> list[str]:
    target = inspected.target
    notes = []
    if target.server and _wanted_specs(inspected.server_specs, required):
        if flavor_name == inspected.server_flavor:
            notes.append(
                f"server {target.server} keeps the copy of flavor {flavor_name} it booted with, and Nova "
                f"resizes onto another flavor only: run prepare --flavor <new name>, then "
                f"openstack server resize --flavor <new name> {target.server}"
            )
        else:
            notes.append(f"server {target.server} runs on its old flavor until: openstack server resize --flavor {flavor_name} {target.server}")
    if any(port.virtio for port in target.ports):
        notes.append(f"image properties apply to servers booted or rebuilt from image {target.image} afterwards")
    for port in target.ports:
        if port.virtio and (port.network_mtu is None or port.network_mtu > MAX_VIRTIO_XDP_MTU):
            notes.append(f"{port.label}: the network's MTU is left alone (shared): see netapp openstack check")
    return notes
