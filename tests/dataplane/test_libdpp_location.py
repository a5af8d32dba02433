"""Where the NetApp finds libdpp ($DPP_LIBDPP, the wheel's copy, the checkout's build, the system),
and the one line it prints when a system library libdpp links (libbpf, libelf) is missing.

A missing system library is simulated with a soname no machine has: removing libbpf1 from this
machine would take the compilers' libbpf-dev with it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap
from typer.testing import CliRunner

from netapp.cli import dataplane as dataplane_cli
from netapp.cli.errors import EXIT_ENVIRONMENT
from netapp.cli.main import app
from netapp.core.config import CONFIG_ENV
from netapp.dataplane import binding
from tests.utils.intents import native_intent

ABSENT = {"libdpp-test-absent.so.9": "libdpp-test-absent9"}
ABSENT_LINE = (
    "libdpp needs libdpp-test-absent.so.9 (Debian/Ubuntu package libdpp-test-absent9): not found; "
    "apt-get install libdpp-test-absent9"
)


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A wheel's lib/ folder and a checkout's build, both empty until a test puts libdpp.so there."""
    monkeypatch.delenv(binding.LIBDPP_ENV, raising=False)
    packaged, built = tmp_path / "site" / "lib", tmp_path / "checkout" / "build"
    packaged.mkdir(parents=True)
    built.mkdir(parents=True)
    monkeypatch.setattr(binding, "PACKAGED_LIB_DIR", packaged)
    monkeypatch.setattr(binding, "repo_libdpp_path", lambda: built / "libdpp.so")
    monkeypatch.setattr(binding.ctypes.util, "find_library", lambda name: None)
    return {"packaged": packaged / "libdpp.so", "built": built / "libdpp.so", "env": tmp_path / "mine.so"}


def test_given_a_wheel_and_a_checkout_build_then_the_wheels_copy_is_found(places):
    places["packaged"].write_bytes(b"")
    places["built"].write_bytes(b"")
    assert binding.find_libdpp() == str(places["packaged"])


def test_given_no_wheel_copy_then_the_checkout_build_is_found(places):
    places["built"].write_bytes(b"")
    assert binding.find_libdpp() == str(places["built"])


def test_given_dpp_libdpp_then_it_wins_over_the_wheels_copy(places, monkeypatch):
    places["packaged"].write_bytes(b"")
    places["env"].write_bytes(b"")
    monkeypatch.setenv(binding.LIBDPP_ENV, str(places["env"]))
    assert binding.find_libdpp() == str(places["env"])


def test_given_nothing_anywhere_then_the_error_names_every_place(places):
    with pytest.raises(binding.LibraryNotFoundError) as raised:
        binding.find_libdpp()
    assert str(places["packaged"].parent) in str(raised.value)
    assert str(places["built"]) in str(raised.value)


def test_the_system_libraries_libdpp_links_load_here():
    binding.check_system_libraries()  # libbpf1 and libelf1: installed with the build's -dev packages


def test_given_a_missing_system_library_then_one_line_names_it_and_its_package():
    with pytest.raises(binding.SystemLibraryMissing) as raised:
        binding.check_system_libraries({"libelf.so.1": "libelf1", **ABSENT})
    assert str(raised.value) == ABSENT_LINE
    assert isinstance(raised.value, binding.LibraryNotFoundError)


def test_given_a_missing_system_library_then_loading_libdpp_says_so_before_trying(tmp_path, monkeypatch):
    monkeypatch.setattr(binding, "SYSTEM_LIBRARIES", ABSENT)
    never_loaded = tmp_path / "libdpp.so"
    never_loaded.write_bytes(b"not a library")  # loading it would fail with another message
    with pytest.raises(binding.SystemLibraryMissing):
        binding.Libdpp(str(never_loaded))


def test_given_a_missing_system_library_when_serving_then_exit_3_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(binding, "SYSTEM_LIBRARIES", ABSENT)
    for name in [name for name in os.environ if name.startswith("NETAPP_")]:
        monkeypatch.delenv(name)
    config = tmp_path / "netapp.yaml"
    config.write_text(f"state_dir: {tmp_path / 'state'}\nauth_disabled: true\n")
    try:
        result = CliRunner().invoke(app, ["serve", "--config", str(config)])
    finally:
        os.environ.pop(CONFIG_ENV, None)  # serve --config names the file in this process's environment
    assert result.exit_code == EXIT_ENVIRONMENT
    assert result.stderr.strip() == f"netapp: {ABSENT_LINE}"
    assert not (tmp_path / "state").exists()  # stopped before the service opened its store


def test_given_a_missing_system_library_when_replaying_then_exit_3_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(binding, "SYSTEM_LIBRARIES", ABSENT)
    monkeypatch.setattr(dataplane_cli, "host_interfaces", lambda: {"lo": 1})
    monkeypatch.setattr(dataplane_cli.os, "geteuid", lambda: 0)
    # A path of this test only: load_libdpp keeps what it loaded, by path, for the process.
    lib = tmp_path / "libdpp.so"
    lib.write_bytes(b"")
    monkeypatch.setenv(binding.LIBDPP_ENV, str(lib))
    intents, pcap = tmp_path / "i.json", tmp_path / "in.pcap"
    intents.write_text(json.dumps(native_intent()))
    wrpcap(str(pcap), [Ether()])
    result = CliRunner().invoke(app, ["dataplane", "replay", "--intents", str(intents), str(pcap)])
    assert result.exit_code == EXIT_ENVIRONMENT
    assert result.stderr.strip() == f"netapp: {ABSENT_LINE}"
