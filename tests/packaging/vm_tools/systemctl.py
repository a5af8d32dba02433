"""A stand-in for systemctl on a machine where systemd does not run (this one): a small process
supervisor for the units under a root directory. Run as ``systemctl.py ROOT INSTANCE ARGS...``
by the ``systemctl`` script the VM test puts first on PATH; standard library only.

``start``/``restart`` read ``ROOT/etc/systemd/system/<unit>.service`` and start its ``ExecStart``
with its ``Environment=`` lines (and the PATH and LANG systemd gives a service, nothing of the
caller's environment), detached, its output in ``ROOT/var/log/<unit>.log``, its pid in
``ROOT/run/<unit>.pid``; ``stop`` sends SIGTERM and waits (SIGKILL after 15 s); ``is-active``
says whether that pid lives. ``daemon-reload``, ``enable``, ``disable`` only succeed.

What differs from systemd: the unit names the machine's paths (/opt/dpp-netapp, /etc/dpp-netapp,
/var/lib/dpp-netapp), which here live under ROOT, so those prefixes are moved under ROOT in
``ExecStart``, in ``Environment`` and in the settings file NETAPP_CONFIG names (a copy,
ROOT/run/<unit>.settings.yaml); NETAPP_INSTANCE names the bpffs instance of this test only, so
that its pins cannot meet another NetApp's on this machine. ``CPUAffinity``, ``LimitMEMLOCK``
(root needs none) and ``Restart`` are not applied.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

MACHINE_DIRS = ("/opt/dpp-netapp", "/etc/dpp-netapp", "/var/lib/dpp-netapp")
SERVICE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STOP_TIMEOUT_S = 15.0


def rerooted(text: str, root: Path) -> str:
    """``text`` with the machine's NetApp paths moved under ``root``."""
    for prefix in MACHINE_DIRS:
        text = re.sub(rf"(?<![\w/.-]){re.escape(prefix)}(?=[/\s\x22\x27]|$)", f"{root}{prefix}", text)
    return text


def read_unit(path: Path) -> tuple[list[str], dict[str, str]]:
    """ExecStart's argv and the Environment= assignments of a unit file."""
    argv: list[str] = []
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        if key == "ExecStart":
            argv = shlex.split(value)
        elif key == "Environment":
            for assignment in shlex.split(value):
                name, _, setting = assignment.partition("=")
                env[name] = setting
    if not argv:
        raise SystemExit(f"{path}: no ExecStart")
    return argv, env


class Unit:
    def __init__(self, root: Path, instance: str, name: str):
        self.root = root
        self.instance = instance
        self.name = name.removesuffix(".service")
        self.file = root / "etc" / "systemd" / "system" / f"{self.name}.service"
        self.pid_file = root / "run" / f"{self.name}.pid"
        self.log = root / "var" / "log" / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return None if _zombie(pid) else pid

    def start(self) -> None:
        if self.pid() is not None:
            return
        argv, env = read_unit(self.file)
        argv = [rerooted(arg, self.root) for arg in argv]
        env = {name: rerooted(value, self.root) for name, value in env.items()}
        if "NETAPP_CONFIG" in env:
            copy = self.root / "run" / f"{self.name}.settings.yaml"
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(rerooted(Path(env["NETAPP_CONFIG"]).read_text(), self.root))
            env["NETAPP_CONFIG"] = str(copy)
        env = {"PATH": SERVICE_PATH, "LANG": "C.UTF-8", **env, "NETAPP_INSTANCE": self.instance}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as log:
            process = subprocess.Popen(
                argv, env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.pid_file.write_text(str(process.pid))

    def stop(self) -> None:
        pid = self.pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while self.pid() is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.pid() is not None:
            os.kill(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def main(argv: list[str]) -> int:
    root, instance, *args = argv
    words = [arg for arg in args if not arg.startswith("-")]
    verb, names = words[0], words[1:]
    units = [Unit(Path(root), instance, name) for name in names]
    if verb == "is-active":
        return 0 if all(unit.pid() is not None for unit in units) else 3
    if verb in ("start", "restart"):
        for unit in units:
            if verb == "restart":
                unit.stop()
            unit.start()
    elif verb == "stop" or (verb == "disable" and "--now" in args):
        for unit in units:
            unit.stop()
    elif verb not in ("daemon-reload", "enable", "disable"):
        print(f"systemctl stand-in: {verb} is not supported", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
