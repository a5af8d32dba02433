"""The private routes as a service: stored and written to the maps together, reconciled at start.

`Routing` checks what a route names against the node (its instance is one upf.routing sets to
private, its device exists), changes the store and the maps in one transaction (the maps refusing
rolls the store back), asks the kernel to resolve a new gateway and tells the neighbour watch what
to copy. Without a data plane the routes are only stored (and reach the maps when a service with one
starts: `reconcile`).
"""

from __future__ import annotations

import logging
import socket
from typing import Callable, Optional

from netapp.core.config import UpfSettings
from netapp.dataplane.binding import DataplaneError
from netapp.routing import store as stored
from netapp.routing.models import Route, RouteStatus
from netapp.routing.neighbours import NeighWatch, resolve
from netapp.routing.table import RoutingTable, TableOf
from netapp.service.contract import DataplaneUnavailable, InvalidInput, NotFound
from netapp.service.store import Store

log = logging.getLogger(__name__)


class Routing:
    """The private routes of the node's network instances (those upf.routing sets to private)."""

    def __init__(self, store: Store, upf: UpfSettings, table: Optional[RoutingTable] = None,
                 neighbours: Optional[NeighWatch] = None, ifindex: Callable[[str], int] = socket.if_nametoindex):
        self._store = store
        self._instances = upf.net_instances()
        self._private = upf.private_instances()
        self._table = table
        self._neighbours = neighbours
        self._ifindex = ifindex

    @classmethod
    def start(cls, store: Store, upf: UpfSettings, table_of: TableOf, bump: Callable[[], None]) -> "Routing":
        """Over a data plane's maps: the stored routes reconciled into them, the neighbour watch on."""
        table = RoutingTable(table_of, bump)
        routing = cls(store, upf, table, NeighWatch(table))
        routing.reconcile()
        routing._neighbours.start()  # type: ignore[union-attr]
        return routing

    def close(self) -> None:
        if self._neighbours is not None:
            self._neighbours.close()
            self._neighbours = None

    # --- the API's operations ------------------------------------------------------------------

    def list_routes(self) -> list[RouteStatus]:
        return [self._status(route) for route in stored.load_routes(self._store)]

    def add_route(self, route: Route) -> RouteStatus:
        """Create or replace the route of (instance, prefix)."""
        instance, ifindex = self._check(route)
        with self._store.transaction():
            old = stored.stored_route(self._store, route.instance, route.prefix)
            stored.save_route(self._store, route)
            if self._table is not None:
                try:
                    self._table.put_route(instance, route.network, route.next_hop, ifindex)
                except DataplaneError as exc:
                    raise DataplaneUnavailable(f"the data plane refused the route: {exc}") from exc
        if self._neighbours is not None:
            if old is not None:
                self._unwant(old)
            self._neighbours.want(instance, ifindex, route.next_hop, route.network)
            if route.next_hop is not None:
                resolve(route.next_hop, route.device)
        return self._status(route)

    def delete_route(self, instance: str, prefix: str) -> None:
        route = stored.stored_route(self._store, instance, prefix)
        if route is None:
            raise NotFound(f"no route of {prefix} in network instance {instance!r}", field="prefix")
        with self._store.transaction():
            stored.remove_route(self._store, instance, prefix)
            if self._table is not None and instance in self._instances:
                try:
                    self._table.delete_route(self._instances[instance], route.network)
                except DataplaneError as exc:
                    raise DataplaneUnavailable(f"the data plane refused to delete the route: {exc}") from exc
        self._unwant(route)

    # --- start ---------------------------------------------------------------------------------

    def reconcile(self) -> None:
        """The maps hold the stored routes of the private instances, and no other route. A stored
        route the node cannot serve now (its instance no longer private, its device gone) is kept
        in the store, logged."""
        assert self._table is not None
        desired = {}
        for route in stored.load_routes(self._store):
            try:
                instance, ifindex = self._check(route)
            except InvalidInput as exc:
                log.warning("route %s of %s is stored but not in the data path: %s", route.prefix, route.instance,
                            exc.detail)
                continue
            desired[(instance, route.network)] = (route, ifindex)
        for key in set(self._table.route_keys()) - desired.keys():
            self._table.delete_route(*key)
        for (instance, network), (route, ifindex) in desired.items():
            self._table.put_route(instance, network, route.next_hop, ifindex)
            if self._neighbours is not None:
                self._neighbours.want(instance, ifindex, route.next_hop, network)
            if route.next_hop is not None:
                resolve(route.next_hop, route.device)

    # --- helpers -------------------------------------------------------------------------------

    def _check(self, route: Route) -> tuple[int, int]:
        """The route's instance id and egress ifindex; InvalidInput naming the field at fault."""
        if route.instance not in self._instances:
            known = ", ".join(sorted(self._instances)) or "none (upf.n6_interfaces names none)"
            raise InvalidInput(f"network instance {route.instance!r}: no such instance (known: {known})",
                               field="instance", allowed=known)
        if route.instance not in self._private:
            private = ", ".join(sorted(self._private)) or "none"
            raise InvalidInput(
                f"network instance {route.instance!r} is routed by the host's FIB: set upf.routing."
                f"{route.instance} to private for a table of its own (private now: {private})",
                field="instance", allowed=private,
            )
        try:
            ifindex = self._ifindex(route.device)
        except OSError:
            raise InvalidInput(f"device {route.device!r}: no such interface on this node", field="device") from None
        return self._private[route.instance], ifindex

    def _unwant(self, route: Route) -> None:
        if self._neighbours is None or route.instance not in self._private:
            return
        try:
            ifindex = self._ifindex(route.device)
        except OSError:
            return
        self._neighbours.unwant(self._private[route.instance], ifindex, route.next_hop, route.network)

    def _status(self, route: Route) -> RouteStatus:
        resolved = None
        if self._neighbours is not None and route.next_hop is not None and route.instance in self._private:
            resolved = (self._private[route.instance], route.next_hop) in self._neighbours.written()
        return RouteStatus(**route.model_dump(), resolved=resolved)
