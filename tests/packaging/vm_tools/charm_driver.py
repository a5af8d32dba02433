"""Runs the packed charm's own code, as its hooks and actions would, against a root directory:
``charm_driver.py ROOT REQUEST_JSON``, from the charm's folder with ``PYTHONPATH=src:lib:venv``
(what dispatch gives the charm) and the base interpreter with ``-S``, so everything imports from
the charm and nothing from a source tree. Prints one JSON answer; exit 1 with {"error": ...}.

Requests ({"command": ...}):

* ``install``: NetApp.install from the charm's wheels (the install hook's path); answers the
  installed NetApp's version (what the charm sets as workload version);
* ``configure`` with ``config`` (Juju option names): CharmConfig, then what the charm's reconcile
  does: write the settings and unit, restart when anything changed or the service is not running,
  then send steer-cpus once the API answers (charm.put_steer_cpus; the charm sends only entries its
  stored state lacks, the driver keeps none and sends them all: PUT is idempotent); answers the
  CPUs sent;
* ``ready`` with ``config``: wait until the NetApp's /readyz answers 200 (60 s at most);
* ``action`` with ``name``, ``params``, ``config``: the charm's handler for that action (charm.ACTIONS)
  with the charm's API client; answers the action's results. For ``apply-appd``, with ``values``
  (the unit's management address and api-port Juju would give), first what the charm's action
  event adds (charm.apply_appd_params): the AppD from the parameter, the appd option or the charm's
  own file, found from this folder as the charm finds it from its charm_dir;
* ``request`` with ``method``, ``path``, ``config``: one REST call with the charm's client;
* ``stop``: NetApp.stop.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

READY_TIMEOUT_S = 60.0


def _config(request: dict):
    from charm_config import CharmConfig

    return CharmConfig(**{key.replace("-", "_"): value for key, value in request.get("config", {}).items()})


def _ready(netapp, config) -> dict:
    from netapp_workload import ApiError

    client = netapp.client(config)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            return {"readyz": client.request("GET", "/readyz")}
        except ApiError as exc:
            if time.monotonic() > deadline:
                raise
            if not netapp.is_running():
                raise RuntimeError(f"the service stopped: {exc}") from exc
            time.sleep(0.1)


def handle(root: Path, request: dict) -> dict:
    import charm
    from netapp_workload import WHEELS_DIR, NetApp

    netapp = NetApp(root=root, run=subprocess.run)
    command = request["command"]
    if command == "install":
        netapp.install("charm", Path.cwd() / WHEELS_DIR)
        return {"version": netapp.version(), "installed": netapp.is_installed()}
    if command == "configure":
        config = _config(request)
        changed = netapp.configure(config)
        if changed or not netapp.is_running():
            netapp.restart()
        steered: dict = {}
        if config.steer_cpus:
            charm.put_steer_cpus(netapp.client(config), dict(config.steer_cpus), steered)
        return {"changed": changed, "running": netapp.is_running(), "steer_cpus": sorted(steered)}
    if command == "ready":
        return _ready(netapp, _config(request))
    if command == "action":
        config = _config(request)
        params = request.get("params", {})
        if request["name"] == "apply-appd":
            params = charm.apply_appd_params(params, config.appd, Path.cwd(), request["values"])
        return charm.ACTIONS[request["name"]](netapp.client(config), params)
    if command == "request":
        client = netapp.client(_config(request))
        return {"body": client.request(request["method"], request["path"], request.get("body"))}
    if command == "stop":
        netapp.stop()
        return {"running": netapp.is_running()}
    raise ValueError(f"unknown command {command!r}")


def main(argv: list[str]) -> int:
    root, request = Path(argv[0]), json.loads(argv[1])
    try:
        answer = handle(root, request)
    except Exception as exc:  # noqa: BLE001 - the test reads the reason
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
