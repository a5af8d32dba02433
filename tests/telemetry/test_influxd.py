"""LocalInfluxd: a local influxd on loopback only, restartable over its data, and clear errors when
the binary is missing or the server cannot start."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from netapp.telemetry import influxd as influxd_module
from netapp.telemetry.influxd import InfluxdError, InfluxdNotFoundError, LocalInfluxd, find_influxd
from tests.utils.influxd import require_influxd, write_lines

LISTEN = "0A"  # TCP state in /proc/net/tcp


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket the process listens on, IPv4 and IPv6."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == LISTEN and inode in inodes:
                found.add(_decode_address(local, family))
    return found


def _decode_address(text: str, family: int) -> tuple[str, int]:
    """/proc/net/tcp's "0100007F:1F90": the address in host-order 32-bit words, then the port."""
    address, port = text.split(":")
    raw = b"".join(bytes.fromhex(address[i : i + 8])[::-1] for i in range(0, len(address), 8))
    return socket.inet_ntop(family, raw), int(port, 16)


def test_it_listens_on_loopback_only(influxd):
    addresses = listening_addresses(influxd.pid)

    assert {address for address, _ in addresses} == {"127.0.0.1"}
    assert {port for _, port in addresses} == {influxd.port, influxd.rpc_port}


def test_a_restart_keeps_its_port_and_its_data(tmp_path):
    server = LocalInfluxd(tmp_path / "influxd", binary=require_influxd(), flux=False).start()
    try:
        server.create_database("kept")
        write_lines(server, "kept", "m,t=a v=1i 1750000000000000000")
        url = server.url

        server.restart()

        assert server.url == url
        answer = server.query("SELECT v FROM m", db="kept")
        assert answer["results"][0]["series"][0]["values"] == [[1750000000000000000, 1]]
    finally:
        server.stop()
    assert not server.running


def test_a_server_that_cannot_start_says_why_from_its_log(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = LocalInfluxd(tmp_path / "influxd", port=port, binary=require_influxd(), flux=False)

        with pytest.raises(InfluxdError, match="address already in use"):
            server.start(timeout_s=10)

    assert not server.running


def test_a_missing_binary_names_the_make_target(tmp_path, monkeypatch):
    monkeypatch.delenv("INFLUXD", raising=False)
    monkeypatch.setattr(influxd_module, "BUNDLED_INFLUXD", tmp_path / "absent")
    monkeypatch.setenv("PATH", str(tmp_path))

    with pytest.raises(InfluxdNotFoundError, match="make influxd"):
        find_influxd()


def test_influxd_from_the_environment_wins_and_must_exist(tmp_path, monkeypatch):
    monkeypatch.setenv("INFLUXD", str(tmp_path / "absent"))

    with pytest.raises(InfluxdNotFoundError, match="INFLUXD="):
        find_influxd()
