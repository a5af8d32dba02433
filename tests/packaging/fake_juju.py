"""Fake Juju hook tools, so that a packed charm's ``dispatch`` can run on this machine.

No Juju controller can run here (no snap, no LXD), so the dispatch tests put these scripts first
on PATH. Each one appends its argv to a JSON-lines log and answers as the unit agent would, from
a state file the test writes: the charm's config, the action's parameters, leadership.

Two more stand-ins sit in the same folder:

* ``python3``: the base interpreter with ``-S`` (no site-packages), so the charm imports its
  dependencies from its own ``venv/`` and nothing from the test environment;
* ``systemctl``: answers "inactive", so what the charm sees does not depend on this host's
  init system (and the charm cannot start or stop anything here).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

# Every hook tool ops may call in the tested events; the first run without one of these shows
# which is missing (ops reports the FileNotFoundError).
TOOLS = (
    "action-fail", "action-get", "action-log", "action-set", "application-version-set",
    "close-port", "config-get", "goal-state", "is-leader", "juju-log", "leader-get", "leader-set",
    "network-get", "open-port", "opened-ports", "relation-get", "relation-ids", "relation-list",
    "relation-set", "secret-get", "state-delete", "state-get", "state-set", "status-get",
    "status-set", "storage-list", "unit-get",
)  # fmt: skip

# Answers of the tools that print something (ops always asks for --format=json).
TOOL_SCRIPT = """#!{python}
import json, os, sys

tool = os.path.basename(sys.argv[0])
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(json.dumps({{"tool": tool, "args": args}}) + "\\n")
with open({state!r}) as handle:
    state = json.load(handle)
keys = [arg for arg in args if not arg.startswith("-")]

def pick(values):
    return values.get(keys[0]) if keys else values

answers = {{
    "config-get": lambda: pick(state["config"]),
    "action-get": lambda: pick(state["params"]),
    "is-leader": lambda: state["leader"],
    "relation-ids": lambda: [],
    "relation-list": lambda: [],
    "relation-get": lambda: {{}},
    "goal-state": lambda: {{"units": {{}}, "relations": {{}}}},
    "leader-get": lambda: {{}},
    "state-get": lambda: {{}},
    "status-get": lambda: {{"status": "unknown", "message": "", "status-data": {{}}}},
    "opened-ports": lambda: [],
    "storage-list": lambda: [],
    "unit-get": lambda: "192.0.2.10",
    "network-get": lambda: {{
        "bind-addresses": [
            {{"interface-name": "eth0", "addresses": [{{"value": "192.0.2.10", "cidr": "192.0.2.0/24"}}]}}
        ],
        "egress-subnets": ["192.0.2.10/32"],
        "ingress-addresses": ["192.0.2.10"],
    }},
}}
if tool == "secret-get":  # state["secrets"]: URI -> content, or the error Juju prints
    found = state.get("secrets", {{}}).get(keys[0], 'ERROR secret "%s" not found' % keys[0])
    if isinstance(found, str):
        sys.exit(print(found, file=sys.stderr) or 1)
    print(json.dumps(found))
elif tool in answers:
    print(json.dumps(answers[tool]()))
"""

SYSTEMCTL_SCRIPT = """#!/bin/sh
printf '%s\\n' "$*" >> {log!r}
case "$1" in is-active) exit 3 ;; esac
exit 0
"""

PYTHON_SCRIPT = """#!/bin/sh
exec {python!r} -S "$@"
"""


def default_config(charmcraft: dict[str, Any]) -> dict[str, Any]:
    """The config Juju gives a fresh unit: each option's default (options without one are unset)."""
    options = charmcraft.get("config", {}).get("options", {})
    return {name: option["default"] for name, option in options.items() if "default" in option}


def base_python() -> str:
    """The interpreter this test environment's venv was made from."""
    return getattr(sys, "_base_executable", sys.executable)


class FakeJuju:
    """A folder of fake hook tools, their call log and the state they answer from."""

    def __init__(self, root: Path, config: dict[str, Any]):
        self.root = root
        self.bin = root / "bin"
        self.log = root / "calls.jsonl"
        self.systemctl_log = root / "systemctl.log"
        self.state_file = root / "state.json"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.set_state(config=config, params={}, leader=True)
        self._write_tools()

    def _write_tools(self) -> None:
        tool = TOOL_SCRIPT.format(python=sys.executable, log=str(self.log), state=str(self.state_file))
        scripts = {name: tool for name in TOOLS}
        scripts["systemctl"] = SYSTEMCTL_SCRIPT.format(log=str(self.systemctl_log))
        scripts["python3"] = PYTHON_SCRIPT.format(python=base_python())
        for name, text in scripts.items():
            path = self.bin / name
            path.write_text(text)
            path.chmod(0o755)

    def set_state(self, **changes: Any) -> None:
        """Change what the tools answer (``config``, ``params``, ``leader``, ``secrets``)."""
        state = json.loads(self.state_file.read_text()) if self.state_file.exists() else {}
        state.update(changes)
        self.state_file.write_text(json.dumps(state))

    def calls(self, tool: str | None = None) -> list[list[str]]:
        """The argv of every call so far, of one tool or of all (then with the tool's name first)."""
        if not self.log.exists():
            return []
        entries = [json.loads(line) for line in self.log.read_text().splitlines()]
        if tool is None:
            return [[entry["tool"], *entry["args"]] for entry in entries]
        return [entry["args"] for entry in entries if entry["tool"] == tool]

    def env(self, charm_dir: Path, **extra: str) -> dict[str, str]:
        """The environment the unit agent gives a hook, and nothing of the test process's."""
        env = {
            "PATH": f"{self.bin}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin",
            "HOME": str(self.root),
            "LANG": "C.UTF-8",
            "JUJU_CHARM_DIR": str(charm_dir),
            "JUJU_UNIT_NAME": "dpp-netapp/0",
            "JUJU_MODEL_NAME": "edge",
            "JUJU_MODEL_UUID": "00000000-0000-4000-8000-000000000001",
            "JUJU_VERSION": "3.5.0",
        }
        env.update(extra)
        return env
