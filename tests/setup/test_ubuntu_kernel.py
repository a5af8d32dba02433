"""scripts/fetch-kernel ubuntu, the Ubuntu kernels `make test` unpacks for
tests/dataplane/test_old_kernel.py: the newest linux-image-unsigned package of the series and its
linux-modules package (veth's), both unpacked into one tree; Ubuntu's archive read with the key of
Debian's ubuntu-keyring package, itself unpacked into the cache, never installed.

The stand-ins of stand_ins.APT_STAND_INS take the place of apt and dpkg-deb: no network, no apt
state touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.setup.stand_ins import KernelFetch

NEWEST = "6.8.0-151-generic"
KEYRING = Path(".ubuntu-keyring") / "usr" / "share" / "keyrings" / "ubuntu-archive-keyring.gpg"


@pytest.fixture
def fetch(tmp_path: Path) -> KernelFetch:
    packages = [f"linux-image-unsigned-6.8.0-{abi}-generic" for abi in (31, 151, 90)]
    return KernelFetch(tmp_path, "ubuntu", "noble-updates", packages)


def test_the_newest_image_of_the_series_and_its_modules_are_unpacked_into_one_tree(fetch: KernelFetch):
    tree = fetch.unpacked("6.8", NEWEST)

    assert (tree / "boot" / f"vmlinuz-{NEWEST}").read_text() == f"linux-image-unsigned-{NEWEST}\n"
    veth = tree / "lib" / "modules" / NEWEST / "kernel" / "drivers" / "net" / "veth.ko.zst"
    assert veth.read_text() == f"linux-modules-{NEWEST}\n"
    downloads = [call.split(" download ")[1] for call in fetch.calls() if " download " in call]
    assert downloads[-1] == f"linux-image-unsigned-{NEWEST} linux-modules-{NEWEST}"
    assert sorted(path.name for path in fetch.cache.iterdir()) == [".apt", ".ubuntu-keyring", NEWEST]


def test_ubuntus_archive_is_read_with_the_key_debian_ships_for_it(fetch: KernelFetch):
    fetch.run("6.8")

    keyring = fetch.cache / KEYRING
    assert keyring.read_text() == "ubuntu-keyring\n"
    ubuntu = (fetch.cache / ".apt" / "noble-updates" / "sources.list").read_text().split()
    assert ubuntu == ["deb", f"[signed-by={keyring}]", "http://archive.ubuntu.com/ubuntu", "noble-updates", "main"]
    debian = (fetch.cache / ".apt" / "bookworm-backports" / "sources.list").read_text().split()
    assert debian[1:] == ["[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]", "http://deb.debian.org/debian",
                          "bookworm-backports", "main"]  # fmt: skip
    keyring_download = [call for call in fetch.calls() if call.endswith(" download ubuntu-keyring")]
    assert len(keyring_download) == 1 and f"Dir::State::Lists={fetch.cache}/.apt/bookworm-backports/lists" in (
        keyring_download[0])
    assert not any(" install " in f"{call} " for call in fetch.calls())


def test_the_search_asks_for_the_generic_unsigned_image_of_the_series(fetch: KernelFetch):
    fetch.run("6.8")

    searches = [call.split()[-1] for call in fetch.calls() if call.startswith("apt-cache")]
    assert searches == ["^linux-image-unsigned-6.8\\.0-[0-9]+-generic$"]


def test_the_keyring_is_fetched_once_for_every_series(fetch: KernelFetch):
    fetch.run("6.8")
    fetch.run("6.5", FAKE_PACKAGES="linux-image-unsigned-6.5.0-45-generic")

    assert len([call for call in fetch.calls() if call.endswith(" download ubuntu-keyring")]) == 1
    assert (fetch.cache / "6.5.0-45-generic" / "boot" / "vmlinuz-6.5.0-45-generic").exists()


def test_a_suite_without_the_series_fails_with_the_reason(fetch: KernelFetch):
    result = fetch.run("6.11", FAKE_PACKAGES="")

    assert result.returncode == 1
    assert "no linux-image-unsigned-6.11.0-*-generic in noble-updates" in result.stderr
    assert sorted(path.name for path in fetch.cache.iterdir()) == [".apt", ".ubuntu-keyring"]


def test_an_unknown_distribution_is_refused(fetch: KernelFetch):
    refused = fetch.run("6.8", distribution="fedora")

    assert refused.returncode == 2 and "no distribution 'fedora' (debian or ubuntu)" in refused.stderr
    assert fetch.calls() == []
