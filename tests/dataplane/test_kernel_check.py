"""libdpp refuses a kernel older than the oldest the data path loads on (dpp_kernel_check, which
dpp_open runs before it loads the programs), with the reason in its log; a release is read as
`uname -r` prints it. No program is loaded: no root needed."""

from __future__ import annotations

import errno
import logging

import pytest

from netapp.dataplane.binding import Libdpp, LibraryNotFoundError, load_libdpp


@pytest.fixture(scope="module")
def lib() -> Libdpp:
    try:
        return load_libdpp()
    except LibraryNotFoundError as exc:
        pytest.skip(f"libdpp is not built: {exc.hint}")


@pytest.mark.parametrize("release", ["5.17.0", "6.8.0-31-generic", "6.18.44-fc-v857", "10.1.0"])
def test_kernels_from_5_17_on_are_taken(lib: Libdpp, release: str) -> None:
    assert lib.dpp_kernel_check(release.encode()) == 0


@pytest.mark.parametrize("release", ["5.16.20", "5.15.0-91-generic", "4.19.0-25-amd64"])
def test_older_kernels_are_refused_with_the_reason(lib: Libdpp, release: str, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="netapp.dataplane"):
        assert lib.dpp_kernel_check(release.encode()) == -errno.EOPNOTSUPP
    assert f"kernel {release} is older than 5.17" in caplog.text
    assert "bpf_loop" in caplog.text


def test_a_release_that_names_no_version_is_invalid(lib: Libdpp) -> None:
    assert lib.dpp_kernel_check(b"generic") == -errno.EINVAL


def test_the_running_kernel_is_taken(lib: Libdpp) -> None:
    """The kernel these tests run on loads the data path (other tests load it), so it must pass."""
    assert lib.dpp_kernel_check(None) == 0
