"""Read a NetApp VM's flavor, image, ports and networks through openstacksdk and judge them.

A server is judged on what it runs with: the copy of the flavor Nova keeps with it (extra specs
included, compute API 2.47 on), its image's properties, its ports. Explicit --flavor, --image and
--port name what to judge instead, e.g. before a server exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

from netapp.openstack.cloud import OpenStackError, describe, errors, sdk
from netapp.openstack.preconditions import (
    MULTIQUEUE_PROPERTY,
    PortState,
    Report,
    Requirements,
    SecurityGroupState,
    SecurityRule,
    Target,
    evaluate,
)


@dataclass(frozen=True)
class Selection:
    """What to inspect, as the command line names it."""

    server: Optional[str] = None
    flavor: Optional[str] = None
    image: Optional[str] = None
    ports: tuple[str, ...] = ()
    data_networks: tuple[str, ...] = ()  # data-plane ports are those on these networks,
    mgmt_network: Optional[str] = None  # or all but those on this one


@dataclass
class Inspected:
    """The resources read (for the preparer) and the Target they make (for the judgement)."""

    target: Target
    flavor: Any = None  # the flavor resource; None when no flavor of that name exists (yet)
    image: Any = None
    ports: list[Any] = field(default_factory=list)  # data-plane port resources, as target.ports
    server_flavor: Optional[str] = None  # the flavor the server booted with, when a server was named
    server_specs: dict[str, str] = field(default_factory=dict)  # and the extra specs of its copy
    server_size: Optional[tuple[int, int, int]] = None  # and its vCPUs, RAM (MB), disk (GB)


def check(connection: Any, selection: Selection, required: Requirements = Requirements()) -> Report:
    """The findings for the selection; an OpenStackError when something named does not exist."""
    inspected = inspect(connection, selection)
    if inspected.flavor is None and selection.server is None:
        raise OpenStackError(f"flavor {inspected.target.flavor}: not found")
    return evaluate(inspected.target, required)


def inspect(connection: Any, selection: Selection) -> Inspected:
    try:
        return _inspect(connection, selection)
    except errors() as exc:
        raise OpenStackError(describe(exc)) from None


def _inspect(connection: Any, selection: Selection) -> Inspected:
    server = _server(connection, selection.server) if selection.server else None
    if server is None and not (selection.flavor and selection.image):
        raise OpenStackError("name a server (--server), or a flavor and an image (--flavor, --image)")
    flavor_name, specs, vcpus, flavor = _flavor(connection, server, selection.flavor)
    image = _image(connection, server, selection.image)
    networks: dict[str, Any] = {}
    ports = _data_ports(connection, server, selection, networks)
    target = Target(
        flavor=flavor_name,
        flavor_specs=specs,
        vcpus=vcpus,
        image=image.name or image.id,
        image_properties=_image_properties(image),
        ports=tuple(_port_state(connection, port, _network(connection, networks, port.network_id)) for port in ports),
        server=server.name if server is not None else None,
    )
    if server is None:
        return Inspected(target, flavor, image, ports)
    embedded = server.flavor
    size = (int(embedded.vcpus or 0), int(embedded.ram or 0), int(embedded.disk or 0))
    return Inspected(target, flavor, image, ports, _embedded_flavor_name(server), dict(embedded.extra_specs or {}), size)


def find(method: Callable[..., Any], name_or_id: str, **query: Any) -> Any:
    """A proxy's find_*, None when there is no such resource."""
    try:
        return method(name_or_id, ignore_missing=False, **query)
    except sdk().exceptions.NotFoundException:
        return None


def _server(connection: Any, name_or_id: str) -> Any:
    server = find(connection.compute.find_server, name_or_id)
    if server is None:
        raise OpenStackError(f"server {name_or_id}: not found")
    return server


def _flavor(connection: Any, server: Any, name: Optional[str]) -> tuple[str, dict[str, str], int, Any]:
    """The flavor's name, extra specs and vCPUs, and its resource (None if there is none of that name).

    A server's own copy wins unless --flavor names another: changing a flavor changes no server
    that booted with it."""
    if name is None:
        embedded = server.flavor
        name = _embedded_flavor_name(server)
        resource = find(connection.compute.find_flavor, name, get_extra_specs=True)
        return name, dict(embedded.extra_specs or {}), int(embedded.vcpus or 0), resource
    resource = find(connection.compute.find_flavor, name, get_extra_specs=True)
    if resource is None:
        vcpus = int(server.flavor.vcpus or 0) if server is not None else 0
        return name, {}, vcpus, None
    return resource.name, dict(resource.extra_specs or {}), int(resource.vcpus or 0), resource


def _embedded_flavor_name(server: Any) -> str:
    return server.flavor.original_name or server.flavor.name or server.flavor.id


def _image(connection: Any, server: Any, name: Optional[str]) -> Any:
    if name is None:
        name = (server.image or {}).get("id") if server is not None else None
        if not name:
            raise OpenStackError(f"server {server.name} boots from a volume: name its image with --image")
    image = find(connection.image.find_image, name)
    if image is None:
        raise OpenStackError(f"image {name}: not found")
    return image


def _image_properties(image: Any) -> dict[str, object]:
    """The image's properties as Glance holds them (strings), known to openstacksdk or not."""
    properties = dict(image.properties or {})
    multiqueue = image.is_hw_vif_multiqueue_enabled  # openstacksdk reads this one as a bool
    if multiqueue is not None:
        properties[MULTIQUEUE_PROPERTY] = "true" if multiqueue else "false"
    return properties


def _data_ports(connection: Any, server: Any, selection: Selection, networks: dict[str, Any]) -> list[Any]:
    if selection.ports:
        ports = []
        for name in selection.ports:
            port = find(connection.network.find_port, name)
            if port is None:
                raise OpenStackError(f"port {name}: not found")
            ports.append(port)
        return ports
    if server is None:
        return []
    ports = sorted(connection.network.ports(device_id=server.id), key=lambda port: port.name or port.id)
    names = {port.network_id: _network(connection, networks, port.network_id).name or port.network_id for port in ports}
    if selection.data_networks:
        _known(selection.data_networks, names, server, "--data-network")
        return [port for port in ports if _on(port, selection.data_networks, names)]
    if selection.mgmt_network:
        _known((selection.mgmt_network,), names, server, "--mgmt-network")
        return [port for port in ports if not _on(port, (selection.mgmt_network,), names)]
    raise OpenStackError(
        f"server {server.name} has ports on {', '.join(sorted(set(names.values())))}: say which carry the "
        "data plane (--data-network NAME, repeated) or which is management (--mgmt-network NAME)"
    )


def _on(port: Any, networks: Iterable[str], names: dict[str, str]) -> bool:
    return port.network_id in networks or names[port.network_id] in networks


def _known(wanted: Iterable[str], names: dict[str, str], server: Any, option: str) -> None:
    for network in wanted:
        if network not in names and network not in names.values():
            raise OpenStackError(
                f"{option} {network}: server {server.name} has no port on it "
                f"(its networks: {', '.join(sorted(set(names.values())))})"
            )


def _network(connection: Any, networks: dict[str, Any], network_id: str) -> Any:
    """The network, read once per inspection."""
    if network_id not in networks:
        networks[network_id] = connection.network.get_network(network_id)
    return networks[network_id]


def _port_state(connection: Any, port: Any, network: Any) -> PortState:
    pairs = tuple(pair.get("ip_address", "") for pair in port.allowed_address_pairs or [])
    # Without the port-security extension there is no such field, and no anti-spoofing either.
    secured = port.is_port_security_enabled is not False and port.is_port_security_enabled is not None
    return PortState(
        id=port.id,
        name=port.name or "",
        network_name=network.name or network.id,
        network_mtu=network.mtu,
        vnic_type=port.binding_vnic_type or "normal",
        port_security=secured,
        address_pairs=pairs,
        security_groups=_security_groups(connection, port) if secured else (),
        subnets=_subnets(connection, port) if secured else (),
    )


def _security_groups(connection: Any, port: Any) -> tuple[SecurityGroupState, ...]:
    groups = []
    for group_id in port.security_group_ids or []:
        group = connection.network.get_security_group(group_id)
        rules = tuple(
            SecurityRule(
                direction=rule.get("direction", ""),
                ethertype=rule.get("ethertype", ""),
                protocol=None if rule.get("protocol") is None else str(rule["protocol"]).lower(),
                port_min=rule.get("port_range_min"),
                port_max=rule.get("port_range_max"),
                remote_ip_prefix=rule.get("remote_ip_prefix"),
                remote_group_id=rule.get("remote_group_id"),
            )
            for rule in group.security_group_rules or []
        )
        groups.append(SecurityGroupState(group.id, group.name or "", rules))
    return tuple(groups)


def _subnets(connection: Any, port: Any) -> tuple[str, ...]:
    subnet_ids = dict.fromkeys(ip["subnet_id"] for ip in port.fixed_ips or [] if ip.get("subnet_id"))
    return tuple(connection.network.get_subnet(subnet_id).cidr for subnet_id in subnet_ids)
