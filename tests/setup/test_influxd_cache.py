"""scripts/influxd, the InfluxDB that `make demo` and `make test` link into .tools/bin: built once
into a cache outside the clone, reused by every clone after a check, rebuilt when the check fails.

A stand-in `go` first on PATH "builds" a two-line influxd that says the version the build stamped
into it, and notes each build in a log, so these tests take no minute and no network."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import pytest

from tests.setup.stand_ins import on_path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "influxd"
VERSION = "v1.8.10"
ENTRY = f"influxd-1.8.10-{platform.system().lower()}-{platform.machine()}"

# `go install -ldflags "-X main.version=V" PKG@vV`, as scripts/influxd calls it; FAKE_GO_STAMP=no
# leaves the version out, as a plain `go install` does.
FAKE_GO = """#!/bin/sh
if [ "$1" = version ]; then echo "go version go1.19.8 linux/amd64"; exit 0; fi
echo "$*" >> "$FAKE_GO_LOG"
version=$(echo "$3" | sed 's/.*main.version=\\([^ ]*\\).*/\\1/')
[ "$FAKE_GO_STAMP" = no ] && version=unknown
printf '#!/bin/sh\\necho "InfluxDB v%s (git: unknown unknown)"\\n' "$version" > "$GOBIN/influxd"
chmod +x "$GOBIN/influxd"
"""


class Setup:
    def __init__(self, tmp_path: Path):
        self.cache = tmp_path / "cache"
        self.builds = tmp_path / "builds.log"
        self.env = {
            **on_path(tmp_path / "go-bin", {"go": FAKE_GO}),
            "INFLUXD_CACHE": str(self.cache),
            "FAKE_GO_LOG": str(self.builds),
            "FAKE_GO_STAMP": "yes",
        }

    def run(self, link: Path, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SCRIPT), VERSION, str(link)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**self.env, **env},
            cwd=cwd,
        )

    def build_count(self) -> int:
        return len(self.builds.read_text().splitlines()) if self.builds.exists() else 0


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_the_first_clone_builds_into_the_cache_and_links_to_it(setup: Setup, tmp_path: Path):
    link = tmp_path / "clone" / ".tools" / "bin" / "influxd"

    result = setup.run(link)

    assert result.returncode == 0, result.stderr
    cached = setup.cache / ENTRY / "influxd"
    assert link.is_symlink() and link.resolve() == cached
    assert subprocess.run([link, "version"], capture_output=True, text=True).stdout.startswith("InfluxDB v1.8.10 ")
    assert (setup.cache / ENTRY / "built-with").read_text() == "built with go1.19.8 linux/amd64\n"
    assert setup.build_count() == 1
    assert f"building InfluxDB v1.8.10 into {setup.cache / ENTRY}" in result.stdout
    assert [p.name for p in setup.cache.iterdir()] == [ENTRY]  # no build directory left behind


def test_a_second_clone_and_a_cleaned_one_reuse_the_cached_build(setup: Setup, tmp_path: Path):
    first = tmp_path / "first" / "influxd"
    second = tmp_path / "second" / "influxd"
    setup.run(first)

    again = setup.run(second)
    first.unlink()  # make clean
    cleaned = setup.run(first)

    assert again.returncode == cleaned.returncode == 0
    assert first.resolve() == second.resolve() == setup.cache / ENTRY / "influxd"
    assert setup.build_count() == 1
    assert again.stdout == f"{second} -> {setup.cache / ENTRY / 'influxd'} (built with go1.19.8 linux/amd64)\n"


def test_a_cached_binary_that_fails_the_check_is_built_again(setup: Setup, tmp_path: Path):
    link = tmp_path / "influxd"
    setup.run(link, FAKE_GO_STAMP="no")  # an unstamped build: it says "vunknown" and is refused
    assert not link.exists()
    (setup.cache / ENTRY).mkdir()
    (setup.cache / ENTRY / "influxd").write_text("half a binary")  # an interrupted copy

    result = setup.run(link)

    assert result.returncode == 0, result.stderr
    assert subprocess.run([link, "version"], capture_output=True, text=True).stdout.startswith("InfluxDB v1.8.10 ")
    assert setup.build_count() == 2


def test_a_build_that_does_not_say_its_version_is_refused_and_not_cached(setup: Setup, tmp_path: Path):
    link = tmp_path / "influxd"

    result = setup.run(link, FAKE_GO_STAMP="no")

    assert result.returncode == 1
    assert "does not say it is v1.8.10: InfluxDB vunknown (git: unknown unknown)" in result.stderr
    assert not link.exists() and list(setup.cache.iterdir()) == []


def test_a_cache_given_as_a_relative_path_gets_a_link_that_works_from_anywhere(setup: Setup, tmp_path: Path):
    link = tmp_path / "clone" / "influxd"

    result = setup.run(link, cwd=tmp_path, INFLUXD_CACHE="cache")

    assert result.returncode == 0, result.stderr
    assert Path(os.readlink(link)) == setup.cache / ENTRY / "influxd"
