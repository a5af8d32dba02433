"""`netapp serve` with `pfcp.address`: the settings checked, and a real process answering PFCP."""

from __future__ import annotations

import signal
import socket
import ssl
import subprocess
import sys

import pytest
import yaml

from netapp.core.config import load_settings, pfcp_bind
from netapp.telemetry.loopback import free_loopback_port
from netapp.upf.pfcp.ies import Cause
from tests.cli.test_serve import REPO, START_TIMEOUT_S, free_port, instance, wait_until_ready  # noqa: F401
from tests.upf.smf import Smf, cause, node_id, recovery


def test_the_pfcp_address_takes_a_host_and_an_optional_port():
    assert pfcp_bind("127.0.0.1") == ("127.0.0.1", 8805)
    assert pfcp_bind("10.0.0.1:9000") == ("10.0.0.1", 9000)
    assert pfcp_bind("[::1]:8806") == ("::1", 8806)
    assert load_settings(auth_disabled=True).pfcp.address is None, "off by default"


@pytest.mark.parametrize(
    "pfcp, says",
    [
        ({"address": "smf.example:8805"}, "an IP address"),
        ({"address": "127.0.0.1:99999"}, "the port is 0..65535"),
        ({"address": "0.0.0.0"}, "pfcp.n3_ipv4 or pfcp.n3_ipv6: required"),
        ({"address": "127.0.0.1"}, "pfcp.peers: required with pfcp.address"),
        ({"address": "127.0.0.1", "peers": ["10.40.0.1/24"]}, "'10.40.0.1/24': an address or a prefix without host bits"),
        ({"address": "127.0.0.1", "peers": [{"prefix": "smf.example"}]}, "'smf.example': an address or a prefix"),
    ],
)
def test_a_bad_pfcp_setting_is_refused_naming_it(pfcp, says):
    with pytest.raises(ValueError) as refused:
        load_settings(auth_disabled=True, pfcp=pfcp, upf={"peer_networks": ["0.0.0.0/0"]})
    assert says in str(refused.value)


def test_with_pfcp_the_networks_gtpu_may_go_to_must_be_named():
    with pytest.raises(ValueError, match="upf.peer_networks: required with pfcp.address"):
        load_settings(auth_disabled=True, pfcp={"address": "127.0.0.1", "peers": ["127.0.0.1"]})
    with pytest.raises(ValueError, match="'10.31.0.1/16': an address or a prefix without host bits"):
        load_settings(auth_disabled=True, upf={"peer_networks": ["10.31.0.1/16"]})
    settings = load_settings(auth_disabled=True, pfcp={"address": "127.0.0.1", "peers": [
        "10.40.0.2", {"prefix": "10.41.0.0/24", "node_ids": ["smf1.example"]}]}, upf={"peer_networks": []})
    assert [(peer.prefix, peer.node_ids) for peer in settings.pfcp.peers] == [
        ("10.40.0.2/32", []), ("10.41.0.0/24", ["smf1.example"])]
    assert settings.upf.peer_networks == [], "explicitly none: every FAR with outer header creation is refused"
    assert load_settings(auth_disabled=True).upf.peer_networks is None, "without PFCP it is not needed"


def _free_udp_port() -> int:
    return free_loopback_port(socket.SOCK_DGRAM)


def test_serve_answers_pfcp_on_its_address(tmp_path, instance):  # noqa: F811
    pfcp_port, api_port = _free_udp_port(), free_port()
    config = tmp_path / "netapp.yaml"
    config.write_text(yaml.safe_dump({
        "state_dir": str(tmp_path / "state"),
        "instance": instance,
        "max_rules": 4096,
        "auth_disabled": True,
        "telemetry": {"enabled": False},
        "liveness": {"enabled": False},
        "pfcp": {"address": f"127.0.0.1:{pfcp_port}", "n3_ipv4": "127.0.0.2", "peers": ["127.0.0.1"]},
        "upf": {"peer_networks": ["127.0.0.0/8"]},
    }))
    process = subprocess.Popen(
        [sys.executable, "-m", "netapp.cli.main", "serve", "--config", str(config), "--port", str(api_port)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    smf = Smf(("127.0.0.1", pfcp_port))
    try:
        wait_until_ready(f"http://127.0.0.1:{api_port}", ssl.create_default_context(), process)
        setup = smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=START_TIMEOUT_S)
    finally:
        smf.close()
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert cause(setup) == Cause.REQUEST_ACCEPTED
    assert process.returncode == 0, stderr
    assert f"PFCP: serving on 127.0.0.1 port {pfcp_port}" in stderr
