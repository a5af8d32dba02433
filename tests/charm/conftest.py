"""Fixtures of the charm tests: the charm's src/ on sys.path, its charmcraft.yaml, an ops.testing
Context whose workload is a fake (no apt, no systemctl on this machine)."""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

CHARM_DIR = Path(__file__).resolve().parents[2] / "charms" / "dpp-netapp"
sys.path.insert(0, str(CHARM_DIR / "src"))

from netapp_workload import ApiError, InterfaceAddress, WorkloadError

CHARMCRAFT = yaml.safe_load((CHARM_DIR / "charmcraft.yaml").read_text())


class FakeClient:
    """Records the API calls; answers like the NetApp would, or raises `fail_with`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.slices: dict[str, dict[str, Any]] = {}
        self.alternatives: dict[int, dict[str, Any]] = {}
        self.fail_with: ApiError | None = None
        self.absent_cpus: set[int] = set()  # CPUs not in the steering set: a DELETE of one is a 404

    def _call(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))
        if self.fail_with is not None:
            raise self.fail_with

    def add_intent(self, intent):
        self._call("add_intent", intent)
        return {"intent": intent, "tenant": "operator"}

    def remove_intent(self, intent_id):
        self._call("remove_intent", intent_id)

    def list_intents(self):
        self._call("list_intents")
        return [{"intent": {"id": "a"}}, {"intent": {"id": "b"}}]

    def get_slice(self, slice_id):
        self._call("get_slice", slice_id)
        return self.slices.get(slice_id)

    def put_slice(self, spec):
        self._call("put_slice", spec)
        created = spec["id"] not in self.slices
        self.slices[spec["id"]] = spec
        return spec, created

    def delete_slice(self, slice_id):
        self._call("delete_slice", slice_id)

    def put_alternative(self, group):
        self._call("put_alternative", group)
        self.alternatives[group["id"]] = group
        return group

    def delete_alternative(self, group_id, missing_ok=False):
        self._call("delete_alternative", group_id)
        if group_id not in self.alternatives and not missing_ok:
            raise ApiError(404, f"no alternative group {group_id}")
        self.alternatives.pop(group_id, None)

    def stats(self):
        self._call("stats")
        return {"intents": {}}

    def attach(self, interface, mode):
        self._call("attach", interface, mode)
        return {"interface": interface, "mode": mode}

    def detach(self, interface):
        self._call("detach", interface)

    def subscribe(self, uri, measurements, period):
        self._call("subscribe", uri, measurements, period)
        return {"subscriptionId": "sub-1", "callbackReference": uri}

    def unsubscribe(self, sub_id):
        self._call("unsubscribe", sub_id)

    def put_cpu(self, spec):
        self._call("put_cpu", spec)
        return {"queue_size": 0, "overloaded": False, **spec}

    def delete_cpu(self, cpu, missing_ok=False):
        self._call("delete_cpu", cpu)
        if cpu in self.absent_cpus and not missing_ok:
            raise ApiError(404, f"CPU {cpu} is not in the CPU set")
        self.absent_cpus.add(cpu)

    def apply_appd(self, appd, app_instance_id, values):
        self._call("apply_appd", appd, app_instance_id, values)
        return {"appInstanceId": app_instance_id, "tenant": "operator", "appDId": appd.get("appDId"), "changed": True}

    def wait_answering(self, timeout):
        """Like /healthz: only an unreachable NetApp fails it, not a refusal of other calls."""
        self.calls.append(("wait_answering", ()))
        if self.fail_with is not None and self.fail_with.status is None:
            raise self.fail_with

    def reload_dataplane(self):
        self._call("reload_dataplane")
        return {"previous_program_id": 7, "program_id": 8, "interfaces": ["ens4"], "duration_ms": 90.0}


class FakeNetApp:
    """Stands in for netapp_workload.NetApp: state the tests set, steps the tests read."""

    def __init__(self) -> None:
        self.installed = True
        self.installed_version = "0.1.0"
        self.running = True
        self.steps: list[str] = []
        self.configs: list[Any] = []
        self.changed = False
        self.install_error: Exception | None = None
        self.configure_error: Exception | None = None
        self.remove_error: Exception | None = None
        self.api = FakeClient()
        self.addresses: dict[str, InterfaceAddress] = {}
        self.installs: list[tuple[str, Path, str]] = []
        self.own_instance: str | None = None
        self.openstack_checks: list[tuple[str, str, str, list[str]]] = []
        self.openstack_answer = subprocess.CompletedProcess([], 0, "{}", "")

    def install(self, source: str, wheels: Path, index_requirements: str = "") -> None:
        self.steps.append(f"install {source}")
        self.installs.append((source, wheels, index_requirements))
        if self.install_error:
            raise self.install_error
        self.installed = True

    def version(self) -> str:
        return self.installed_version

    def is_installed(self) -> bool:
        return self.installed

    def configure(self, config) -> bool:
        self.steps.append("configure")
        if self.configure_error:
            raise self.configure_error
        self.configs.append(config)
        return self.changed

    def restart(self) -> None:
        self.steps.append("restart")
        self.running = True

    def stop(self) -> None:
        self.steps.append("stop")
        self.running = False

    def remove(self) -> None:
        self.steps.append("remove")
        if self.remove_error:
            raise self.remove_error
        self.running = False
        self.installed = False

    def is_running(self) -> bool:
        return self.running

    def interface_address(self, name: str) -> InterfaceAddress:
        if name not in self.addresses:
            raise WorkloadError(f"no interface {name!r} on this machine")
        return self.addresses[name]

    def client(self, config):
        return self.api

    def instance_id(self):
        return self.own_instance

    def check_openstack(self, clouds_yaml, cloud, server, data_networks):
        self.steps.append("check-openstack")
        self.openstack_checks.append((clouds_yaml, cloud, server, data_networks))
        return self.openstack_answer


@pytest.fixture
def netapp(monkeypatch: pytest.MonkeyPatch) -> FakeNetApp:
    import charm

    fake = FakeNetApp()
    monkeypatch.setattr(charm, "NetApp", lambda: fake)
    return fake


@functools.cache
def private_charm_root() -> Path:
    """A copy of the charm's tree, one per test process, for ops.testing to run the charm in. Its
    Context writes metadata.yaml, config.yaml and actions.yaml into the charm root for each event
    and removes them afterwards: in the source tree, tests in another worker that run the charm,
    pack it or check it against the VNFD would meet them half made or see them vanish."""
    root = Path(tempfile.mkdtemp(prefix="dpp-charm-")) / CHARM_DIR.name
    shutil.copytree(CHARM_DIR, root)
    atexit.register(shutil.rmtree, root.parent, True)
    return root


def charm_context():
    """An ops.testing Context of the charm as charmcraft.yaml declares it."""
    import charm
    from ops import testing

    keys = ("name", "summary", "description", "provides", "requires")
    meta = {key: CHARMCRAFT[key] for key in keys if key in CHARMCRAFT}
    return testing.Context(
        charm.DppNetappCharm,
        meta=meta,
        config=CHARMCRAFT["config"],
        actions=CHARMCRAFT["actions"],
        charm_root=private_charm_root(),
    )


@pytest.fixture
def ctx(netapp: FakeNetApp):
    return charm_context()
