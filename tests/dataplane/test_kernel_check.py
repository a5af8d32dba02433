"""libdpp refuses a kernel older than the oldest the data path loads on (dpp_kernel_check, which
dpp_open runs before it loads the programs), with the reason in its log; a release is read as
`uname -r` prints it. No program is loaded: no root needed."""

from __future__ import annotations

import errno
import logging
import re
import struct
from pathlib import Path

import pytest

from netapp.dataplane import handle
from netapp.dataplane.binding import Libdpp, LibraryNotFoundError, find_libdpp, load_libdpp


@pytest.fixture(scope="module")
def lib() -> Libdpp:
    try:
        return load_libdpp()
    except LibraryNotFoundError as exc:
        pytest.skip(f"libdpp is not built: {exc.hint}")


@pytest.mark.parametrize("release", ["6.1.0-57-amd64", "6.8.0-31-generic", "6.10.0", "6.18.44-fc-v857", "10.0", "10.1.0"])
def test_kernels_from_6_1_on_are_taken(lib: Libdpp, release: str) -> None:
    assert lib.dpp_kernel_check(release.encode()) == 0


@pytest.mark.parametrize("release", ["6.0.19", "5.19.0-50-generic", "5.18.0"])
def test_kernels_with_the_helpers_but_not_the_verifier_are_refused_for_the_verifier(
        lib: Libdpp, release: str, caplog) -> None:
    """Ubuntu 22.04's 5.19 has every helper the programs call, but its verifier gives up on the
    pipeline's entry (tests/dataplane/test_old_kernel.py boots it)."""
    with caplog.at_level(logging.WARNING, logger="netapp.dataplane"):
        assert lib.dpp_kernel_check(release.encode()) == -errno.EOPNOTSUPP
    assert f"kernel {release} is older than 6.1, the oldest the data path loads on (before 6.1: no verifier known" in caplog.text
    assert "bpf_xdp_load_bytes" not in caplog.text


@pytest.mark.parametrize("release", ["5.17.15", "5.16.20", "5.15.0-91-generic", "4.19.0-25-amd64"])
def test_older_kernels_are_refused_for_the_helpers_they_lack(lib: Libdpp, release: str, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="netapp.dataplane"):
        assert lib.dpp_kernel_check(release.encode()) == -errno.EOPNOTSUPP
    assert f"kernel {release} is older than 6.1, the oldest the data path loads on (before 5.18: no " \
        "bpf_xdp_load_bytes and bpf_xdp_store_bytes" in caplog.text


SETTINGS = [(False, False), (True, False), (False, True), (True, True)]  # (flow cache, trace)


@pytest.mark.parametrize("release", ["6.2.0-39-generic", "6.2.16"])
def test_6_2_is_refused_the_flow_cache_and_trace_together_only(lib: Libdpp, release: str, caplog) -> None:
    """Ubuntu 22.04's 6.2 verifier gives up on the pipeline's entry with both on (the boot in
    tests/dataplane/test_old_kernel.py sees it refuse exactly that setting)."""
    with caplog.at_level(logging.WARNING, logger="netapp.dataplane"):
        taken = {setting: lib.dpp_kernel_check_settings(release.encode(), *setting) for setting in SETTINGS}
    assert taken == {(False, False): 0, (True, False): 0, (False, True): 0, (True, True): -errno.EOPNOTSUPP}
    assert f"kernel {release} takes the data path with the flow cache or with trace, not with both: 6.2's " \
        "verifier" in caplog.text


@pytest.mark.parametrize("release", ["6.1.0-57-amd64", "6.3.0", "6.5.0-45-generic", "6.11.0-29-generic", "6.12.95"])
def test_other_kernels_take_every_setting(lib: Libdpp, release: str) -> None:
    assert all(lib.dpp_kernel_check_settings(release.encode(), *setting) == 0 for setting in SETTINGS)


@pytest.mark.parametrize("release", ["5.19.0-50-generic", "5.15.0-91-generic"])
def test_the_settings_check_refuses_what_the_minimum_refuses(lib: Libdpp, release: str) -> None:
    assert all(lib.dpp_kernel_check_settings(release.encode(), *setting) == -errno.EOPNOTSUPP
               for setting in SETTINGS)


def test_a_release_that_names_no_version_is_invalid(lib: Libdpp) -> None:
    assert lib.dpp_kernel_check(b"generic") == -errno.EINVAL


def test_the_running_kernel_is_taken(lib: Libdpp) -> None:
    """The kernel these tests run on loads the data path (other tests load it), so it must pass."""
    assert lib.dpp_kernel_check(None) == 0


KERNEL_C = Path(__file__).resolve().parents[2] / "dataplane" / "src" / "kernel.c"
EM_BPF, SHT_SYMTAB = 247, 2
SHF_EXECINSTR = 0x4
BPF_CALL = 0x85


def helpers_by_version() -> dict[int, tuple[int, int]]:
    """kernel.c's list of helpers: id -> the version that brought it."""
    listed = {}
    for version, ids in re.findall(r"^ \*   (\d+\.\d+) +(#\d+.*)$", KERNEL_C.read_text(), re.MULTILINE):
        major, minor = map(int, version.split("."))
        for helper in re.findall(r"#(\d+)", ids):
            listed[int(helper)] = (major, minor)
    return listed


def minimum() -> tuple[int, int]:
    text = KERNEL_C.read_text()
    major = re.search(r"#define KERNEL_MIN_MAJOR (\d+)", text)
    minor = re.search(r"#define KERNEL_MIN_MINOR (\d+)", text)
    assert major and minor
    return int(major.group(1)), int(minor.group(1))


def helper_calls(path: Path) -> set[int]:
    """The helper ids an object's code calls: each `call` instruction of its executable sections
    with src_reg 0 (1 is a BPF-to-BPF call, 2 a kfunc), read from the ELF before any load."""
    raw = path.read_bytes()
    assert struct.unpack_from("<H", raw, 18)[0] == EM_BPF, path
    shoff, = struct.unpack_from("<Q", raw, 40)
    shentsize, shnum = struct.unpack_from("<HH", raw, 58)
    called = set()
    for index in range(shnum):
        _name, _type, flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", raw, shoff + index * shentsize)
        if not flags & SHF_EXECINSTR:
            continue
        for at in range(offset, offset + size, 8):
            code, regs, _off, imm = struct.unpack_from("<BBhi", raw, at)
            if code == BPF_CALL and regs >> 4 == 0:
                called.add(imm)
    return called


def test_every_helper_called_is_listed_at_the_minimum_or_before() -> None:
    """A helper newer than the minimum (or not listed) fails here: the minimum would be a lie."""
    build = Path(binding_dir())
    objects = sorted(build.glob("*.bpf.o"))
    if not objects:
        pytest.skip(f"no BPF objects in {build}: run `make -C dataplane`")
    listed, oldest = helpers_by_version(), minimum()
    wrong = {f"{path.name}: helper #{helper} ({listed.get(helper, 'not listed')})"
             for path in objects for helper in helper_calls(path)
             if helper not in listed or listed[helper] > oldest}  # fmt: skip
    assert not wrong, "\n".join(sorted(wrong))
    assert {189, 190} <= set().union(*map(helper_calls, objects))  # the reading finds calls


def binding_dir() -> Path:
    try:
        return Path(find_libdpp()).parent
    except LibraryNotFoundError as exc:
        pytest.skip(f"libdpp is not built: {exc.hint}")


def test_an_open_refused_for_the_kernel_names_the_reason(monkeypatch) -> None:
    """dpp_open's EOPNOTSUPP says which kernel and why, not only "Operation not supported"."""
    monkeypatch.setattr(handle.os, "geteuid", lambda: 0)
    monkeypatch.setattr(handle.platform, "release", lambda: "5.15.0-91-generic")
    hint = handle._open_hint(-errno.EOPNOTSUPP)
    assert "kernel 5.15.0-91-generic is older than the oldest the data path loads on" in hint
    assert handle._open_hint(-errno.ENOMEM) == ""
