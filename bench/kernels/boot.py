"""Boot a kernel under qemu with the initramfs of initramfs.py and read the machine's verdicts from
its serial console: the lines init.sh and load.c print, each after "@dpp "."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bench.kernels import initramfs

QEMU = "qemu-system-x86_64"
MARK = "@dpp "
# No KVM is assumed: TCG emulates the CPU, one vCPU so that it takes one host core; the maps of a
# load (the flow cache, a million UPF sessions' ways) need some memory.
QEMU_ARGS = ("-machine", "q35", "-cpu", "max", "-smp", "1", "-nographic", "-no-reboot", "-nodefaults",
             "-serial", "stdio")  # fmt: skip
KERNEL_CMDLINE = "console=ttyS0 quiet panic=-1"
_OBJECT = re.compile(r"^object (\S+)( [^:]*)?: (loaded|refused \((.*)\) by (\S+)|not opened.*)$")
_PROGRAM = re.compile(r"^program (\S+) (\S+): loaded, (\d+) instructions verified$")
_LOG = re.compile(r"^log (\S+) (\S+): (.*)$")
_NOT_IP = re.compile(r"^not-ip (\S+) (\d+)$")


@dataclass
class Load:
    """One load of an object under one knob setting (`service`: dppctl attach; `upgrade`: dppctl
    upgrade of the attached instance, or of an instance pinned by hand where the service was refused)."""

    obj: str
    setting: str
    loaded: bool
    refused_by: str = ""
    error: str = ""
    log: list[str] = field(default_factory=list)
    programs: dict[str, int] = field(default_factory=dict)  # name -> instructions verified

    @property
    def by_dppctl(self) -> bool:
        """dppctl's load (attach or upgrade), not the loader's: the loader's exit does not count it."""
        return self.setting in ("service", "upgrade")


@dataclass
class Boot:
    kernel: str
    release: str = ""
    btf: bool = False
    done: bool = False  # init.sh reached its end
    loader_exit: int | None = None  # the loader's exit status: the loads it refused (load.c)
    qemu: str = ""  # how qemu ended: its exit status and its last error lines, or its timeout
    seconds: float = 0.0
    loads: list[Load] = field(default_factory=list)
    status: list[str] = field(default_factory=list)  # dppctl status of the attached instance
    not_ip: dict[str, int] = field(default_factory=dict)  # "before"/"after" the upgrade: not-IP frames counted
    console: str = ""

    @property
    def refused(self) -> list[Load]:
        return [load for load in self.loads if not load.loaded]


def kernel_release(kernel: Path) -> str:
    """The release a Debian kernel image is named after (vmlinuz-RELEASE), its modules' directory."""
    if not kernel.name.startswith("vmlinuz-"):
        raise ValueError(f"{kernel}: not named vmlinuz-RELEASE, the modules cannot be found")
    return kernel.name.removeprefix("vmlinuz-")


def missing(kernels: Iterable[Path] = (), modules: Path = initramfs.MODULES) -> str | None:
    """Why this machine cannot boot a kernel here (or one of `kernels`, whose modules are in
    `modules`), or None."""
    tools = [(QEMU, "qemu-system-x86"), ("cc", "gcc"), ("pkg-config", "pkg-config")]
    for kernel in kernels:
        try:
            veth = initramfs.veth_module(kernel_release(kernel), modules)
        except (FileNotFoundError, ValueError) as exc:
            return str(exc)
        if veth.suffix == ".zst":  # only Ubuntu 24.04's, of the kernels booted, needs it
            tools.append(("zstd", "zstd"))
    for tool, package in tools:
        if not shutil.which(tool):
            return f"{tool} is not installed (apt-get install {package})"
    if not initramfs.BUSYBOX.exists():
        return f"{initramfs.BUSYBOX} is missing (apt-get install busybox-static)"
    return None


def boot(kernel: Path, memory_mb: int = 2048, timeout: float = 900, build: Path = initramfs.BUILD,
         modules: Path = initramfs.MODULES) -> Boot:
    """Boot `kernel` with `build`'s dppctl and objects and its modules from `modules`/RELEASE, wait
    for it to power off, read its verdicts."""
    release = kernel_release(kernel)
    with tempfile.TemporaryDirectory(prefix="dpp-kernels-") as workdir:
        archive = initramfs.build(Path(workdir), release, build, modules)
        command = [QEMU, *QEMU_ARGS, "-m", str(memory_mb), "-kernel", str(kernel), "-initrd", str(archive),
                   "-append", KERNEL_CMDLINE]  # fmt: skip
        start = time.monotonic()
        try:
            ran = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
            console, ended = ran.stdout, f"qemu exit {ran.returncode}: {_tail(ran.stderr)}"
        except subprocess.TimeoutExpired as exc:  # what the console shows tells where the boot stopped
            console, ended = exc.stdout or b"", f"qemu killed after {timeout:.0f} s: {_tail(exc.stderr)}"
        seconds = time.monotonic() - start
    result = parse(console.decode(errors="replace"), str(kernel))
    result.seconds, result.qemu = seconds, ended
    return result


def _tail(stream: bytes | None, lines: int = 5) -> str:
    return " | ".join((stream or b"").decode(errors="replace").splitlines()[-lines:])


def parse(console: str, kernel: str) -> Boot:
    """The verdicts of a console's output."""
    result = Boot(kernel, console=console)
    by_object: dict[str, Load] = {}
    for raw in console.splitlines():
        at = raw.find(MARK)
        if at < 0:
            continue
        _read_line(result, by_object, raw[at + len(MARK):].rstrip("\r"))
    return result


def _read_line(result: Boot, by_object: dict[str, Load], line: str) -> None:
    if line.startswith("kernel "):
        result.release = line.removeprefix("kernel ")
    elif line == "btf yes":
        result.btf = True
    elif line == "done":
        result.done = True
    elif line.startswith("loader exit "):
        result.loader_exit = int(line.removeprefix("loader exit "))
    elif line.startswith("service "):
        load = Load("dpp (dppctl attach)", "service", line == "service attached")
        load.refused_by = "" if load.loaded else "dppctl"
        by_object["service"] = load
        result.loads.append(load)
    elif line.startswith("upgrade "):
        load = Load("dpp (dppctl upgrade)", "upgrade", line == "upgrade done")
        load.refused_by = "" if load.loaded else ("stand-in" if line == "upgrade not tried" else "dppctl")
        by_object["upgrade"] = load
        result.loads.append(load)
    elif line.startswith("status "):
        result.status.append(line.removeprefix("status "))
    elif match := _NOT_IP.match(line):
        result.not_ip[match[1]] = int(match[2])
    elif match := _OBJECT.match(line):
        load = Load(match[1], (match[2] or "").strip(), match[3] == "loaded", match[5] or "", match[4] or "")
        by_object[match[1]] = load
        result.loads.append(load)
    elif match := _PROGRAM.match(line):
        by_object[match[1]].programs[match[2]] = int(match[3])
    elif match := _LOG.match(line):
        by_object[match[1]].log.append(match[3])
