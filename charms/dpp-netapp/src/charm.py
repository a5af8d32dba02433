#!/usr/bin/env python3
"""DPP NetApp machine charm: Juju events only; the work is in netapp_workload (no ops there)."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Callable, Collection, Optional, cast

import ops
from pydantic import ValidationError

import action_params as p
import alternatives as alt
from charm_config import MAX_CAPACITY_PPS, MAX_CPUS, MAX_QUEUE_SIZE, CharmConfig, describe_error
from netapp_workload import SHIPPED_APPD, WHEELS_DIR, ApiError, InterfaceAddress, NetApp, NetAppClient, WorkloadError

logger = logging.getLogger(__name__)

# Both ends of the `dpp-alternatives` interface: OSM relates one VM's `alternatives` to another's
# `alternatives-peer`, so a unit finds its peers on either endpoint.
ALT_ENDPOINTS = ("alternatives", "alternatives-peer")

# The binding whose address the metrics listener takes when metrics-host is empty: juju-info
# always exists and lives in the unit's default space, its management network.
MANAGEMENT_BINDING = "juju-info"

# Actions that change nothing: they run on the settings the NetApp took last while the current
# config is invalid (the service runs on those); the others wait for a valid config.
READ_ONLY_ACTIONS = frozenset({"list-intents", "get-stats"})

# How long a hook waits for a (re)started service's API before sending it steer-cpus; past that,
# the next event tries again.
API_WAIT_S = 30.0

# Config options of type secret -> the key of the secret's content that holds the value.
SECRET_KEYS = {"tls-key": "key", "influxdb-token": "token", "openstack-credentials": "clouds-yaml"}

# Actions that run a command on the machine rather than call the NetApp's API.
MACHINE_ACTIONS = frozenset({"check-openstack"})
# `netapp openstack check`'s exit codes with a report on stdout: met, unmet.
OPENSTACK_REPORTED = (0, 1)

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
    intent_id = p.identifier(params, "intent-id", p.MAX_INTENT_ID)
    client.remove_intent(intent_id)
    return _result(None, **{"intent-id": intent_id})


def _list_intents(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    intents = client.list_intents()
    return _result(intents, count=len(intents))


def _slice_spec(params: dict[str, Any]) -> dict[str, Any]:
    spec = p.json_object(params, "slice")
    p.check_id("slice", spec["id"], p.MAX_SLICE_ID)
    return spec


def _create_slice(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    """One PUT, no look first: the API says whether it created the slice (201) or replaced it (200)."""
    spec = _slice_spec(params)
    record, created = client.put_slice(spec)
    return _result(record, **{"slice-id": spec["id"], "outcome": "created" if created else "replaced"})


def _update_slice(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    spec = _slice_spec(params)
    if client.get_slice(str(spec["id"])) is None:
        raise p.ParamError("slice", f"no slice {spec['id']!r}; use create-slice")
    record, _ = client.put_slice(spec)
    return _result(record, **{"slice-id": spec["id"]})


def _delete_slice(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    slice_id = p.identifier(params, "slice-id", p.MAX_SLICE_ID)
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


def _set_cpu(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    spec = {
        "cpu": p.integer(params, "cpu", 0, MAX_CPUS - 1),
        "capacity_pps": p.integer(params, "capacity-pps", 0, MAX_CAPACITY_PPS, default=0),
        "queue_size": p.integer(params, "queue-size", 0, MAX_QUEUE_SIZE, default=0),
        "overloaded": p.boolean(params, "overloaded", default=False),
    }
    return _result(client.put_cpu(spec), cpu=spec["cpu"])


def _remove_cpu(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    cpu = p.integer(params, "cpu", 0, MAX_CPUS - 1)
    client.delete_cpu(cpu)
    return _result(None, cpu=cpu)


def apply_appd_params(
    params: dict[str, Any], option: str, charm_dir: Path, values: dict[str, str]
) -> dict[str, Any]:
    """apply-appd's parameters as its handler takes them: `appd` the first AppD given of the
    action's own, the appd option's and the one the charm carries (SHIPPED_APPD), `appd-source`
    which it is (None when none), and `values`, those of its placeholders the charm knows."""
    shipped = charm_dir / SHIPPED_APPD
    sources = (
        ("action", params.get("appd")),
        ("option", option),
        ("charm", shipped.read_text() if shipped.is_file() else None),
    )
    source, appd = next(((name, appd) for name, appd in sources if appd), (None, None))
    return {**params, "appd": appd, "appd-source": source, "values": values}


def _apply_appd(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    if params.get("appd-source") is None:
        raise p.ParamError(
            "appd",
            f"required: none given, the appd option is empty and the charm carries no {SHIPPED_APPD} "
            "(`make package` puts the VNF package's AppD there)",
        )
    appd = p.json_object(params, "appd", key="appName")
    instance = str(params.get("app-instance-id") or appd["appName"])
    applied = client.apply_appd(appd, instance, params["values"])
    return _result(
        applied,
        changed=str(applied["changed"]).lower(),
        **{"app-instance-id": applied["appInstanceId"], "appd-source": params["appd-source"]},
    )


def _reload(client: NetAppClient, params: dict[str, Any]) -> dict[str, Any]:
    reloaded = client.reload_dataplane()
    return _result(
        reloaded,
        count=len(reloaded["interfaces"]),
        **{"program-id": reloaded["program_id"], "previous-program-id": reloaded["previous_program_id"]},
    )


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
    "set-cpu": _set_cpu,
    "remove-cpu": _remove_cpu,
    "reload-dataplane": _reload,
    "apply-appd": _apply_appd,
}


class DppNetappCharm(ops.CharmBase):
    """Installs and configures the NetApp; day-2 actions call its REST API; peers become alternatives."""

    # alt_group: the alternative group last applied to the NetApp (JSON, "" for none): a change is
    # sent once, and one the NetApp could not take yet is sent again on the next event.
    # installed_source: what the NetApp was installed from (CharmConfig.install_source); a new one
    # reinstalls.
    # applied_api: where the running NetApp's API listens (JSON of the last config it took), so
    # read-only actions keep working while a new config is invalid.
    # steer_cpus: the steer-cpus entries the NetApp took ({"cpu": capacity_pps}, JSON): only new
    # or changed entries are sent, so that set-cpu's changes to the others stay, and only these
    # CPUs are removed when dropped from the option (those set-cpu added stay).
    # appd_applied: a digest of the `appd` option and the values its placeholders took when the
    # NetApp took it (applied again only when either changes; "" for none).
    # workload_error, alt_error, steer_error, appd_error: why the unit is blocked, kept until the step that
    # failed succeeds, so that the status does not flip back to active on an event that does not
    # retry that step.
    _stored = ops.StoredState()

    def __init__(self, framework: ops.Framework):
        super().__init__(framework)
        self.workload = NetApp()
        self._stored.set_default(
            alt_group="", installed_source="", applied_api="", workload_error="", alt_error="", steer_cpus="{}", steer_error="",
            appd_applied="", appd_error="",
        )
        self._config_error: Optional[str] = None
        self._config: Optional[CharmConfig] = None
        self._loaded = False
        framework.observe(self.on.install, self._on_install)
        framework.observe(self.on.upgrade_charm, self._on_install)
        framework.observe(self.on.config_changed, self._reconcile)
        framework.observe(self.on.start, self._reconcile)
        framework.observe(self.on.update_status, self._reconcile)
        framework.observe(self.on.secret_changed, self._reconcile)  # a secret option's new revision
        framework.observe(self.on.stop, self._on_stop)
        framework.observe(self.on.remove, self._on_remove)
        framework.observe(self.on.collect_unit_status, self._on_collect_status)
        for endpoint in ALT_ENDPOINTS:
            relation = self.on[endpoint]
            for event in (relation.relation_joined, relation.relation_changed):
                framework.observe(event, self._on_alternatives_changed)
            framework.observe(relation.relation_departed, self._on_alternative_departed)
            framework.observe(relation.relation_broken, self._on_alternatives_broken)
        for name in ACTIONS:
            framework.observe(self.on[name].action, self._on_action)
        framework.observe(self.on.check_openstack_action, self._on_check_openstack)

    def _load(self) -> Optional[CharmConfig]:
        """The config, read once per hook (its secrets with it); None when invalid (see
        _config_error)."""
        if not self._loaded:
            self._config, self._loaded = self._read_config(), True
        return self._config

    def _read_config(self) -> Optional[CharmConfig]:
        """The config, metrics-host filled in from the Juju network model when left empty."""
        try:
            config = self._with_secrets(self.load_config(CharmConfig))
        except ValidationError as exc:
            self._config_error = describe_error(exc)
            return None
        except _SecretUnusable as exc:
            self._config_error = str(exc)
            return None
        if not config.metrics_enabled or config.metrics_host:
            return config
        address = self._management_address()
        if address is None:
            return config
        return config.model_copy(update={"metrics_host": address})

    def _with_secrets(self, config: CharmConfig) -> CharmConfig:
        """The config with each secret option's value read from its secret (the latest revision,
        which the unit then tracks: a newer one brings secret-changed)."""
        values = {}
        for option, key in SECRET_KEYS.items():
            field = option.replace("-", "_")
            secret = getattr(config, field)
            if secret is not None:
                values[field] = self._secret_value(option, secret, key)
        return config.model_copy(update=values)

    def _secret_value(self, option: str, secret: ops.Secret, key: str) -> str:
        grant = f"juju grant-secret <name> {self.app.name}"
        try:
            content = secret.get_content(refresh=True)
        except ops.SecretNotFoundError:
            raise _SecretUnusable(f"{option}: no secret {secret.id} visible here; create it and {grant}") from None
        except ops.ModelError as exc:
            reason = (str(exc).strip().splitlines() or ["refused"])[0].removeprefix("ERROR ")
            raise _SecretUnusable(f"{option}: cannot read secret {secret.id} ({reason}); {grant}") from None
        if not content.get(key):
            held = ", ".join(sorted(content)) or "nothing"
            raise _SecretUnusable(f"{option}: secret {secret.id} has no {key!r} key (it holds {held})")
        return content[key]

    def _management_address(self) -> Optional[str]:
        """The unit's address on its management network (Juju's bind address), None if unknown."""
        try:
            binding = self.model.get_binding(MANAGEMENT_BINDING)
        except ops.ModelError as exc:
            logger.warning("cannot read the %s binding: %s", MANAGEMENT_BINDING, exc)
            return None
        address = None if binding is None else binding.network.bind_address
        return None if address is None else str(address)

    def _on_install(self, event: ops.EventBase) -> None:
        config = self._load()
        if config is None:  # where to install from is part of the config: wait for a valid one
            logger.error("install waits for a valid config: %s", self._config_error)
            event.defer()
            return
        self._install(config)
        self._reconcile(event)

    def _install(self, config: CharmConfig) -> None:
        """Install from the configured source and record it. A failure fails the hook, so Juju shows
        the unit in error and runs the hook again (automatic retries, or `juju resolve`) rather than
        carrying on without a NetApp."""
        where = "the charm's wheels" if config.netapp_source == "charm" else "the package index"
        self.unit.status = ops.MaintenanceStatus(f"installing the NetApp from {where}")
        try:
            self.workload.install(
                config.netapp_source, self.charm_dir / WHEELS_DIR, config.netapp_index_requirements
            )
        except WorkloadError as exc:
            logger.error("install failed: %s", exc)
            raise
        self._stored.installed_source = config.install_source
        try:
            self.unit.set_workload_version(self.workload.version())
        except WorkloadError as exc:
            logger.warning("cannot read the NetApp's version: %s", exc)

    def _reinstall_if_source_changed(self, config: CharmConfig) -> bool:
        """Install again when netapp-source (or the index requirements) changed since the install;
        True when it did."""
        installed = self._stored.installed_source
        if not installed or installed == config.install_source:
            return False
        logger.info("the NetApp's source changed (netapp-source %s): reinstalling", config.netapp_source)
        self._install(config)
        return True

    def _reconcile(self, event: ops.EventBase) -> None:
        config = self._load()
        if config is None or not self.workload.is_installed():
            return
        reinstalled = self._reinstall_if_source_changed(config)
        try:
            if self.workload.configure(config) or reinstalled or not self.workload.is_running():
                self.workload.restart()
        except WorkloadError as exc:
            self._stored.workload_error = str(exc)
            logger.error("configuring the NetApp failed: %s", exc)
            return
        self._stored.workload_error = ""
        self._stored.applied_api = json.dumps(
            {"api_host": config.api_host, "api_port": config.api_port, "tls_cert": config.tls_cert}
        )
        self.unit.set_ports(*_open_ports(config))
        self._apply_steer_cpus(config)
        self._apply_appd(config)
        self._sync_alternatives(config)

    # --- steer-cpus: the steering set on day 1 -------------------------------------------------

    def _apply_steer_cpus(self, config: CharmConfig) -> None:
        """Remove each CPU the option put and no longer lists, then PUT each steer-cpus entry the
        NetApp has not taken yet; retried on the next event when the API does not answer."""
        applied = {int(cpu): capacity for cpu, capacity in json.loads(self._stored.steer_cpus).items()}
        dropped = set(applied) - set(config.steer_cpus)
        pending = {cpu: capacity for cpu, capacity in config.steer_cpus.items() if applied.get(cpu) != capacity}
        if not pending and not dropped:
            self._stored.steer_error = ""
            return
        kept = dict(applied)
        try:
            put_steer_cpus(self.workload.client(config), pending, kept, dropped)
        except ApiError as exc:
            if exc.status is None:
                logger.warning("steer-cpus: %s; trying again on the next event", exc)
            else:
                not_removed = dropped & set(kept)  # put_steer_cpus removes these first
                if not_removed:
                    refused = f"refused to remove CPU {min(not_removed)}"
                else:
                    refused = f"refused CPU {min(cpu for cpu in pending if kept.get(cpu) != pending[cpu])}"
                self._stored.steer_error = f"steer-cpus: the NetApp {refused}: {exc}"
                logger.error("%s", self._stored.steer_error)
            return
        finally:
            self._stored.steer_cpus = json.dumps(kept)
        self._stored.steer_error = ""

    # --- appd: the MEC 010-2 AppD applied on day 1 ------------------------------------------------

    def _appd_values(self, config: CharmConfig) -> dict[str, str]:
        """The values of the AppD placeholders the charm knows: the unit's management address (when
        Juju gives one) and the API's port."""
        values = {"api-port": str(config.api_port)}
        address = self._management_address()
        if address is not None:
            values["mgmt-address"] = address
        return values

    def _apply_appd(self, config: CharmConfig) -> None:
        """Apply the `appd` option once the API answers, when it or its values changed since the
        NetApp took it; a refusal blocks the unit until it takes one, an API that does not answer is
        tried again on the next event."""
        if not config.appd:
            self._stored.appd_applied = self._stored.appd_error = ""
            return
        values = self._appd_values(config)
        wanted = hashlib.sha256(json.dumps([config.appd, values], sort_keys=True).encode()).hexdigest()
        if self._stored.appd_applied == wanted:
            return
        appd = json.loads(config.appd)
        try:
            client = self.workload.client(config)
            client.wait_answering(API_WAIT_S)
            client.apply_appd(appd, appd["appName"], values)
        except ApiError as exc:
            self._stored.appd_error = _refusal("appd", "it", exc) or self._stored.appd_error
            return
        self._stored.appd_applied, self._stored.appd_error = wanted, ""

    # --- alternatives: every peer on the alternative-node network is a member of one group ---------

    def _on_alternatives_changed(self, event: ops.RelationEvent) -> None:
        config = self._load()
        if config is not None:
            self._sync_alternatives(config)

    def _on_alternative_departed(self, event: ops.RelationDepartedEvent) -> None:
        config = self._load()
        if config is not None:
            self._sync_alternatives(config, departing=event.departing_unit)

    def _on_alternatives_broken(self, event: ops.RelationBrokenEvent) -> None:
        config = self._load()
        if config is not None:
            self._sync_alternatives(config, broken=event.relation)

    def _sync_alternatives(
        self, config: CharmConfig, departing: Optional[ops.Unit] = None, broken: Optional[ops.Relation] = None
    ) -> None:
        """Publish our address to the peers and make the NetApp's group their current list."""
        self._stored.alt_error = ""
        relations = self._alt_relations(broken)
        own = self._own_alt_address(config)
        self._publish(relations, own)
        group = None if own is None else self._peer_group(config, own, relations, departing)
        self._apply_group(config, group)

    def _alt_relations(self, broken: Optional[ops.Relation]) -> list[ops.Relation]:
        relations = [rel for endpoint in ALT_ENDPOINTS for rel in self.model.relations[endpoint]]
        return [rel for rel in relations if broken is None or rel.id != broken.id]

    def _own_alt_address(self, config: CharmConfig) -> Optional[InterfaceAddress]:
        """Our alt-interface's address; None when not taking part or it cannot be read."""
        if not config.alt_interface:
            return None
        try:
            own = self.workload.interface_address(config.alt_interface)
        except WorkloadError as exc:
            self._stored.alt_error = f"alt-interface: {exc}"
            logger.error("%s", self._stored.alt_error)
            return None
        if own.ip4 is None and own.ip6 is None:
            self._stored.alt_error = f"alt-interface: {config.alt_interface} has no global IPv4 or IPv6 address"
            logger.error("%s", self._stored.alt_error)
            return None
        return own

    def _publish(self, relations: list[ops.Relation], own: Optional[InterfaceAddress]) -> None:
        """Our unit's databag on every alternatives relation; emptied when peers must not use us."""
        data = alt.databag(own)
        for relation in relations:
            relation.data[self.unit].update(data)

    def _peer_group(
        self,
        config: CharmConfig,
        own: InterfaceAddress,
        relations: list[ops.Relation],
        departing: Optional[ops.Unit],
    ) -> Optional[dict[str, Any]]:
        seen = [
            (unit.name, relation.data[unit])
            for relation in relations
            for unit in relation.units
            if departing is None or unit.name != departing.name
        ]
        peers, rejected = alt.parse_peers(seen)
        for unit, reason in sorted(rejected.items()):
            logger.warning("alternatives: skipping %s, its relation data is unusable: %s", unit, reason)
        group, left_out = alt.build_group(config.alt_group, config.alt_interface, own.mac, peers)
        if left_out:
            logger.warning(
                "alternatives: a group holds %d members; left out %s", alt.MAX_ALT_MEMBERS, ", ".join(left_out)
            )
        return group

    def _apply_group(self, config: CharmConfig, group: Optional[dict[str, Any]]) -> None:
        """Send the group (or its removal) unless the NetApp has it already; retried on the next event."""
        wanted = json.dumps(group, sort_keys=True) if group else ""
        applied = self._stored.alt_group
        if wanted == applied:
            return
        if not self.workload.is_running():
            logger.info("alternatives: the NetApp is not running; the group follows on a later event")
            return
        try:
            _replace_group(self.workload.client(config), json.loads(applied) if applied else None, group)
        except ApiError as exc:
            self._stored.alt_error = _refusal("alternatives", "the group", exc) or self._stored.alt_error
            return
        self._stored.alt_group = wanted

    def _alternatives_summary(self) -> str:
        applied = self._stored.alt_group
        if not applied:
            return "no alternative nodes"
        group = json.loads(applied)
        count = len(group["members"])
        return f"{count} alternative node{'s' if count != 1 else ''} (group {group['id']})"

    # --- stop and remove -----------------------------------------------------------------------

    def _on_stop(self, event: ops.StopEvent) -> None:
        self.workload.stop()

    def _on_remove(self, event: ops.RemoveEvent) -> None:
        """Detach and unload the data plane, then remove what install made. A failure fails the
        hook, so Juju runs it again rather than leave XDP programs on the interfaces."""
        self.unit.status = ops.MaintenanceStatus("removing the NetApp")
        try:
            self.workload.remove()
        except WorkloadError as exc:
            logger.error("remove failed: %s", exc)
            raise

    def _on_collect_status(self, event: ops.CollectStatusEvent) -> None:
        config = self._load()
        if config is None:
            event.add_status(ops.BlockedStatus(f"invalid config: {self._config_error}"))
        if self._stored.workload_error:
            event.add_status(ops.BlockedStatus(self._stored.workload_error))
        if not self.workload.is_installed():
            event.add_status(ops.MaintenanceStatus("NetApp not installed"))
        elif not self.workload.is_running():
            event.add_status(ops.WaitingStatus("NetApp service not running"))
        if self._stored.alt_error:
            event.add_status(ops.BlockedStatus(self._stored.alt_error))
        if self._stored.steer_error:
            event.add_status(ops.BlockedStatus(self._stored.steer_error))
        if self._stored.appd_error:
            event.add_status(ops.BlockedStatus(self._stored.appd_error))
        if config is not None and config.metrics_enabled and not config.metrics_host:
            event.add_status(
                ops.BlockedStatus("metrics-host: Juju gives no management address; set it, or metrics-port 0 for off")
            )
        takes_part = config is not None and bool(config.alt_interface)
        event.add_status(ops.ActiveStatus(self._alternatives_summary() if takes_part else ""))

    def _on_action(self, event: ops.ActionEvent) -> None:
        name = event.handle.kind.removesuffix("_action").replace("_", "-")
        config = self._load()
        if config is None and name in READ_ONLY_ACTIONS:
            config = self._applied_config()
        if config is None:
            event.fail(f"invalid config: {self._config_error}")
            return
        client = _ClientOnFirstUse(lambda: self._running_client(config))
        params = dict(event.params)
        if name == "apply-appd":  # the AppD defaults to the option's, then the charm's own
            params = apply_appd_params(params, config.appd, self.charm_dir, self._appd_values(config))
        try:
            event.set_results(ACTIONS[name](cast(NetAppClient, client), params))
        except p.ParamError as exc:
            event.fail(str(exc))
        except _NotRunning:
            event.fail("the NetApp service is not running")
        except ApiError as exc:
            event.fail(f"{name}: the NetApp refused: {exc}")

    def _on_check_openstack(self, event: ops.ActionEvent) -> None:
        """`netapp openstack check` on this unit's VM with the configured cloud and credentials;
        the report in `result`, and a failure listing the unmet preconditions when there are any."""
        config = self._load()
        if config is None:
            event.fail(f"invalid config: {self._config_error}")
            return
        try:
            cloud, clouds_yaml, server, networks = self._openstack_check_params(config, dict(event.params))
            done = self.workload.check_openstack(clouds_yaml, cloud, server, networks)
        except p.ParamError as exc:
            event.fail(str(exc))
            return
        except WorkloadError as exc:
            event.fail(f"check-openstack: {exc}")
            return
        try:
            report = json.loads(done.stdout) if done.returncode in OPENSTACK_REPORTED else None
        except json.JSONDecodeError:
            report = None
        if not isinstance(report, dict):
            said = (done.stderr or done.stdout or "").strip().splitlines() or [f"exit code {done.returncode}"]
            event.fail(f"check-openstack: {said[-1]}")
            return
        unmet = [item for item in report.get("findings", []) if item.get("status") == "UNMET"]
        event.set_results(_result(report, server=report.get("server") or server, met=str(not unmet).lower(), unmet=len(unmet)))
        if unmet:
            listed = "; ".join(f"{item['check']} {item['subject']}: {item['fix']}" for item in unmet)
            event.fail(f"{len(unmet)} unmet: {listed}")

    def _openstack_check_params(self, config: CharmConfig, params: dict[str, Any]) -> tuple[str, str, str, list[str]]:
        """The cloud, clouds.yaml text, server and data networks; a ParamError naming the option
        or parameter at fault."""
        if not config.openstack_cloud:
            raise p.ParamError("openstack-cloud", "not set: the name of the cloud in openstack-credentials' clouds.yaml")
        if not config.openstack_credentials:
            raise p.ParamError(
                "openstack-credentials",
                f"not set: a Juju secret with the key clouds-yaml (juju add-secret <name> clouds-yaml#file=clouds.yaml; "
                f"juju grant-secret <name> {self.app.name})",
            )
        networks = p.csv(params, "data-networks")
        if not networks:
            raise p.ParamError("data-networks", "required: the networks whose ports carry the data plane")
        server = str(params.get("server") or "").strip() or self.workload.instance_id()
        if not server:
            raise p.ParamError("server", "required: this machine's instance id is unknown (no SMBIOS UUID)")
        return config.openstack_cloud, config.openstack_credentials, server, networks

    def _applied_config(self) -> Optional[CharmConfig]:
        """The API settings the running NetApp took last (the rest defaulted); None before any."""
        applied = self._stored.applied_api
        return CharmConfig.model_construct(**json.loads(applied)) if applied else None

    def _running_client(self, config: CharmConfig) -> NetAppClient:
        if not self.workload.is_running():
            raise _NotRunning()
        return self.workload.client(config)


class _SecretUnusable(Exception):
    """A secret option names a secret the unit cannot read, or one without the expected key."""


class _NotRunning(Exception):
    """An action needed the NetApp's API while its service was down."""


class _ClientOnFirstUse:
    """The API client, made when a handler first calls the NetApp. Handlers read their parameters
    before that, so bad input is reported as such even while the service is down."""

    def __init__(self, make: Callable[[], NetAppClient]):
        self._make = make
        self._client: Optional[NetAppClient] = None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            self._client = self._make()
        return getattr(self._client, name)


def _refusal(step: str, what: str, exc: ApiError) -> str:
    """Why a step the NetApp refused blocks the unit; "" when the API did not answer (the step is
    tried again on the next event)."""
    if exc.status is None:
        logger.warning("%s: %s; trying again on the next event", step, exc)
        return ""
    refused = f"{step}: the NetApp refused {what}: {exc}"
    logger.error("%s", refused)
    return refused


def _replace_group(client: NetAppClient, applied: Optional[dict[str, Any]], group: Optional[dict[str, Any]]) -> None:
    """Put `group`; drop the applied one when it goes away or moves to another id (gone already: fine)."""
    if applied is not None and (group is None or applied["id"] != group["id"]):
        client.delete_alternative(applied["id"], missing_ok=True)
    if group is not None:
        client.put_alternative(group)


def put_steer_cpus(
    client: NetAppClient, pending: dict[int, int], kept: dict[int, int], dropped: Collection[int] = ()
) -> None:
    """Once the API answers, DELETE each dropped CPU (one not in the set already: fine) and drop it
    from `kept`, then PUT each pending steer-cpus entry (CPU -> capacity_pps), adding it to `kept`
    when the NetApp has taken it; both in CPU order, the first ApiError stops the run."""
    client.wait_answering(API_WAIT_S)
    for cpu in sorted(dropped):
        client.delete_cpu(cpu, missing_ok=True)
        kept.pop(cpu, None)
    for cpu, capacity in sorted(pending.items()):
        client.put_cpu({"cpu": cpu, "capacity_pps": capacity})
        kept[cpu] = capacity


def _open_ports(config: CharmConfig) -> list[ops.Port]:
    """The API's and the metrics listener's ports, each when it listens beyond loopback."""
    ports = []
    if not config.is_loopback:
        ports.append(ops.Port("tcp", config.api_port))
    if config.metrics_enabled and not config.metrics_is_loopback:
        ports.append(ops.Port("tcp", config.metrics_port))
    return ports


if __name__ == "__main__":  # pragma: nocover
    ops.main(DppNetappCharm)
