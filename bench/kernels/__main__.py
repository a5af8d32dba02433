"""Boot each kernel given (default: every /boot/vmlinuz-*) and say, per object and knob setting,
whether its verifier took every program, with the verifier's last lines where it did not.

    python -m bench.kernels                                   # every kernel image in /boot
    python -m bench.kernels --kernel /boot/vmlinuz-6.1.0-57-amd64
    python -m bench.kernels --kernel DIR/boot/vmlinuz-6.12.95+deb12-amd64 --modules DIR/lib/modules
                                                              # a linux-image package unpacked in DIR

No root needed; qemu-system-x86, busybox-static and the kernel's linux-image package are. Exit
status 1 when any load was refused or a machine did not finish, 2 when nothing can be booted here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.kernels.boot import Boot, boot, missing
from bench.kernels.initramfs import BUILD, MODULES

BOOT_DIR = Path("/boot")


def kernel_images() -> list[Path]:
    return sorted(BOOT_DIR.glob("vmlinuz-*"))


def report(result: Boot) -> None:
    print(f"kernel {result.kernel}: release {result.release or '?'}, BTF {'yes' if result.btf else 'no'}, "
          f"{result.seconds:.0f} s from boot to power-off{'' if result.done else ' (did not finish)'}")
    for load in result.loads:
        setting = f" ({load.setting})" if load.setting and not load.by_dppctl else ""
        if load.loaded:
            verified = ", ".join(f"{name} {insns}" for name, insns in load.programs.items())
            print(f"  loaded   {load.obj}{setting}{': ' + verified if verified else ''}")
            continue
        print(f"  REFUSED  {load.obj}{setting} by {load.refused_by or '?'}: {load.error or 'see the log'}")
        for line in load.log:
            print(f"      | {line}")
    for line in result.status:
        print(f"  status   {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel", type=Path, action="append", help="a vmlinuz-RELEASE image (repeatable)")
    parser.add_argument("--build", type=Path, default=BUILD,
                        help="the dataplane build whose dppctl and objects are loaded (default: this checkout's)")
    parser.add_argument("--modules", type=Path, default=MODULES,
                        help="where each kernel's modules are, under RELEASE/ (default: %(default)s)")
    parser.add_argument("--memory", type=int, default=2048, help="the machine's memory, MiB")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before a machine is given up")
    parser.add_argument("--console", type=Path, help="write each machine's whole console here (.RELEASE added)")
    args = parser.parse_args(argv)
    kernels = args.kernel or kernel_images()
    reason = missing(kernels, args.modules)
    if reason or not kernels:
        print(f"cannot boot a kernel here: {reason or f'no kernel image in {BOOT_DIR}'}", file=sys.stderr)
        return 2
    failed = False
    for kernel in kernels:
        result = boot(kernel, args.memory, args.timeout, args.build, args.modules)
        if args.console:
            args.console.with_name(f"{args.console.name}.{result.release or kernel.name}").write_text(result.console)
        report(result)
        failed |= bool(result.refused) or not result.done
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
