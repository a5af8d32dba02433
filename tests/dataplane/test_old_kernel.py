"""Other kernels take the programs of the build, not only this machine's (dataplane/README.md
"Kernels"): Debian 12's own 6.1 and its backported 6.12 (bookworm-backports, the LTS many edge
sites run), Ubuntu 24.04's 6.8 (the charm's base) and HWE 6.11, and Ubuntu 22.04's HWE 6.5 (and 6.2
when asked: SLOW_KERNELS), each booted under qemu (bench/kernels, TCG: no KVM needed, no root) with the build's dppctl and BPF
objects; there dppctl attaches the pipeline as the service does and upgrades it in place, and every
object is loaded as the tests load it, under every setting of its one-byte knobs (6.2's verifier
gives up on the flow cache and trace together, which libdpp's settings check must refuse there).
One boot a kernel loads everything (one to five minutes each under TCG on a shared machine, 6.2's
the longest: its verifier walks near its limit four times). Older verifiers refuse what this one takes: a byte swap's result unbounded, a loop whose
back edge is not a jump, no lower bound learnt from a test for zero, a pointer tied to a condition
kept in a stack slot, a value's copy in a stack slot not narrowed by the test of the register it
came from (the fixes say where). Two kernels older than 6.1 are booted too, Ubuntu 22.04's 5.15
(without helpers the programs call) and its HWE 5.19 (with them, but a verifier that gives up on the
pipeline's entry): there the service refuses the data path, and its upgrade, saying which kernel and
what it lacks, and the verifier agrees."""

from __future__ import annotations

import glob
import lzma
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

from bench.kernels import boot, initramfs
from netapp.dataplane.binding import LibraryNotFoundError, find_libdpp, load_libdpp
from tests.utils.kernel import skip_or_fail

# Where `make kernels` (scripts/fetch-kernel) unpacks the kernels no package installs.
KERNELS_CACHE = Path(os.environ.get("KERNELS_CACHE") or
                     Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dpp-netapp" / "kernels")
# Each series booted: where its images are, and what puts them there. An image's modules are beside
# its boot/ directory, in lib/modules/RELEASE/ (/lib/modules for /boot's).
KERNELS = {
    "6.1": ("/boot/vmlinuz-6.1.*", "apt-get install linux-image-amd64"),
    "6.5": (f"{KERNELS_CACHE}/6.5.*/boot/vmlinuz-6.5.*", "make kernels"),
    "6.8": (f"{KERNELS_CACHE}/6.8.*/boot/vmlinuz-6.8.*", "make kernels"),
    "6.11": (f"{KERNELS_CACHE}/6.11.*/boot/vmlinuz-6.11.*", "make kernels"),
    "6.12": (f"{KERNELS_CACHE}/6.12.*/boot/vmlinuz-6.12.*", "make kernels"),
}
# Booted only when asked (DPP_SLOW_KERNELS=1): Ubuntu 22.04's HWE 6.2, whose verifier walks near its
# limit on every load of the pipeline, five to seven minutes a boot under TCG on a shared machine,
# more than CI's time can spare; its image comes from `scripts/fetch-kernel ubuntu 6.2 jammy-updates`.
SLOW_KERNELS = {"6.2": (f"{KERNELS_CACHE}/6.2.*/boot/vmlinuz-6.2.*", "scripts/fetch-kernel ubuntu 6.2 jammy-updates")}
if os.environ.get("DPP_SLOW_KERNELS") == "1":
    KERNELS.update(SLOW_KERNELS)
# The pipeline's knob settings a series' verifier gives up on (past its million instructions), which
# libdpp's settings check must refuse on it too: Ubuntu 22.04's 6.2 with the flow cache and trace.
REFUSED_SETTINGS = {"6.2": {"cfg_flow_cache=1 cfg_trace=1"}}
# Series older than the oldest the data path loads on (6.1, dataplane/src/kernel.c), to be refused.
TOO_OLD = {"5.15": (f"{KERNELS_CACHE}/5.15.*/boot/vmlinuz-5.15.*", "make kernels"),
           "5.19": (f"{KERNELS_CACHE}/5.19.*/boot/vmlinuz-5.19.*", "make kernels")}
# A guest kernel that panicked is booted once more (and the panic shown as a warning): under TCG on a
# loaded machine, Ubuntu's 6.8.0-151 once panicked in the slab allocator's per-CPU cmpxchg16b fast path
# (EFLAGS garbage after it), in a load that four boots on a quiet machine ran through; not the
# programs' doing, which a second boot that panics too would show (each test then fails on it).
GUEST_PANIC = "Kernel panic - not syncing"
BOOT_TIMEOUT = 900  # seconds: the verifier walks every program of the build under TCG, near 2 minutes alone here

# A kernel's one boot happens in its first test's setup, which pytest's default timeout would cut short.
pytestmark = pytest.mark.timeout(BOOT_TIMEOUT + 60)


def _skip_or_fail(reason: str) -> None:
    skip_or_fail(reason, "boot Debian's and Ubuntu's kernels")


def _build() -> Path:
    try:
        return Path(find_libdpp()).parent
    except LibraryNotFoundError as exc:
        _skip_or_fail(f"libdpp is not built: {exc.hint}")
        raise


def _release_order(image: Path) -> list[int | str]:
    """An image's name with its numbers compared as numbers: 6.1.0-57 after 6.1.0-9."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", image.name)]


@pytest.fixture(scope="module", params=list(KERNELS))
def series(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def booted(series: str) -> boot.Boot:
    return _boot(*KERNELS[series])


@pytest.fixture(scope="module", params=list(TOO_OLD))
def old_series(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def too_old(old_series: str) -> boot.Boot:
    return _boot(*TOO_OLD[old_series])


def _boot(pattern: str, install: str) -> boot.Boot:
    """The newest image `pattern` finds, booted with the build (`install` says how to get one)."""
    build = _build()
    images = sorted((Path(path) for path in glob.glob(pattern)), key=_release_order)
    reason = (None if images else f"no {pattern} ({install})") or boot.missing(images[-1:], _modules(images[-1]))
    if reason:
        _skip_or_fail(reason)
    if not (build / "dppctl").exists():
        _skip_or_fail(f"{build}/dppctl is missing: run `make -C dataplane`")
    machine = boot.boot(images[-1], timeout=BOOT_TIMEOUT, build=build, modules=_modules(images[-1]))
    if machine.done or GUEST_PANIC not in machine.console:
        return machine
    warnings.warn(f"{images[-1].name}: the guest kernel panicked, booted once more; its console's end:\n"
                  f"{machine.console[-3000:]}")
    return boot.boot(images[-1], timeout=BOOT_TIMEOUT, build=build, modules=_modules(images[-1]))


def _modules(image: Path) -> Path:
    return image.parent.parent / "lib" / "modules"


def _assert_ran_to_its_end(machine: boot.Boot) -> None:
    assert machine.done, f"{machine.qemu}\n{machine.console[-4000:]}"
    assert machine.btf
    refused = [load for load in machine.loads if not load.loaded and not load.by_dppctl]
    assert machine.loader_exit == len(refused), f"loader exit {machine.loader_exit}; its lines refused {len(refused)}"


def test_the_machine_ran_to_its_end(booted: boot.Boot, series: str) -> None:
    _assert_ran_to_its_end(booted)
    assert booted.release.startswith(f"{series}.")


PIPELINE = ("dpp.bpf.o", "dpp (dppctl attach)")


def _refusals(loads: list[boot.Load]) -> str:
    return "\n".join(f"{load.obj} ({load.setting}) by {load.refused_by}: {load.error}\n  " + "\n  ".join(load.log)
                     for load in loads if not load.loaded)  # fmt: skip


def test_every_object_but_the_pipeline_loads(booted: boot.Boot) -> None:
    others = [load for load in booted.loads if load.obj not in PIPELINE]
    assert others and all(load.loaded for load in others), _refusals(others)


def test_the_pipeline_loads_and_the_service_attaches_it(booted: boot.Boot, series: str) -> None:
    """Under every knob setting but those the series' verifier is known to give up on, which it
    refuses as too large, not otherwise."""
    refused_settings = REFUSED_SETTINGS.get(series, set())
    pipeline = [load for load in booted.loads if load.obj in PIPELINE]
    taken = [load for load in pipeline if load.setting not in refused_settings]
    assert len(pipeline) == 5 and all(load.loaded for load in taken), _refusals(pipeline)
    for load in pipeline:
        if load.setting in refused_settings:
            assert not load.loaded and load.refused_by == "dpp_xdp", _refusals([load]) or load.setting
            assert any("BPF program is too large" in line for line in load.log), load.log[-3:]
    assert any("dpp_xdp (XDP entry)" in line for line in booted.status), booted.status
    assert any("dpp0" in line for line in booted.status), booted.status


def _knobs(setting: str) -> tuple[bool, bool]:
    """(flow cache, trace) of the loader's setting text, e.g. "cfg_flow_cache=1 cfg_trace=0"."""
    knobs = dict(knob.split("=") for knob in setting.split())
    return knobs["cfg_flow_cache"] == "1", knobs["cfg_trace"] == "1"


def test_libdpps_settings_check_refuses_exactly_what_the_verifier_refused(booted: boot.Boot) -> None:
    """dpp_kernel_check_settings, asked of the booted release, against the verifier's answers: no
    setting it would let through to a verifier that gives up, none it refuses that loads."""
    try:
        lib = load_libdpp(str(_build() / "libdpp.so"))
    except LibraryNotFoundError as exc:
        _skip_or_fail(f"libdpp is not built: {exc.hint}")
    pipeline = [load for load in booted.loads if load.obj == "dpp.bpf.o"]
    assert len(pipeline) == 4
    verdicts = {load.setting: (load.loaded, lib.dpp_kernel_check_settings(booted.release.encode(), *_knobs(load.setting)) == 0)
                for load in pipeline}  # fmt: skip
    assert all(loaded == checked for loaded, checked in verdicts.values()), verdicts


def test_the_attached_instance_is_upgraded_in_place_and_counts_on(booted: boot.Boot) -> None:
    """dppctl upgrade of the attached instance (init.sh): new programs under the link, the frames
    counted before kept, the new program counting the two ARP probes sent after it."""
    upgrade = _dppctl_load(booted, "upgrade")
    assert upgrade.loaded, upgrade.log
    ids = re.search(r"instance 'default' upgraded: program id (\d+) -> (\d+)", "\n".join(upgrade.log))
    assert ids and ids[1] != ids[2], upgrade.log
    assert booted.not_ip["before"] >= 2, booted.not_ip
    assert booted.not_ip["after"] >= booted.not_ip["before"] + 2, booted.not_ip


def test_every_object_of_the_build_was_loaded_under_each_knob_setting(booted: boot.Boot) -> None:
    objects = {path.name for path in _build().glob("*.bpf.o")}
    assert {load.obj for load in booted.loads if not load.by_dppctl} == objects
    settings = {load.setting for load in booted.loads if load.obj == "dpp.bpf.o"}
    assert len(settings) == 4  # cfg_trace and cfg_flow_cache, each on and off


# What libdpp says of a kernel older than the oldest it loads on (dataplane/src/kernel.c), by series.
TOO_OLD_REASON = "kernel {release} is older than 6.1, the oldest the data path loads on (before {step}: {lacks})"
LACKS = {"5.15": ("5.18", "no bpf_xdp_load_bytes and bpf_xdp_store_bytes, for the UPF's and ATSSS's copies"),
         "5.19": ("6.1", "no verifier known to take the pipeline's entry: 5.19's gives up past its million "
                         "instructions, 5.18's and 6.0's are untested")}
# 5.15's: the helpers' ids, what its verifier does not know.
LACKED_HELPERS = {189: "bpf_xdp_load_bytes", 190: "bpf_xdp_store_bytes"}


def _too_old_reason(machine: boot.Boot, series: str) -> str:
    step, lacks = LACKS[series]
    return TOO_OLD_REASON.format(release=machine.release, step=step, lacks=lacks)


def _dppctl_load(machine: boot.Boot, setting: str) -> boot.Load:
    loads = [load for load in machine.loads if load.setting == setting]
    assert len(loads) == 1, f"{machine.console[-4000:]}"
    return loads[0]


def test_the_older_machine_ran_to_its_end(too_old: boot.Boot, old_series: str) -> None:
    _assert_ran_to_its_end(too_old)
    assert too_old.release.startswith(f"{old_series}.")


def test_an_older_kernel_is_refused_the_data_path_with_its_version_and_what_it_lacks(too_old: boot.Boot,
                                                                                     old_series: str) -> None:
    """dppctl attach, the service's load: libdpp's check refuses it before any program is loaded."""
    service = _dppctl_load(too_old, "service")
    assert not service.loaded and service.refused_by == "dppctl"
    assert f"dppctl: {_too_old_reason(too_old, old_series)}" in service.log, service.log


def test_an_older_kernel_is_refused_the_upgrade_too(too_old: boot.Boot, old_series: str) -> None:
    """dppctl upgrade of an instance pinned by hand (bench/kernels/stand_in.c): opened from its pins,
    then refused by dpp_upgrade's own check."""
    upgrade = _dppctl_load(too_old, "upgrade")
    assert not upgrade.loaded and upgrade.refused_by == "dppctl", upgrade.log
    assert "dppctl: instance 'default' reused from /sys/fs/bpf/dpp/default" in upgrade.log, upgrade.log
    assert f"dppctl: {_too_old_reason(too_old, old_series)}" in upgrade.log, upgrade.log
    assert any("upgrade instance 'default' (the previous program still runs)" in line for line in upgrade.log)


def test_the_older_verifier_agrees_what_it_refuses_is_what_the_reason_names(too_old: boot.Boot,
                                                                            old_series: str) -> None:
    """The check is no stricter than the kernel: its verifier refuses the pipeline, and every object
    it refuses, for what the reason names: on 5.15 at a helper it lacks, on 5.19 the pipeline's entry
    as too large, every other object taken. Each object is loaded once, every knob 0 (init.sh:
    5.19's verifier spends over a minute on each refusal)."""
    pipeline = [load for load in too_old.loads if load.obj == "dpp.bpf.o"]
    assert len(pipeline) == 1 and not any(load.loaded for load in pipeline)
    assert {load.obj for load in too_old.loads if not load.by_dppctl} == {path.name for path in _build().glob("*.bpf.o")}
    for load in too_old.loads:
        if load.loaded or load.by_dppctl:
            continue
        where = f"{load.obj} ({load.setting}) by {load.refused_by}: {load.log[-3:]}"
        if old_series == "5.19":
            assert load.obj == "dpp.bpf.o" and load.refused_by == "dpp_xdp", where
            assert any("BPF program is too large" in line for line in load.log), where
            continue
        unknown = {int(helper) for line in load.log for helper in re.findall(r"invalid func unknown#(\d+)", line)}
        assert unknown and unknown <= set(LACKED_HELPERS), where


CONSOLE = """\
[    1.0] Run /init as init process
@dpp kernel 6.1.0-57-amd64
@dpp btf yes
@dpp service attached
@dpp status program dpp_xdp
@dpp not-ip before 2
@dpp upgrade done
@dpp log upgrade dppctl: instance 'default' upgraded: program id 9 -> 21
@dpp not-ip after 4
@dpp object xdp_pass.bpf.o: loaded
@dpp program xdp_pass.bpf.o xdp_pass: loaded, 2 instructions verified
@dpp object dpp.bpf.o cfg_trace=1: refused (Invalid argument) by dpp_xdp
@dpp log dpp.bpf.o dpp_xdp: back-edge from insn 10036 to 10037
@dpp loader exit 1
@dpp done
[    9.9] reboot: Power down
"""


def test_the_console_is_read_into_verdicts() -> None:
    """The reading the tests above rely on: a refusal, its program and log, and what loaded."""
    result = boot.parse(CONSOLE, "vmlinuz-test")
    assert (result.release, result.btf, result.done, result.loader_exit) == ("6.1.0-57-amd64", True, True, 1)
    assert result.status == ["program dpp_xdp"]
    assert [(load.obj, load.setting, load.loaded) for load in result.loads] == [
        ("dpp (dppctl attach)", "service", True), ("dpp (dppctl upgrade)", "upgrade", True),
        ("xdp_pass.bpf.o", "", True), ("dpp.bpf.o", "cfg_trace=1", False)]
    assert result.loads[1].log == ["instance 'default' upgraded: program id 9 -> 21"]
    assert result.not_ip == {"before": 2, "after": 4}
    refused = result.refused[0]
    assert (refused.refused_by, refused.error, refused.log) == ("dpp_xdp", "Invalid argument",
                                                               ["back-edge from insn 10036 to 10037"])
    assert result.loads[2].programs == {"xdp_pass": 2}


REFUSED_CONSOLE = """\
@dpp kernel 5.15.0-204-generic
@dpp service refused
@dpp log service dppctl: dppctl: kernel 5.15.0-204-generic is older than 6.1
@dpp upgrade refused
@dpp log upgrade dppctl: dppctl: upgrade instance 'default' (the previous program still runs)
@dpp loader exit 0
@dpp done
"""


def test_a_refused_service_and_upgrade_are_read_apart_from_the_loaders_loads() -> None:
    result = boot.parse(REFUSED_CONSOLE, "vmlinuz-test")
    assert [(load.obj, load.setting, load.loaded, load.refused_by, load.by_dppctl) for load in result.loads] == [
        ("dpp (dppctl attach)", "service", False, "dppctl", True),
        ("dpp (dppctl upgrade)", "upgrade", False, "dppctl", True)]
    assert result.loads[1].log == ["dppctl: upgrade instance 'default' (the previous program still runs)"]


def test_the_newest_image_is_chosen_by_its_numbers_not_its_text() -> None:
    images = [Path("/boot/vmlinuz-6.1.0-57-amd64"), Path("/boot/vmlinuz-6.1.0-9-amd64")]
    assert sorted(images, key=_release_order)[-1].name == "vmlinuz-6.1.0-57-amd64"


def test_an_unpacked_kernel_finds_its_modules_beside_its_boot_directory() -> None:
    assert _modules(Path("/boot/vmlinuz-6.1.0-57-amd64")) == Path("/lib/modules")
    unpacked = KERNELS_CACHE / "6.12.95+deb12-amd64"
    assert _modules(unpacked / "boot" / "vmlinuz-6.12.95+deb12-amd64") == unpacked / "lib" / "modules"


def _compressed(module: bytes, name: str) -> bytes:
    if name.endswith(".xz"):
        return lzma.compress(module)
    if name.endswith(".zst"):
        return subprocess.run(["zstd", "-cq"], input=module, check=True, capture_output=True).stdout
    return module


@pytest.mark.parametrize("name", ["veth.ko", "veth.ko.xz", "veth.ko.zst"])
def test_the_veth_module_is_taken_plain_or_compressed(tmp_path: Path, name: str) -> None:
    """Debian 12's 6.12 ships veth.ko.xz, Ubuntu 24.04's 6.8 veth.ko.zst, Debian 12's 6.1 and Ubuntu
    22.04's kernels veth.ko; busybox's insmod takes a plain one."""
    if name.endswith(".zst") and not shutil.which("zstd"):
        _skip_or_fail("zstd is not installed (apt-get install zstd)")
    module = b"\x7fELF a module"
    directory = tmp_path / "6.12.95+deb12-amd64" / "kernel" / "drivers" / "net"
    directory.mkdir(parents=True)
    (directory / name).write_bytes(_compressed(module, name))

    found = initramfs.veth_module("6.12.95+deb12-amd64", tmp_path)

    assert found == directory / name
    assert initramfs.module_bytes(found) == module
    with pytest.raises(FileNotFoundError, match="veth.ko"):
        initramfs.veth_module("6.1.0-57-amd64", tmp_path)


def test_zstd_is_needed_only_for_a_kernel_whose_veth_module_it_compressed(tmp_path, monkeypatch) -> None:
    """A machine without zstd still boots Debian's kernels; Ubuntu 24.04's wants it, and says so."""
    monkeypatch.setattr(boot.shutil, "which", lambda tool: None if tool == "zstd" else f"/usr/bin/{tool}")
    monkeypatch.setattr(initramfs, "BUSYBOX", tmp_path / "busybox")
    (tmp_path / "busybox").touch()
    for release, module in (("6.1.0-57-amd64", "veth.ko"), ("6.8.0-151-generic", "veth.ko.zst")):
        drivers = tmp_path / "modules" / release / "kernel" / "drivers" / "net"
        drivers.mkdir(parents=True)
        (drivers / module).touch()
    debian, ubuntu = Path("/boot/vmlinuz-6.1.0-57-amd64"), Path("/boot/vmlinuz-6.8.0-151-generic")
    assert boot.missing([debian], tmp_path / "modules") is None
    assert boot.missing([ubuntu], tmp_path / "modules") == "zstd is not installed (apt-get install zstd)"
    assert "veth.ko" in boot.missing([Path("/boot/vmlinuz-6.5.0-45-generic")], tmp_path / "modules")
