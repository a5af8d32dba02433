"""`netapp dataplane unload`: the pinned instance a stopped `netapp serve` leaves behind is detached
from its interfaces and its pins removed, with real XDP on a veth pair in a namespace of its own
(needs root and libdpp: tests/utils/kernel.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from netapp.cli.main import app
from netapp.core.netns import entered
from netapp.dataplane.facade import Dataplane
from tests.utils.kernel import pin_dir, require_kernel, veth_namespace, xdp_program_on
from tests.utils.maps import pinned_instance
from tests.utils.serve import write_settings

VETH, PEER = "dppunl0", "dppunl1"


@pytest.fixture(autouse=True)
def no_settings_from_the_environment(monkeypatch):
    for name in [name for name in os.environ if name.startswith("NETAPP_")]:
        monkeypatch.delenv(name)


def unload(config: Path):
    return CliRunner().invoke(app, ["dataplane", "unload", "--config", str(config)])


def test_given_an_instance_attached_in_a_namespace_when_unload_then_detached_and_no_pins_left(tmp_path):
    require_kernel()
    with veth_namespace("unload", VETH, PEER) as namespace, pinned_instance("unl", namespace) as instance:
        with entered(namespace):
            dataplane = Dataplane.open(instance=instance)
            dataplane.attach(VETH, "generic")
            dataplane.close()  # as `netapp serve` leaves it: closed, pinned, attached
        assert xdp_program_on(namespace, VETH) is not None and pin_dir(instance).is_dir()
        config = write_settings(tmp_path / "settings.yaml", instance=instance, auth_disabled=True)

        result = unload(config)

        assert result.exit_code == 0, result.output
        assert result.stdout.strip() == (
            f"instance '{instance}' unloaded: detached from 1 interface(s), pins removed"
        )
        assert xdp_program_on(namespace, VETH) is None
        assert not pin_dir(instance).exists()


def test_given_no_pinned_instance_when_unload_then_nothing_to_do_and_exit_0(tmp_path):
    config = write_settings(tmp_path / "settings.yaml", instance="unl-never-loaded", auth_disabled=True)

    result = unload(config)

    assert result.exit_code == 0
    assert "instance 'unl-never-loaded' is not loaded" in result.stdout
    assert not pin_dir("unl-never-loaded").exists()


def test_given_a_missing_settings_file_when_unload_then_exit_2_naming_it(tmp_path):
    result = unload(tmp_path / "nope.yaml")

    assert result.exit_code == 2 and "no such file" in result.stderr
