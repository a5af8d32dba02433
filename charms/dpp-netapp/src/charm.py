#!/usr/bin/env python3
"""DPP NetApp machine charm: Juju events only; the work is in netapp_workload (no ops there)."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Optional

import ops
from pydantic import ValidationError

import action_params as p
from charm_config import CharmConfig, describe_error
from netapp_workload import ApiError, NetApp, NetAppClient, WorkloadError

logger = logging.getLogger(__name__)

ActionHandler = Callable[[NetAppClient, dict[str, Any]], dict[str, Any]]


def _result(body: Any, **extra: Any) -> dict[str, Any]:
    """Action results: the API's answer as JSON under `result`, plus a few flat keys."""
    results = {key: str(value) for key, value in extra.items()}
    results["result"] = json.dumps(body, sort_keys=True)
    return results


def _add_intent(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    intent = p.json_object(params, "intent")
    return _result(client.add_intent(intent), **{"intent-id": intent["id"]})


def _remove_intent(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    intent_id = p.text(params, "intent-id")
    client.remove_intent(intent_id)
    return _result(None, **{"intent-id": intent_id})


def _list_intents(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    intents = client.list_intents()
    return _result(intents, count=len(intents))


def _create_slice(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    spec = p.json_object(params, "slice")
    if client.get_slice(str(spec["id"])) is not None:
        raise p.ParamError("slice", f"slice {spec['id']!r} exists already; use update-slice")
    return _result(client.put_slice(spec), **{"slice-id": spec["id"]})


def _update_slice(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    spec = p.json_object(params, "slice")
    if client.get_slice(str(spec["id"])) is None:
        raise p.ParamError("slice", f"no slice {spec['id']!r}; use create-slice")
    return _result(client.put_slice(spec), **{"slice-id": spec["id"]})


def _delete_slice(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    slice_id = p.text(params, "slice-id")
    client.delete_slice(slice_id)
    return _result(None, **{"slice-id": slice_id})


def _set_alternatives(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    groups = p.json_groups(params, "groups")
    return _result([client.put_alternative(group) for group in groups], count=len(groups))


def _get_stats(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    return _result(client.stats())


def _attach(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    interface, mode = p.text(params, "interface"), p.mode(params)
    return _result(client.attach(interface, mode), interface=interface, mode=mode)


def _detach(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    interface = p.text(params, "interface")
    client.detach(interface)
    return _result(None, interface=interface)


def _subscribe(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    uri = p.text(params, "callback-uri")
    if not uri.startswith(("http://", "https://")):
        raise p.ParamError("callback-uri", "must be an http:// or https:// URI")
    period = p.positive_int(params, "period")
    body = client.subscribe(uri, p.csv(params, "measurements"), period)
    sub_id = (body.get("subscriptionId") or body.get("id") or "") if isinstance(body, dict) else ""
    return _result(body, **{"subscription-id": sub_id})


def _unsubscribe(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    sub_id = p.text(params, "subscription-id")
    client.unsubscribe(sub_id)
    return _result(None, **{"subscription-id": sub_id})


def _reload(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    reloaded = client.reload_dataplane()
    return _result(reloaded, count=len(reloaded))


ACTIONS: dict[str, ActionHandler] = {
    "add-intent": _add_intent,
    "remove-intent": _remove_intent,
    "list-intents": _list_intents,
    "create-slice": _create_slice,
    "update-slice": _update_slice,
    "delete-slice": _delete_slice,
    "set-alternatives": _set_alternatives,
    "get-stats": _get_stats,
    "attach": _attach,
    "detach": _detach,
    "subscribe-telemetry": _subscribe,
    "unsubscribe-telemetry": _unsubscribe,
    "reload-dataplane": _reload,
}


class DppNetappCharm(ops.CharmBase):
    """Installs and configures the NetApp; day-2 actions call its REST API."""

    def __init__(self, framework: ops.Framework):
        super().__init__(framework)
        self.workload = NetApp()
        self._config_error: Optional[str] = None
        self._workload_error: Optional[str] = None
        framework.observe(self.on.install, self._on_install)
        framework.observe(self.on.upgrade_charm, self._on_install)
        framework.observe(self.on.config_changed, self._reconcile)
        framework.observe(self.on.start, self._reconcile)
        framework.observe(self.on.update_status, self._reconcile)
        framework.observe(self.on.stop, self._on_stop)
        framework.observe(self.on.remove, self._on_remove)
        framework.observe(self.on.collect_unit_status, self._on_collect_status)
        for name in ACTIONS:
            framework.observe(self.on[name].action, self._on_action)

    def _load(self) -> Optional[CharmConfig]:
        try:
            return self.load_config(CharmConfig)
        except ValidationError as exc:
            self._config_error = describe_error(exc)
            return None

    def _on_install(self, event: ops.EventBase) -> None:
        source = str(self.config.get("netapp-source") or "dpp-netapp")
        try:
            self.workload.install(source)
        except WorkloadError as exc:
            self._workload_error = f"install failed: {exc}"
            logger.error("%s", self._workload_error)
            return
        self._reconcile(event)

    def _reconcile(self, event: ops.EventBase) -> None:
        config = self._load()
        if config is None or not self.workload.is_installed():
            return
        try:
            if self.workload.configure(config) or not self.workload.is_running():
                self.workload.restart()
        except WorkloadError as exc:
            self._workload_error = str(exc)
            logger.error("configuring the NetApp failed: %s", exc)
            return
        if config.is_loopback:
            self.unit.set_ports()
        else:
            self.unit.set_ports(ops.Port("tcp", config.api_port))

    def _on_stop(self, event: ops.StopEvent) -> None:
        self.workload.stop()

    def _on_remove(self, event: ops.RemoveEvent) -> None:
        self.workload.remove()

    def _on_collect_status(self, event: ops.CollectStatusEvent) -> None:
        config = self._load()
        if config is None:
            event.add_status(ops.BlockedStatus(f"invalid config: {self._config_error}"))
        if self._workload_error:
            event.add_status(ops.BlockedStatus(self._workload_error))
        if not self.workload.is_installed():
            event.add_status(ops.MaintenanceStatus("NetApp not installed"))
        elif not self.workload.is_running():
            event.add_status(ops.WaitingStatus("NetApp service not running"))
        event.add_status(ops.ActiveStatus())

    def _on_action(self, event: ops.ActionEvent) -> None:
        name = event.handle.kind.removesuffix("_action").replace("_", "-")
        config = self._load()
        if config is None:
            event.fail(f"invalid config: {self._config_error}")
            return
        if not self.workload.is_running():
            event.fail("the NetApp service is not running")
            return
        try:
            client = self.workload.client(config)
            event.set_results(ACTIONS[name](client, dict(event.params)))
        except p.ParamError as exc:
            event.fail(str(exc))
        except ApiError as exc:
            event.fail(f"{name}: the NetApp refused: {exc}")


if __name__ == "__main__":  # pragma: nocover
    ops.main(DppNetappCharm)
