"""A MEC 015 bandwidth allocation POSTed through the API is a policer in the pinned maps: the session's
rule in dpp_rules is the equivalent native intent's (pass, policed), its slot names a policer in
dpp_rule_policers, and that policer in dpp_policers has the allocation's rate; a PUT changes the
rate in the kernel, a DELETE takes the rule out. The loaded program then drops the session's
packets above the rate (BPF_PROG_TEST_RUN) while a packet of another session is untouched."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.dataplane.abi import MAPS, RuleFlag
from netapp.dataplane.binding import rule_key, struct_bytes
from netapp.dataplane.tables import Table
from netapp.intents.compiler import compile_intent
from netapp.intents.models import Intent
from netapp.mec.bwm_compiler import SESSION_PRIORITY, allocation_intent_ids
from netapp.service.service import rule_id
from tests.mec.conftest import APP, TENANT
from tests.utils.maps import map_rules, second_handle

pytestmark = pytest.mark.slow

ALLOCATIONS = "/bwm/v1/bw_allocations"
RATE = 8_000  # bit/s: a thousand bytes a second, so a few frames overrun it whatever the machine's speed
SESSION = {"sourceIp": "10.0.0.1", "dstAddress": "192.0.2.10", "protocol": "UDP", "dstPort": ["5000"]}
FRAME = 1_000
MATCHING = bytes(Ether() / IP(src="10.0.0.1", dst="192.0.2.10") / UDP(sport=9, dport=5000) / (b"x" * FRAME))
OTHER = bytes(Ether() / IP(src="10.0.0.1", dst="192.0.2.10") / UDP(sport=9, dport=5001) / (b"x" * FRAME))


def allocation(rate: int) -> dict:
    return {"appInsId": APP, "requestType": 1, "fixedAllocation": str(rate), "allocationDirection": "01",
            "sessionFilter": [SESSION]}


def session_key(allocation_id: str) -> bytes:
    """The key of the uplink intent in dpp_rules, as the equivalent native intent compiles."""
    native = Intent.model_validate({
        "id": "native", "priority": SESSION_PRIORITY,
        "match": {"src": "10.0.0.1/32", "dst": "192.0.2.10/32", "protocol": "udp", "dst_port": 5000},
        "action": {"type": "pass", "police": {"rate_bps": RATE}},
    })
    return struct_bytes(rule_key(compile_intent(native, {}, rule_id(TENANT, allocation_intent_ids(allocation_id)[0]))))


def pinned_policer_rate(instance: str, slot: int) -> int:
    """The rate of the own policer that dpp_rule_policers names for a rule slot, read from the pins."""
    handle = second_handle(instance)
    try:
        police = Table(handle, "dpp_rule_policers", MAPS["dpp_rule_policers"]).get(slot)
        assert police is not None and police.policer != 0, "the slot names no policer"
        policer = Table(handle, "dpp_policers", MAPS["dpp_policers"]).get(police.policer)
        return policer.rate
    finally:
        handle.close()


def test_an_allocation_is_a_policer_in_the_pinned_maps_that_the_program_enforces(mec_site):
    tenant, instance = mec_site.client("tenant-a"), mec_site.service.settings.instance
    created = tenant.post(ALLOCATIONS, json=allocation(RATE))
    assert created.status_code == 201, created.text
    location = created.headers["Location"]
    key = session_key(location.rsplit("/", 1)[1])

    held = map_rules(instance)
    assert key in held, "the session's rule is not in dpp_rules"
    assert held[key].flags & RuleFlag.POLICED
    assert pinned_policer_rate(instance, held[key].slot) == RATE

    verdicts = [mec_site.service.dataplane.test_run(MATCHING).verdict for _ in range(8)]
    assert verdicts[0] == "PASS" and "DROP" in verdicts, verdicts  # the burst, then over the rate
    assert mec_site.service.dataplane.test_run(OTHER).verdict == "PASS"

    assert tenant.put(location, json=allocation(RATE * 4)).status_code == 200
    held = map_rules(instance)
    assert pinned_policer_rate(instance, held[key].slot) == RATE * 4

    assert tenant.delete(location).status_code == 204
    assert key not in map_rules(instance)
