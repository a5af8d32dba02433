"""What `make demo` and `make test` install (read from `make -n`, which runs nothing but the data
plane's up-to-date check), and that the demo's lean install is enough for the package."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PIP_INSTALL = re.compile(r'pip install -e "([^"]*)"')


def dry_run(target: str) -> str:
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", target], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def extra_modules() -> set[str]:
    """The top-level modules of the test and bench extras (pyproject.toml), by distribution name."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {re.split(r"[\[<>=!~ ]", requirement)[0].replace("-", "_") for group in extras.values() for requirement in group}


def test_the_demo_installs_the_package_without_its_extras():
    assert PIP_INSTALL.findall(dry_run("demo")) == ["."]


def test_the_tests_install_the_test_extra():
    assert PIP_INSTALL.findall(dry_run("test")) == [".[test]"]


@pytest.mark.parametrize("target, last, steps", [("demo", "netapp demo", 5), ("test", "-m pytest", 6)])
def test_setup_steps_are_numbered_in_the_order_they_run(target: str, last: str, steps: int):
    script = dry_run(target)

    numbers = list(dict.fromkeys(re.findall(r"scripts/step -n (\d/\d)", script)))

    assert numbers == [f"{step}/{steps}" for step in range(1, steps + 1)]
    assert last in script.rstrip().splitlines()[-1]


TEST_ONLY_PACKAGES = ("tshark", "qemu-system-x86", "busybox-static", "linux-image-amd64", "zstd")


def debian_packages(target: str) -> list[str]:
    """The Debian packages `make TARGET` checks for and installs (system-deps' loop, as `make -n` prints it)."""
    loops = re.findall(r"for p in ([^;]*); do", dry_run(target))
    assert len(loops) == 1, loops
    return loops[0].split()


def test_the_tests_install_their_own_debian_packages_and_the_demo_does_not():
    demo, tests = debian_packages("demo"), debian_packages("test")

    assert not set(TEST_ONLY_PACKAGES) & set(demo)
    assert set(TEST_ONLY_PACKAGES) <= set(tests)
    assert set(demo) <= set(tests)  # the tests build and serve what the demo does
    assert {"clang", "prometheus"} <= set(demo)


def test_the_tests_fetch_the_kernels_they_boot_and_the_demo_does_not():
    """tests/dataplane/test_old_kernel.py boots Debian 12's 6.12 and four of Ubuntu's too; the demo
    has no use for them."""
    tests = dry_run("test")
    for kernel in ("debian 6.12 bookworm-backports", "ubuntu 6.8 noble-updates", "ubuntu 6.5 jammy-updates",
                   "ubuntu 5.15 jammy-updates", "ubuntu 5.19 jammy-updates"):
        assert f'"{kernel}"' in tests
    assert "scripts/fetch-kernel $kernel" in tests
    assert "fetch-kernel" not in dry_run("demo")


def test_every_module_of_the_package_imports_without_the_extras():
    """The demo's install has the runtime dependencies only: nothing in netapp may need an extra."""
    blocked = sorted(extra_modules())
    probe = f"""
import importlib, importlib.abc, pkgutil, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (an extra)", name=name)
sys.meta_path.insert(0, Absent())
import netapp
for module in pkgutil.walk_packages(netapp.__path__, "netapp."):
    importlib.import_module(module.name)
"""
    assert {"pytest", "hypothesis", "matplotlib", "ops"} <= set(blocked)

    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)

    assert result.returncode == 0, result.stderr


def test_missing_debian_packages_are_named_and_installed(tmp_path: Path):
    apt_log = tmp_path / "apt-get.log"
    fake = tmp_path / "bin" / "apt-get"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$*" >> {apt_log}\necho "apt-get $1"\n')
    fake.chmod(0o755)

    result = subprocess.run(
        ["make", "--no-print-directory", "system-deps", "STEPS=5", "APT_PACKAGES=procps dpp-not-a-package no-such-one"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"},
    )

    assert result.returncode == 0, result.stderr
    assert apt_log.read_text().splitlines() == ["-q update", "-q install -y dpp-not-a-package no-such-one"]
    lines = result.stdout.splitlines()
    assert lines[0] == "[1/5] installing Debian packages: dpp-not-a-package no-such-one (a few minutes, once)..."
    assert lines[1:3] == ["apt-get -q", "apt-get -q"]
    assert re.fullmatch(r"\[1/5\] installing Debian packages: dpp-not-a-package no-such-one: done in \d+ s", lines[3])


def dataplane_dry_run(*variables: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", "dataplane", *variables],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )


def test_the_data_path_is_refused_for_an_architecture_its_clock_word_is_not_ordered_on():
    """The policers' clock word's order holds on x86-64 only (dataplane/bpf/nf/qos/clock.h)."""
    assert dataplane_dry_run().returncode == 0
    refused = dataplane_dry_run("MULTIARCH=aarch64-linux-gnu")

    assert refused.returncode != 0
    assert "x86-64 only" in refused.stderr and "clock.h" in refused.stderr, refused.stderr
