"""The packed charm holds what charmcraft packs for a machine charm: dispatch and the mandatory
hooks (executable), metadata/config/actions generated from charmcraft.yaml, manifest.yaml with
the base, the sources, and a venv from which the dependencies import; and, ours, the VNF
package's AppD where the charm's apply-appd looks for it."""

from __future__ import annotations

import re
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

from netapp.packaging.charm import APPD_FILE, DISPATCH, MANDATORY_HOOKS, build_charm
from netapp.packaging.errors import PackagingError
from tests.packaging.fake_juju import base_python
from tests.packaging.helpers import (
    APPD_SOURCE,
    CHARM_ROOT,
    RUNNING_PLATFORM,
    build_test_charm,
    quiet,
)


def _mode(archive: zipfile.ZipFile, name: str) -> int:
    return (archive.getinfo(name).external_attr >> 16) & 0o777


def _yaml(archive: zipfile.ZipFile, name: str) -> dict:
    return yaml.safe_load(archive.read(name))


def test_dispatch_is_charmcrafts_script_and_executable(charm_archive):
    with zipfile.ZipFile(charm_archive) as archive:
        assert archive.read("dispatch").decode() == DISPATCH
        assert "PYTHONPATH=lib:venv" in DISPATCH and "exec ./src/charm.py" in DISPATCH
        assert _mode(archive, "dispatch") == 0o755
        assert _mode(archive, "src/charm.py") == 0o755


def test_mandatory_hooks_are_executable_copies_of_dispatch(charm_archive):
    with zipfile.ZipFile(charm_archive) as archive:
        for hook in MANDATORY_HOOKS:
            info = archive.getinfo(f"hooks/{hook}")
            assert stat.S_ISREG(info.external_attr >> 16)
            assert _mode(archive, f"hooks/{hook}") == 0o755
            assert archive.read(info) == archive.read("dispatch")


def test_metadata_config_actions_equal_charmcraft_yaml_sections(charm_archive, charmcraft):
    with zipfile.ZipFile(charm_archive) as archive:
        assert _yaml(archive, "config.yaml") == charmcraft["config"]
        assert _yaml(archive, "actions.yaml") == charmcraft["actions"]
        meta = _yaml(archive, "metadata.yaml")
    assert meta["name"] == charmcraft["name"] == "dpp-netapp"
    assert meta["display-name"] == charmcraft["title"]
    assert (meta["summary"], meta["description"]) == (charmcraft["summary"], charmcraft["description"])
    for relations in ("provides", "requires", "peers"):
        assert meta.get(relations) == charmcraft.get(relations)
    assert not {"type", "base", "platforms", "parts", "config", "actions", "title"} & set(meta)


def test_manifest_names_the_base_juju_deploys_on(charm_archive):
    with zipfile.ZipFile(charm_archive) as archive:
        manifest = _yaml(archive, "manifest.yaml")
    assert manifest["bases"] == [{"name": "ubuntu", "channel": "24.04", "architectures": ["amd64"]}]
    assert {"name": "framework", "result": "operator"} in manifest["analysis"]["attributes"]


def test_sources_are_packed_and_build_leftovers_are_not(charm_archive):
    with zipfile.ZipFile(charm_archive) as archive:
        names = archive.namelist()
    sources = sorted(p.relative_to(CHARM_ROOT).as_posix() for p in (CHARM_ROOT / "src").glob("*.py"))
    assert sources and set(sources) <= set(names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or "/." in f"/{n}"]
    assert not [n for n in names if n.startswith("venv/bin/")], "console scripts name this machine's python"
    assert names == sorted(names)


def test_the_charm_carries_the_appd_source_where_its_apply_appd_reads_it(charm_archive):
    """The file's bytes as in vnfd/ (copied at build time, no second copy in git), under the name
    the charm's code reads (netapp_workload.SHIPPED_APPD; its sources do not import here)."""
    workload = (CHARM_ROOT / "src" / "netapp_workload.py").read_text()
    assert re.search(r'^SHIPPED_APPD = "(.+)"$', workload, re.MULTILINE)[1] == APPD_FILE
    with zipfile.ZipFile(charm_archive) as archive:
        assert archive.read(APPD_FILE) == APPD_SOURCE.read_bytes()
    assert not (CHARM_ROOT / APPD_FILE).exists()


def test_venv_holds_the_requirements_and_they_import_from_it(charm_dir):
    """The base interpreter without site-packages (-S), as dispatch sets PYTHONPATH: every
    requirement must come from the charm's own venv/."""
    code = (
        "import httpx, ops, pydantic, pydantic_core, yaml\n"
        "for m in (httpx, ops, pydantic, pydantic_core, yaml): print(m.__file__)\n"
    )
    done = subprocess.run(
        [base_python(), "-S", "-c", code],
        cwd=charm_dir,
        env={"PYTHONPATH": "lib:venv", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    files = [Path(line) for line in done.stdout.split()]
    assert len(files) == 5
    assert all(path.resolve().is_relative_to(charm_dir / "venv") for path in files), files


def test_two_builds_give_identical_charms(charm_archive, wheelhouse, tmp_path):
    again = build_test_charm(tmp_path / "again.charm", wheelhouse.folder)
    assert again.read_bytes() == charm_archive.read_bytes()


def test_a_malformed_python_version_is_refused_before_pip_runs(tmp_path):
    with pytest.raises(PackagingError, match=r"'3\.x' is not of the form 3\.X"):
        build_charm(CHARM_ROOT, tmp_path / "c.charm", "3.x", RUNNING_PLATFORM, log=quiet)
    assert not (tmp_path / "c.charm").exists()
