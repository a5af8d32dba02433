"""scripts/debian-kernel, the backported kernel `make test` unpacks for tests/dataplane/test_old_kernel.py:
the newest package of the series, fetched through apt configured apart from the machine's, unpacked
into the cache once, never installed.

Stand-ins for `apt-get`, `apt-cache` and `dpkg-deb` first on PATH note their calls in a log and
make what the real ones would (a package file, a search's lines, an unpacked tree), so these tests
take no network and touch no apt state."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.setup.stand_ins import on_path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "debian-kernel"
NEWEST = "6.12.95+deb12-amd64"

STAND_INS = {
    "apt-get": """#!/bin/sh
printf "apt-get %s\\n" "$*" >> "$FAKE_APT_LOG"
for last; do :; done
case " $* " in *" download "*) echo "$last" > "${last}_1_amd64.deb" ;; esac
""",
    # What `apt-cache search` prints: the package, " - ", its description; the list in $FAKE_PACKAGES.
    "apt-cache": """#!/bin/sh
printf "apt-cache %s\\n" "$*" >> "$FAKE_APT_LOG"
for package in $FAKE_PACKAGES; do echo "$package - Linux 6.12 for 64-bit PCs"; done
""",
    # dpkg-deb -x DEB DIR: a linux-image package's image and compressed veth module.
    "dpkg-deb": """#!/bin/sh
printf "dpkg-deb %s\\n" "$*" >> "$FAKE_APT_LOG"
release=$(cat "$2" | sed 's/^linux-image-//; s/-unsigned$//')
mkdir -p "$3/boot" "$3/lib/modules/$release/kernel/drivers/net"
echo image > "$3/boot/vmlinuz-$release"
echo module > "$3/lib/modules/$release/kernel/drivers/net/veth.ko.xz"
""",
}


class Fetch:
    def __init__(self, tmp_path: Path):
        self.cache = tmp_path / "kernels"
        self.log = tmp_path / "apt.log"
        packages = [f"linux-image-{release}-unsigned" for release in ("6.12.9+deb12-amd64", NEWEST, "6.12.43+deb12-amd64")]
        self.env = {**on_path(tmp_path / "bin", STAND_INS), "KERNELS_CACHE": str(self.cache),
                    "FAKE_APT_LOG": str(self.log), "FAKE_PACKAGES": " ".join(packages)}  # fmt: skip

    def run(self, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SCRIPT), "6.12", "bookworm-backports"], capture_output=True, text=True,
                              timeout=60, env={**self.env, **env})  # fmt: skip

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def fetch(tmp_path: Path) -> Fetch:
    return Fetch(tmp_path)


def test_the_newest_of_the_series_is_unpacked_into_the_cache(fetch: Fetch):
    result = fetch.run()

    assert result.returncode == 0, result.stderr
    tree = fetch.cache / NEWEST
    assert result.stdout.splitlines()[-1] == str(tree / "boot" / f"vmlinuz-{NEWEST}")
    assert (tree / "lib" / "modules" / NEWEST / "kernel" / "drivers" / "net" / "veth.ko.xz").exists()
    assert sorted(path.name for path in fetch.cache.iterdir()) == [".apt", NEWEST]  # no unpacking left behind
    assert (fetch.cache / ".apt" / "sources.list").read_text().split()[-2:] == ["bookworm-backports", "main"]


def test_apt_reads_its_own_sources_and_lists_not_the_machines(fetch: Fetch):
    fetch.run()

    apt_calls = [call for call in fetch.calls() if call.startswith("apt")]
    assert [call.split()[-1] for call in apt_calls] == ["update", "^linux-image-6.12\\.[0-9.]+\\+[a-z0-9.]+-amd64-unsigned$",
                                                        f"linux-image-{NEWEST}-unsigned"]  # fmt: skip
    own = fetch.cache / ".apt"
    for call in apt_calls:
        assert f"Dir::Etc::SourceList={own}/sources.list" in call and "Dir::Etc::SourceParts=/dev/null" in call
        assert f"Dir::State::Lists={own}/lists" in call and f"Dir::Cache={own}" in call
    assert not any(" install " in f"{call} " for call in apt_calls)


def test_a_series_already_unpacked_costs_no_apt_call(fetch: Fetch):
    fetch.run()
    calls = len(fetch.calls())

    again = fetch.run()

    assert again.returncode == 0 and again.stdout == f"{fetch.cache / NEWEST / 'boot' / f'vmlinuz-{NEWEST}'} (cached)\n"
    assert len(fetch.calls()) == calls


def test_a_suite_without_the_series_fails_with_the_reason(fetch: Fetch):
    result = fetch.run(FAKE_PACKAGES="")

    assert result.returncode == 1
    assert "no linux-image-6.12.*-amd64-unsigned in bookworm-backports" in result.stderr
    assert [path.name for path in fetch.cache.iterdir()] == [".apt"]
