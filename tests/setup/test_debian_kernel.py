"""scripts/fetch-kernel debian, the backported kernel `make test` unpacks for
tests/dataplane/test_old_kernel.py: the newest package of the series, fetched through apt configured
apart from the machine's, unpacked into the cache once, never installed.

Stand-ins for `apt-get`, `apt-cache` and `dpkg-deb` first on PATH (stand_ins.APT_STAND_INS) note
their calls in a log and make what the real ones would, so these tests take no network and touch no
apt state."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.setup.stand_ins import KernelFetch

NEWEST = "6.12.95+deb12-amd64"


@pytest.fixture
def fetch(tmp_path: Path) -> KernelFetch:
    packages = [f"linux-image-{release}-unsigned" for release in ("6.12.9+deb12-amd64", NEWEST, "6.12.43+deb12-amd64")]
    return KernelFetch(tmp_path, "debian", "bookworm-backports", packages)


def test_the_newest_of_the_series_is_unpacked_into_the_cache(fetch: KernelFetch):
    tree = fetch.unpacked("6.12", NEWEST)

    assert (tree / "lib" / "modules" / NEWEST / "kernel" / "drivers" / "net" / "veth.ko.xz").exists()
    assert sorted(path.name for path in fetch.cache.iterdir()) == [".apt", NEWEST]  # no unpacking left behind
    assert (fetch.cache / ".apt" / "bookworm-backports" / "sources.list").read_text().split()[-2:] == [
        "bookworm-backports", "main"]


def test_apt_reads_its_own_sources_and_lists_not_the_machines(fetch: KernelFetch):
    fetch.run("6.12")

    apt_calls = [call for call in fetch.calls() if call.startswith("apt")]
    assert [call.split()[-1] for call in apt_calls] == ["update", "^linux-image-6.12\\.[0-9.]+\\+[a-z0-9.]+-amd64-unsigned$",
                                                        f"linux-image-{NEWEST}-unsigned"]  # fmt: skip
    own = fetch.cache / ".apt" / "bookworm-backports"
    for call in apt_calls:
        assert f"Dir::Etc::SourceList={own}/sources.list" in call and "Dir::Etc::SourceParts=/dev/null" in call
        assert f"Dir::State::Lists={own}/lists" in call and f"Dir::Cache={own}" in call
    assert not any(" install " in f"{call} " for call in apt_calls)


def test_a_series_already_unpacked_costs_no_apt_call(fetch: KernelFetch):
    """Before any distribution's own steps: an Ubuntu series costs none either."""
    fetch.run("6.12")
    calls = len(fetch.calls())

    again = fetch.run("6.12")

    assert again.returncode == 0 and again.stdout == f"{fetch.cache / NEWEST / 'boot' / f'vmlinuz-{NEWEST}'} (cached)\n"
    assert len(fetch.calls()) == calls


def test_a_suite_without_the_series_fails_with_the_reason(fetch: KernelFetch):
    result = fetch.run("6.12", FAKE_PACKAGES="")

    assert result.returncode == 1
    assert "no linux-image-6.12.*-amd64-unsigned in bookworm-backports" in result.stderr
    assert [path.name for path in fetch.cache.iterdir()] == [".apt"]
