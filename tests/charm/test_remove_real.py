"""The charm's remove path on a real NetApp: `netapp serve` attached with real XDP to a veth in a
namespace of its own; after NetApp.remove() no program is attached and no pin remains (a stopped
service alone leaves both, on purpose). Needs root and libdpp (tests/utils/kernel.py)."""

from __future__ import annotations

from charm_config import CharmConfig

from tests.charm.real_netapp import served_netapp
from tests.utils.kernel import pin_dir, veth_namespace, xdp_program_on
from tests.utils.maps import pinned_instance
from tests.utils.serve import free_port

VETH, PEER = "dpprm0", "dpprm1"


def test_given_a_served_netapp_attached_with_xdp_when_remove_then_nothing_attached_no_pins_no_files(tmp_path):
    config = CharmConfig(interfaces=VETH, xdp_mode="generic", api_port=free_port(), metrics_port=0)
    with veth_namespace("charm-rm", VETH, PEER) as namespace, pinned_instance("rm", namespace) as instance:
        with served_netapp(tmp_path, namespace, instance, config) as (workload, machine):
            assert xdp_program_on(namespace, VETH) is not None
            machine.argv.clear()

            workload.remove()

            assert machine.argv == [
                ["systemctl", "disable", "--now", "dpp-netapp"],
                [str(workload.paths.netapp_bin), "dataplane", "unload", "--config", str(workload.paths.settings)],
                ["systemctl", "daemon-reload"],
            ]
            assert not machine.running
            assert xdp_program_on(namespace, VETH) is None
            assert not pin_dir(instance).exists()
            for gone in (workload.paths.unit, workload.paths.etc, workload.paths.venv):
                assert not gone.exists(), gone
            assert (workload.paths.state_dir / "netapp.db").exists()  # kept, as a package's data


def test_given_a_stopped_netapp_when_not_removed_then_xdp_stays_attached(tmp_path):
    """What remove undoes: stopping the service alone leaves the program on the interface."""
    config = CharmConfig(interfaces=VETH, xdp_mode="generic", api_port=free_port(), metrics_port=0)
    with veth_namespace("charm-st", VETH, PEER) as namespace, pinned_instance("st", namespace) as instance:
        with served_netapp(tmp_path, namespace, instance, config) as (workload, _):
            workload.stop()
            assert xdp_program_on(namespace, VETH) is not None
            assert pin_dir(instance).is_dir()
