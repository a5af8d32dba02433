"""A MEC 011 traffic rule PUT through the API changes what the loaded XDP program does with a matching
packet (BPF_PROG_TEST_RUN): DROP drops it, FORWARD_DECAPSULATED to the MAC of one of the data plane's
interfaces redirects it, INACTIVE gives it back to the default verdict; a packet the filter does not
match is never touched. The rule's entries are those of the equivalent native intent."""

from __future__ import annotations

import pytest
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
