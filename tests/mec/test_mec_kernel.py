"""A MEC 011 traffic rule PUT through the API changes what the loaded XDP program does with a matching
packet (BPF_PROG_TEST_RUN): DROP drops it, FORWARD_DECAPSULATED to the MAC of one of the data plane's
interfaces redirects it (a GTP-U packet's UE packet alone), FORWARD_ENCAPSULATED into a GTP-U tunnel
moves a GTP-U packet into it, INACTIVE gives it back to the default verdict; a packet the filter does
not match is never touched. The rule's entries are those of the equivalent native intent."""

from __future__ import annotations

import pytest
from scapy.contrib.gtp import GTP_U_Header, GTPPDUSessionContainer
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.dataplane.binding import rule_key, rule_value, struct_bytes
from netapp.intents.compiler import compile_intent
from netapp.intents.models import Intent
from netapp.mec.compiler import MEC_PRIORITY_BASE, intent_ids
from netapp.service.service import rule_id
from tests.mec.conftest import APP, TENANT
from tests.utils.maps import map_rules
from tests.utils.mec import traffic_rule

pytestmark = pytest.mark.slow

RULE = f"/mec_app_support/v1/applications/{APP}/traffic_rules/r1"
MATCHING = bytes(Ether() / IP(src="10.0.0.1", dst="192.0.2.10") / UDP(sport=9, dport=5000) / (b"x" * 32))
OTHER = bytes(Ether() / IP(src="10.0.0.1", dst="192.0.2.10") / UDP(sport=9, dport=5001) / (b"x" * 32))
TEID = 0x1234
TUNNELLED = bytes(Ether(src="02:00:00:00:03:02", dst="02:00:00:00:03:01") / IP(src="10.3.0.9", dst="10.3.0.1")
                  / UDP(sport=2152, dport=2152) / GTP_U_Header(teid=TEID, E=1, next_ex=0x85)
                  / GTPPDUSessionContainer(type=1, QFI=9) / Ether(MATCHING)[IP])


def put(mec_site, body) -> dict:
    response = mec_site.client("tenant-a").put(RULE, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def verdicts(mec_site) -> tuple[str, str]:
    dataplane = mec_site.service.dataplane
    return dataplane.test_run(MATCHING).verdict, dataplane.test_run(OTHER).verdict


def test_a_put_rule_changes_the_verdict_of_a_matching_packet_and_inactive_restores_it(mec_site):
    put(mec_site, traffic_rule("r1", state="INACTIVE"))
    assert verdicts(mec_site) == ("PASS", "PASS")

    put(mec_site, traffic_rule("r1"))
    assert verdicts(mec_site) == ("DROP", "PASS")

    forward = {"interfaceType": "MAC", "srcMacAddress": mec_site.peer_mac.replace(":", "-").upper()}
    put(mec_site, traffic_rule("r1", action="FORWARD_DECAPSULATED", dstInterface=forward))
    assert verdicts(mec_site) == ("REDIRECT", "PASS")

    put(mec_site, traffic_rule("r1", state="INACTIVE"))
    assert verdicts(mec_site) == ("PASS", "PASS")


def test_the_rules_entry_in_the_kernels_map_is_the_equivalent_native_intents(mec_site):
    put(mec_site, traffic_rule("r1", priority=1))
    native = Intent.model_validate({
        "id": "native",
        "priority": MEC_PRIORITY_BASE + 254,  # MEC priority 1
        "match": {"dst": "192.0.2.0/24", "protocol": "udp", "dst_port": 5000},
        "action": {"type": "drop"},
    })
    expected = compile_intent(native, {}, rule_id(TENANT, intent_ids(APP, "r1")[0]))
    key = struct_bytes(rule_key(expected))

    held = map_rules(mec_site.service.settings.instance)
    assert key in held
    assert struct_bytes(held[key]) == struct_bytes(rule_value(expected, slot=held[key].slot))

    put(mec_site, traffic_rule("r1", state="INACTIVE"))
    assert key not in map_rules(mec_site.service.settings.instance)


def test_forward_decapsulated_sends_a_gtpu_packets_ue_packet_alone_out_of_the_interface(mec_site):
    forward = {"interfaceType": "MAC", "srcMacAddress": mec_site.peer_mac}
    put(mec_site, traffic_rule("r1", action="FORWARD_DECAPSULATED", dstInterface=forward))
    out = mec_site.service.dataplane.test_run(TUNNELLED)
    assert out.verdict == "REDIRECT"
    assert out.data == bytes(Ether(src="02:00:00:00:03:02", dst="02:00:00:00:03:01") / Ether(MATCHING)[IP])


def test_forward_encapsulated_into_a_gtpu_tunnel_moves_the_packet_with_its_teid(mec_site):
    tunnel = {"interfaceType": "TUNNEL", "tunnelInfo": {
        "tunnelType": "GTP_U", "tunnelDstAddress": "198.51.100.7", "tunnelSrcAddress": "192.0.2.1"}}
    put(mec_site, traffic_rule("r1", action="FORWARD_ENCAPSULATED", dstInterface=tunnel))
    out = mec_site.service.dataplane.test_run(TUNNELLED)
    moved = Ether(out.data)  # where it goes next is the FIB's to say: this namespace has no route
    assert (moved[IP].src, moved[IP].dst, moved[GTP_U_Header].teid) == ("192.0.2.1", "198.51.100.7", TEID)
    assert bytes(moved[GTPPDUSessionContainer].payload) == bytes(Ether(MATCHING)[IP])
