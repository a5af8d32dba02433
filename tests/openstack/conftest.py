"""A recorded OpenStack per test (tests/openstack/fake_cloud.py) and the CLI run against it."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest
from typer.testing import CliRunner, Result

from tests.openstack.fake_cloud import FakeCloud

SERVER_ARGS = ("--server", "dpp-netapp-1", "--mgmt-network", "mgmt")


@pytest.fixture
def cloud(request: pytest.FixtureRequest) -> Iterator[FakeCloud]:
    """The scenario a test names with @pytest.mark.parametrize("cloud", [...], indirect=True); "met" else."""
    pytest.importorskip("openstack", reason="openstacksdk is not installed (pip install -e '.[test]')")
    with FakeCloud(getattr(request, "param", "met")) as fake:
        yield fake
    assert not fake.unknown, f"requests no recorded service answers: {fake.unknown}"


@pytest.fixture
def netapp(cloud: FakeCloud, tmp_path: Path) -> Callable[..., Result]:
    """`netapp openstack <args>` with the fake cloud's clouds.yaml."""
    from netapp.cli.main import app

    clouds = cloud.clouds_yaml(tmp_path / "clouds.yaml")

    def run(*args: str, password: str | None = None) -> Result:
        if password is not None:
            cloud.clouds_yaml(clouds, password=password)
        return CliRunner().invoke(app, ["openstack", *args, "--cloud", "edge", "--clouds-file", str(clouds)])

    return run
