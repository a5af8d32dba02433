"""The charm's workload (netapp_workload.NetApp) over a real `netapp serve`, for the tests that need
the NetApp itself rather than a fake.

Its files live under a tmp root (`NetApp(root=...)`), as on a machine under "/". Install is not run:
the venv's `netapp` is a script running this source tree's CLI, so `netapp tokens add` (the
charm's admin token) and `netapp dataplane unload` are the real commands. systemd is played by
`Machine`: `systemctl restart` starts `netapp serve` (tests/utils/serve.py ServeProcess) on the
settings file the charm wrote, `stop` and `disable --now` stop it with SIGTERM as systemd does,
`is-active` says whether it runs. Every other command runs for real.

The settings the charm writes name host paths (/etc/dpp-netapp/..., /var/lib/dpp-netapp); they are
pointed at the tmp root, and given the test's instance and network namespace, which the charm
leaves at their defaults. Needs root and libdpp (the service attaches XDP): callers skip first.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import yaml
from charm_config import CharmConfig
from netapp_workload import NetApp

from tests.utils.serve import ServeProcess

REPO = Path(__file__).resolve().parents[2]
NETAPP_SCRIPT = '#!/bin/sh\nPYTHONPATH={repo} exec {python} -m netapp.cli.main "$@"\n'


class Machine:
    """Runs the workload's commands: systemctl for the one service over a ServeProcess, the others
    for real. `argv` records every command, in order."""

    def __init__(self) -> None:
        self.argv: list[list[str]] = []
        self.serve: Optional[ServeProcess] = None

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        self.argv.append(list(argv))
        if argv[0] != "systemctl":
            return subprocess.run(argv, **kwargs)
        return subprocess.CompletedProcess(argv, self._systemctl(argv[1:]), "", "")

    def _systemctl(self, args: list[str]) -> int:
        assert self.serve is not None
        if args[0] == "restart":
            self.serve.stop()
            self.serve.start()
        elif args[0] == "stop" or args[:2] == ["disable", "--now"]:
            self.serve.stop()
        elif args[0] == "is-active":
            return 0 if self.running else 3
        return 0

    @property
    def running(self) -> bool:
        process = None if self.serve is None else self.serve.process
        return process is not None and process.poll() is None


@contextlib.contextmanager
def served_netapp(
    root: Path, namespace: str, instance: str, config: CharmConfig
) -> Iterator[tuple[NetApp, Machine]]:
    """The workload configured by `config` and started; the service stopped when the block ends."""
    machine = Machine()
    workload = NetApp(root=root, run=machine)
    machine.serve = ServeProcess(workload.paths.settings, config.api_port, root)
    install_netapp_script(workload)
    workload.configure(config)
    _settings_under_root(workload, instance=instance, netns=namespace)
    try:
        workload.restart()
        yield workload, machine
    finally:
        machine.serve.stop()


def install_netapp_script(workload: NetApp) -> None:
    """The venv's `netapp`: a script running this source tree's CLI."""
    script = workload.paths.netapp_bin
    script.parent.mkdir(parents=True)
    script.write_text(NETAPP_SCRIPT.format(repo=REPO, python=sys.executable))
    script.chmod(0o755)


def _settings_under_root(workload: NetApp, **extra: Any) -> None:
    paths = workload.paths
    settings = yaml.safe_load(paths.settings.read_text())
    settings.update(state_dir=str(paths.state_dir), tokens_file=str(paths.tokens), **extra)
    paths.settings.write_text(yaml.safe_dump(settings, sort_keys=False))
