"""Stand-in commands for the setup scripts' tests: small shell scripts first on PATH, in place of
the tools that would take minutes or the network (go, apt)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def on_path(directory: Path, scripts: dict[str, str]) -> dict[str, str]:
    """The environment with each script of `scripts` (command name -> text) an executable in
    `directory`, which comes first on PATH."""
    directory.mkdir()
    for name, text in scripts.items():
        (directory / name).write_text(text)
        (directory / name).chmod(0o755)
    return {**os.environ, "PATH": f"{directory}:{os.environ['PATH']}"}


# apt-get, apt-cache and dpkg-deb for scripts/fetch-kernel: each notes its call in $FAKE_APT_LOG
# and makes what the real one would (a package file per package downloaded, a search's lines, an
# unpacked tree), so that no network and no apt state is touched.
APT_STAND_INS = {
    "apt-get": """#!/bin/sh
printf "apt-get %s\\n" "$*" >> "$FAKE_APT_LOG"
packages=
for word; do [ -n "$packages" ] && echo "$word" > "${word}_1_all.deb"; [ "$word" = download ] && packages=1; done
exit 0
""",
    # What `apt-cache search` prints: the package, " - ", its description; the list in $FAKE_PACKAGES.
    "apt-cache": """#!/bin/sh
printf "apt-cache %s\\n" "$*" >> "$FAKE_APT_LOG"
for package in $FAKE_PACKAGES; do echo "$package - Linux kernel image"; done
""",
    # dpkg-deb -x DEB DIR: what the package named in DEB holds that the fetch and the boot use.
    "dpkg-deb": """#!/bin/sh
printf "dpkg-deb %s\\n" "$*" >> "$FAKE_APT_LOG"
package=$(cat "$2")
net=lib/modules/RELEASE/kernel/drivers/net
case $package in
linux-image-unsigned-*) release=${package#linux-image-unsigned-}; files="boot/vmlinuz-$release" ;;
linux-modules-*) release=${package#linux-modules-}; files="$net/veth.ko.zst" ;;
linux-image-*) release=${package#linux-image-}; release=${release%-unsigned}
	files="boot/vmlinuz-$release $net/veth.ko.xz" ;;
ubuntu-keyring) files=usr/share/keyrings/ubuntu-archive-keyring.gpg ;;
esac
for file in $files; do
	file=$(echo "$file" | sed "s/RELEASE/$release/")
	mkdir -p "$3/$(dirname "$file")" && echo "$package" > "$3/$file"
done
""",
}


class KernelFetch:
    """scripts/fetch-kernel run with APT_STAND_INS into a cache of its own under `tmp_path`, the
    stand-in apt-cache listing `packages`."""

    def __init__(self, tmp_path: Path, distribution: str, suite: str, packages: list[str]):
        self.cache = tmp_path / "kernels"
        self.log = tmp_path / "apt.log"
        self.distribution, self.suite = distribution, suite
        self.env = {**on_path(tmp_path / "bin", APT_STAND_INS), "KERNELS_CACHE": str(self.cache),
                    "FAKE_APT_LOG": str(self.log), "FAKE_PACKAGES": " ".join(packages)}  # fmt: skip

    def run(self, series: str, *, distribution: str = "", **env: str) -> subprocess.CompletedProcess[str]:
        command = [str(SCRIPTS / "fetch-kernel"), distribution or self.distribution, series, self.suite]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, env={**self.env, **env})

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def unpacked(self, series: str, release: str) -> Path:
        """The tree a fetch of `series` unpacked `release` into, which it names last."""
        result = self.run(series)
        assert result.returncode == 0, result.stderr
        tree = self.cache / release
        assert result.stdout.splitlines()[-1] == str(tree / "boot" / f"vmlinuz-{release}")
        return tree
