"""The virtual machine's initramfs: busybox, the build's dppctl and BPF objects, the loader
(load.c) and the stand-in instance's pinner (stand_in.c), both built here into bench/build/, their
shared libraries as `ldd` finds them, the kernel's
veth module (decompressed here: busybox's insmod reads a plain module), and init.sh as /init.
Written as a cpio "newc" archive without root: the one device node the kernel needs before /init
mounts devtmpfs (/dev/console) is an entry of the archive."""

from __future__ import annotations

import lzma
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from bench.harness import BUILD_DIR, DATAPLANE

HERE = Path(__file__).resolve().parent
INIT_SCRIPT = HERE / "init.sh"
# Each tool the machine runs besides dppctl: its source here, its binary in bench/build/, its name there.
TOOLS = {"load": (HERE / "load.c", BUILD_DIR / "kernels-load"),
         "stand-in": (HERE / "stand_in.c", BUILD_DIR / "kernels-stand-in")}
BUILD = DATAPLANE / "build"
BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static
MODULES = Path("/lib/modules")  # a directory per kernel release, as its linux-image package lays them
CONSOLE = (5, 1)  # /dev/console's major and minor
_LDD_PATH = re.compile(r"(/\S+) \(0x")


def build_tool(name: str) -> Path:
    """A tool of TOOLS compiled against the system's libbpf, as dataplane/Makefile builds dppctl."""
    source, binary = TOOLS[name]
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libbpf"], check=True, capture_output=True,
                           text=True).stdout.split()  # fmt: skip
    BUILD_DIR.mkdir(exist_ok=True)
    if not binary.exists() or binary.stat().st_mtime < source.stat().st_mtime:
        subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(binary), str(source), *flags],
                       check=True)  # fmt: skip
    return binary


def shared_libraries(binary: Path) -> list[Path]:
    """The libraries `binary` loads (and the dynamic loader), as this machine resolves them."""
    listed = subprocess.run(["ldd", str(binary)], check=True, capture_output=True, text=True).stdout
    return [Path(path) for path in _LDD_PATH.findall(listed)]


def tree(root: Path, kernel_release: str, build: Path = BUILD, modules: Path = MODULES) -> None:
    """Lay out the machine's files under `root`, dppctl and the objects from `build`, the kernel's
    modules from `modules`/RELEASE."""
    for directory in ("bin", "dpp", "objects", "lib/modules", "proc", "sys", "dev", "tmp"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUSYBOX, root / "bin" / "busybox")
    shutil.copy2(INIT_SCRIPT, root / "init")
    binaries = [build / "dppctl", *(build_tool(name) for name in TOOLS)]
    shutil.copy2(build / "dppctl", root / "dpp" / "dppctl")
    shutil.copy2(build / "libdpp.so", root / "dpp" / "libdpp.so")  # dppctl's rpath: $ORIGIN
    for name, (_source, binary) in TOOLS.items():
        shutil.copy2(binary, root / "dpp" / name)
    for library in {lib for binary in binaries for lib in shared_libraries(binary)}:
        if library.resolve().parent == build.resolve():
            continue
        target = root / library.relative_to("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(library.resolve(), target)
    for obj in sorted(build.glob("*.bpf.o")):
        shutil.copy2(obj, root / "objects" / obj.name)
    (root / "lib" / "modules" / "veth.ko").write_bytes(module_bytes(veth_module(kernel_release, modules)))


def veth_module(kernel_release: str, modules: Path = MODULES) -> Path:
    """The release's veth.ko, or veth.ko.xz or veth.ko.zst where its package compresses modules
    (Debian 12's 6.12 with xz, Ubuntu 24.04's 6.8 with zstd; Debian 12's 6.1 and Ubuntu 22.04's
    kernels do not)."""
    plain = modules / kernel_release / "kernel" / "drivers" / "net" / "veth.ko"
    for path in (plain, plain.with_name("veth.ko.xz"), plain.with_name("veth.ko.zst")):
        if path.exists():
            return path
    raise FileNotFoundError(f"{plain} (or .xz, .zst) is missing: the kernel's modules (its linux-image or "
                            "linux-modules package)")


def module_bytes(path: Path) -> bytes:
    """A module as insmod takes it: an .xz one decompressed, a .zst one by zstd (Python's own
    zstd module is 3.14's)."""
    if path.suffix == ".zst":
        return subprocess.run(["zstd", "-dcq", str(path)], check=True, capture_output=True).stdout
    return lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()


def write_cpio(root: Path, archive: Path) -> None:
    """Every file and directory under `root` into a newc archive, plus /dev/console."""
    with archive.open("wb") as out:
        number = 1
        for path in sorted(root.rglob("*")):
            _entry(out, number, path.relative_to(root).as_posix(), path)
            number += 1
        _header(out, number, "dev/console", stat.S_IFCHR | 0o600, 0, CONSOLE)
        _header(out, number + 1, "TRAILER!!!", 0, 0)


def _entry(out, number: int, name: str, path: Path) -> None:
    info = path.lstat()
    if stat.S_ISDIR(info.st_mode):
        _header(out, number, name, info.st_mode, 0)
        return
    data = path.read_bytes()
    _header(out, number, name, info.st_mode, len(data))
    out.write(data + _padding(len(data)))


def _header(out, number: int, name: str, mode: int, size: int, device: tuple[int, int] = (0, 0)) -> None:
    encoded = name.encode() + b"\0"
    fields = (number, mode, 0, 0, 1, 0, size, 0, 0, device[0], device[1], len(encoded), 0)
    head = b"070701" + b"".join(b"%08X" % field for field in fields)
    out.write(head + encoded + _padding(len(head) + len(encoded)))


def _padding(length: int) -> bytes:
    return b"\0" * (-length % 4)


def build(workdir: Path, kernel_release: str, dataplane_build: Path = BUILD, modules: Path = MODULES) -> Path:
    """The initramfs for `kernel_release` with `dataplane_build`'s dppctl and objects and the
    release's modules under `modules`, in `workdir`."""
    root = workdir / "root"
    tree(root, kernel_release, dataplane_build, modules)
    os.chmod(root / "init", 0o755)
    archive = workdir / "initramfs.cpio"
    write_cpio(root, archive)
    return archive
