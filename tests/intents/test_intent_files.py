"""Intents files (JSON, YAML) and how `netapp dataplane replay` reports a bad one: one line, exit 2."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from netapp.cli import dataplane as dataplane_cli
from netapp.cli.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT
from netapp.cli.main import app
from netapp.intents.errors import IntentError
from netapp.intents.loader import load_document
from tests.utils.intents import native_intent, paper_message

runner = CliRunner()

YAML_DOCUMENT = """
intents:
  - id: video
    match: {protocol: udp, dst_port: 5004}
    action: {type: steer, cpu: 1}
cpus:
  - cpu: 1
default_verdict: drop
"""


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_given_json_then_loaded(tmp_path):
    document = load_document(write(tmp_path, "i.json", [native_intent(), paper_message()]))
    assert [intent.id for intent in document.intents] == ["video-prio", "legacy-e918d704"]


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_given_yaml_then_loaded(tmp_path, suffix):
    document = load_document(write(tmp_path, "i" + suffix, YAML_DOCUMENT))
    assert ([i.id for i in document.intents], document.default_verdict) == (["video"], "drop")


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("bad.json", "{", "not valid JSON"),
        ("bad.yaml", "a: [", "not valid YAML"),
        ("bad.json", json.dumps(native_intent(match={"vlan": 5000})), "match.vlan"),
    ],
)
def test_given_a_bad_file_then_one_line_names_the_problem(tmp_path, name, content, words):
    with pytest.raises(IntentError) as caught:
        load_document(write(tmp_path, name, content))
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_given_a_missing_file_then_it_is_named(tmp_path):
    with pytest.raises(IntentError, match="cannot read"):
        load_document(tmp_path / "absent.json")


def replay(tmp_path, intents, *extra):
    pcap = tmp_path / "in.pcap"
    pcap.write_bytes(b"")
    return runner.invoke(app, ["dataplane", "replay", "--intents", str(intents), str(pcap), *extra])


def test_given_a_bad_intent_when_replaying_then_one_line_naming_the_field_and_exit_2(tmp_path):
    bad = paper_message()
    bad["Resources"][0]["encapsulationID1"] = "01000000"
    result = replay(tmp_path, write(tmp_path, "bad.json", bad))
    assert result.exit_code == EXIT_BAD_INPUT
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Resources[0].encapsulationID1" in lines[0], result.output


def test_given_an_unknown_interface_when_replaying_then_it_is_named_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setattr(dataplane_cli, "host_interfaces", lambda: {"lo": 1})
    result = replay(tmp_path, write(tmp_path, "i.json", native_intent(match={"interface": "eth0"})))
    assert result.exit_code == EXIT_BAD_INPUT
    assert "match.interface" in result.output and "known: lo" in result.output


def test_given_no_root_when_replaying_then_it_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(dataplane_cli, "host_interfaces", lambda: {"lo": 1})
    monkeypatch.setattr(dataplane_cli.os, "geteuid", lambda: 1000)
    pcap = tmp_path / "in.pcap"
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    wrpcap(str(pcap), [Ether()])
    intents = write(tmp_path, "i.json", native_intent())
    result = runner.invoke(app, ["dataplane", "replay", "--intents", str(intents), str(pcap)])
    assert result.exit_code == EXIT_ENVIRONMENT
    assert result.output.strip() == "netapp: replay needs root (BPF_PROG_TEST_RUN)"


def test_given_an_unreadable_pcap_when_replaying_then_exit_2(tmp_path, monkeypatch):
    monkeypatch.setattr(dataplane_cli, "host_interfaces", lambda: {"lo": 1})
    intents = write(tmp_path, "i.json", native_intent())
    pcap = write(tmp_path, "not.pcap", "this is not a capture")
    result = runner.invoke(app, ["dataplane", "replay", "--intents", str(intents), str(pcap)])
    assert result.exit_code == EXIT_BAD_INPUT
    assert "cannot read packets" in result.output


def test_given_no_libdpp_when_replaying_then_it_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setattr(dataplane_cli, "host_interfaces", lambda: {"lo": 1})
    monkeypatch.setattr(dataplane_cli.os, "geteuid", lambda: 0)
    monkeypatch.setenv("DPP_LIBDPP", str(tmp_path / "absent" / "libdpp.so"))
    pcap = tmp_path / "in.pcap"
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    wrpcap(str(pcap), [Ether()])
    result = runner.invoke(
        app, ["dataplane", "replay", "--intents", str(write(tmp_path, "i.json", native_intent())), str(pcap)]
    )
    assert result.exit_code == EXIT_ENVIRONMENT
    assert "DPP_LIBDPP" in result.output and len(result.output.strip().splitlines()) == 1
