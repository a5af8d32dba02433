"""The VNF package brings up a working NetApp on a machine that has only the package: what a VM
instantiated from dpp-netapp_vnf.tar.gz does, here, end to end.

The package is built once per session (conftest.py) and extracted to a temporary folder. The
charm inside it then runs its own code (tests/packaging/vm_tools/charm_driver.py, with the
charm's venv, its dispatch's PYTHONPATH and the base interpreter with -S: no source tree is on
any path) against a fresh root directory, in a network namespace of its own that has loopback and
the data-plane interface `n3` only, so pip's --no-index install from the charm's wheels/ is the
only way the NetApp can arrive. What differs from a VM:

* systemd does not run here: `systemctl` is a small process supervisor
  (vm_tools/systemctl.py) that starts the rendered unit's ExecStart with its Environment, the
  machine's paths moved under the root directory, and a bpffs instance name of this test only;
* `apt-get` does not reach a mirror: a stand-in checks that the packages the charm asks for are
  installed on this machine (the Makefile's Debian packages bring them) and installs nothing;
* `python3` is the interpreter of this test environment, whose version the wheels were built for.

Then, as OSM would: the VNFD's initial config primitives (day 1: three `config` steps,
`reload-dataplane`, then `apply-appd`, which onboards the AppD the charm carries) with
instantiation parameters for this namespace, none of them an AppD; one day-2 action,
add-intent through the charm's handler, and the intent's frames counted and steered to a CPU of
the steering set the day-1 `steer-cpus` option made (nothing set through the REST API by hand).
The installed version, the wheel's SHA-256 in the charm and the VNFD's software-version agree.

Needs root and network namespaces (skipped with the reason outside CI, a failure under CI).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from netapp.packaging.wheels import REQUIREMENTS_FILE, SHA256SUMS_FILE, read_requirements, sha256_of
from netapp.testbed import netns
from netapp.testbed.traffic import Sender
from tests.packaging.fake_juju import base_python
from tests.packaging.helpers import unpack
from tests.packaging.vm_tools.systemctl import Unit
from tests.utils.kernel import require_kernel
from tests.utils.maps import pinned_instance

TOOLS = Path(__file__).resolve().parent / "vm_tools"
CHARM = "dpp-netapp"
N3, RAN = "n3", "ran0"
STEP_TIMEOUT_S = 300  # the install: a venv and some 35 wheels on two busy cores
COUNT_TIMEOUT_S = 10.0
FRAMES = 40
STEER_CPU = min(1, (os.cpu_count() or 1) - 1)  # the day-2 intent steers here: in steer-cpus on day 1
# The instantiation parameters (vnfd/README.md) for this machine: the API and metrics listener on
# the namespace's loopback, so no TLS; no InfluxDB; no alternative-node network.
PARAMS = {
    "dataplane_interfaces": N3,
    "xdp_mode": "native",
    "dataplane_cpus": "",
    "dataplane_steer_cpus": str(STEER_CPU),
    "alt_interface": "",
    "rw_mgmt_ip": "127.0.0.1",
    "api_tls_cert": "",
    "api_tls_key_secret": "",
    "influxdb_url": "",
    "influxdb_token_secret": "",
    "influxdb_org": "-",
    "influxdb_bucket": "",
}
APT_GET = """#!/bin/sh
# apt-get stand-in: no mirror is reachable here; the packages must be installed already.
[ "$1" = install ] || exit 0
shift
for package; do
  case "$package" in -*) continue ;; esac
  dpkg-query -W -f='${{Status}}' "$package" 2>/dev/null | grep -q 'install ok installed' || {{
    echo "E: $package is not installed on this machine (apt-get stand-in, no mirror)" >&2; exit 100; }}
done
"""
SYSTEMCTL = """#!/bin/sh
exec {python} -S {tool} {root} {instance} "$@"
"""


class Vm:
    """A root directory, a namespace and the charm of the package, driven step by step."""

    def __init__(self, package: Path, work: Path, ns: str, ran: str, instance: str):
        self.package = package
        self.charm = package / "charms" / CHARM
        self.root = work / "root"
        self.bin = work / "bin"
        self.tools = work / "tools"
        self.home = work / "home"
        self.ns = ns  # the machine's namespace: loopback and n3
        self.ran = ran  # the RAN side's, holding n3's peer
        self.unit = Unit(self.root, instance, CHARM)
        for folder in (self.root, self.bin, self.tools, self.home):
            folder.mkdir(parents=True)
        # Copies: run from the source tree, the scripts would put tests/packaging on sys.path.
        for tool in ("charm_driver.py", "systemctl.py"):
            shutil.copy(TOOLS / tool, self.tools / tool)
        scripts = {
            "apt-get": APT_GET.format(),
            "systemctl": SYSTEMCTL.format(
                python=base_python(), tool=self.tools / "systemctl.py", root=self.root, instance=instance
            ),
        }
        for name, text in scripts.items():
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        (self.bin / "python3").symlink_to(base_python())

    def run(self, command: str, **request: Any) -> dict[str, Any]:
        """One charm step inside the namespace, with the environment a hook has (and no other)."""
        env = {
            "PATH": f"{self.bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "PYTHONPATH": "src:lib:venv",  # dispatch's lib:venv, and src/, where charm.py lives
        }
        argv = [
            "nsenter", f"--net={netns.NETNS_DIR}/{self.ns}",
            base_python(), "-S", str(self.tools / "charm_driver.py"), str(self.root),
            json.dumps({"command": command, **request}),
        ]  # fmt: skip
        done = subprocess.run(
            argv, cwd=self.charm, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, check=False
        )
        lines = done.stdout.strip().splitlines()
        answer = json.loads(lines[-1]) if lines else {"error": "no answer"}
        assert done.returncode == 0, f"{command}: {answer}\n{done.stderr[-3000:]}\nservice log:\n{self.log_tail()}"
        return answer

    def log_tail(self) -> str:
        try:
            return self.unit.log.read_text(errors="replace")[-3000:]
        except OSError:
            return "(no log)"

    def service_pid(self) -> int | None:
        return self.unit.pid()

    def kill(self) -> None:
        """The service this test started, if the stand-in's stop left it running."""
        pid = self.service_pid()
        if pid is not None:
            os.kill(pid, 9)


@pytest.fixture(scope="module")
def package(osm_packages: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(osm_packages["vnf"], tmp_path_factory.mktemp("vm-package"))


@pytest.fixture
def vm(package: Path, tmp_path: Path) -> Iterator[Vm]:
    require_kernel()
    suffix = secrets.token_hex(3)
    vm_ns, ran_ns = f"vm-{suffix}", f"ran-{suffix}"
    try:
        for ns in (vm_ns, ran_ns):
            netns.add_namespace(ns)
        netns.add_veth(vm_ns, N3, ran_ns, RAN)
        netns.run(["ip", "link", "set", N3, "up"], netns=vm_ns)
        netns.run(["ip", "link", "set", RAN, "up"], netns=ran_ns)
        with pinned_instance("vm", vm_ns) as instance:
            machine = Vm(package, tmp_path, vm_ns, ran_ns, instance)
            try:
                yield machine
            finally:
                try:
                    machine.run("stop")
                finally:
                    machine.kill()
    finally:
        for ns in (vm_ns, ran_ns):
            netns.delete_namespace(ns)


def day1_primitives(vnfd: dict[str, Any]) -> list[dict[str, Any]]:
    """The VDU's initial config primitives in order."""
    (day12,) = vnfd["df"][0]["lcm-operations-configuration"]["operate-vnf-op-config"]["day1-2"]
    return sorted(day12["initial-config-primitive"], key=lambda primitive: primitive["seq"])


def parameters(primitive: dict[str, Any]) -> dict[str, Any]:
    """A primitive's parameters with OSM's <placeholders> filled from PARAMS."""
    values = {}
    for parameter in primitive.get("parameter", []):
        value = str(parameter["value"])
        found = re.fullmatch(r"<(\w+)>", value)
        values[parameter["name"]] = PARAMS[found[1]] if found else value
    return values


def frame(dst_mac: str, src_mac: str, sport: int, dport: int) -> bytes:
    return bytes(
        Ether(src=src_mac, dst=dst_mac) / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=sport, dport=dport)
        / Raw(b"\0" * 32)
    )  # fmt: skip


def mac_of(ns: str, ifname: str) -> str:
    return json.loads(netns.run(["ip", "-j", "link", "show", ifname], netns=ns))[0]["address"]


def stats(vm: Vm, config: dict[str, Any]) -> dict[str, Any]:
    return json.loads(vm.run("action", name="get-stats", params={}, config=config)["result"])


def wait_for(vm: Vm, config: dict[str, Any], done) -> dict[str, Any]:
    """Read the statistics until `done(stats)` holds; fail with the last reading at the deadline."""
    deadline = time.monotonic() + COUNT_TIMEOUT_S
    while True:
        current = stats(vm, config)
        if done(current):
            return current
        assert time.monotonic() < deadline, f"counters did not get there: {json.dumps(current)[:2000]}"
        time.sleep(0.2)


# A pip install of every wheel and two loads of the data plane: about a minute, more than two on a
# loaded machine, beyond the default 120 s.
@pytest.mark.timeout(480)
def test_the_vnf_package_alone_installs_starts_takes_day1_and_steers_on_a_day2_intent(vm):
    vnfd = yaml.safe_load((vm.package / f"{CHARM}_vnfd.yaml").read_text())["vnfd"]
    appd = json.loads((vm.package / "mec" / f"{CHARM}_appd.json").read_text())
    wheels = vm.charm / "wheels"

    # The versions agree, and the charm records the hash of the wheel it carries.
    (wheel,) = wheels.glob("dpp_netapp-*.whl")
    version, pinned_hash = read_requirements(wheels)["dpp-netapp"]
    assert pinned_hash == sha256_of(wheel)
    assert f"{pinned_hash}  {wheel.name}" in (wheels / SHA256SUMS_FILE).read_text().splitlines()
    assert version == vnfd["software-version"] == appd["appSoftVersion"]
    assert wheel.name.startswith(f"dpp_netapp-{version}-")

    # Install (the install hook): from the charm's wheels alone.
    installed = vm.run("install")
    assert installed == {"version": version, "installed": True}
    assert (vm.root / "etc" / CHARM / "requirements.txt").read_text() == (wheels / REQUIREMENTS_FILE).read_text()

    # Day 1: the VNFD's initial config primitives, as OSM runs them; no AppD among the
    # instantiation parameters, no appd option: apply-appd takes the one the charm carries.
    config: dict[str, Any] = {}
    onboarding: dict[str, Any] = {}
    for primitive in day1_primitives(vnfd):
        if primitive["name"] == "config":
            config.update(parameters(primitive))
            configured = vm.run("configure", config=config)
            assert configured["running"], vm.log_tail()
            assert configured["steer_cpus"] == ([STEER_CPU] if "steer-cpus" in config else [])
            vm.run("ready", config=config)
        elif primitive["name"] == "apply-appd":
            # What Juju gives the charm's action event (DppNetappCharm._appd_values): the unit's
            # management address and api-port.
            values = {"mgmt-address": PARAMS["rw_mgmt_ip"], "api-port": str(config["api-port"])}
            onboarding = vm.run("action", name="apply-appd", params=parameters(primitive), config=config, values=values)
        else:
            vm.run("action", name=primitive["name"], params=parameters(primitive), config=config)
    assert [primitive["name"] for primitive in day1_primitives(vnfd)][-2:] == ["reload-dataplane", "apply-appd"]
    assert "appd" not in config and onboarding["appd-source"] == "charm", onboarding
    onboarded = vm.run("request", method="GET", path=f"/api/v1/mec/applications/{appd['appName']}", config=config)
    assert [rule["trafficRuleId"] for rule in onboarded["body"]["trafficRules"]] == [
        rule["trafficRuleId"] for rule in appd["appTrafficRule"]]

    # The service runs the installed NetApp with the data plane its wheel carries, attached to n3.
    pid = vm.service_pid()
    assert pid is not None
    maps = Path(f"/proc/{pid}/maps").read_text()
    assert f"{vm.root}/opt/{CHARM}/lib/" in maps and "/netapp/dataplane/lib/libdpp.so" in maps
    attached = vm.run("request", method="GET", path="/api/v1/dataplane", config=config)["body"]
    assert N3 in json.dumps(attached), attached

    # The AppD's rules act on the NetApp's own address only (tests/mec/test_appd_api.py applies it).
    n3_mac, ran_mac = mac_of(vm.ns, N3), mac_of(vm.ran, RAN)
    sender = Sender(vm.ran, RAN)
    try:
        # Day 2: add-intent through the charm's action, then its frames are counted and steered.
        cpu = STEER_CPU
        steering = vm.run("request", method="GET", path="/api/v1/dataplane/cpus", config=config)["body"]
        assert [view["cpu"] for view in steering] == [cpu], steering
        intent = {
            "id": "video",
            "match": {"protocol": "udp", "dst_port": 5004},
            "action": {"type": "steer", "cpu": cpu},
        }
        added = vm.run("action", name="add-intent", params={"intent": json.dumps(intent)}, config=config)
        assert added["intent-id"] == "video"
        sender.send([frame(n3_mac, ran_mac, 40000, 5004)], rounds=FRAMES)
    finally:
        sender.close()

    def steered(now: dict[str, Any]) -> bool:
        video = [entry for entry in now["intents"] if entry["id"] == "video"]
        to_cpu = (now["cpus"].get(str(cpu)) or {}).get("packets", 0)
        return bool(video) and video[0]["packets"] >= FRAMES and to_cpu >= FRAMES

    after = wait_for(vm, config, steered)
    assert [entry["packets"] for entry in after["intents"] if entry["id"] == "video"] == [FRAMES]
