"""The winner an overlap warning names is the intent the real program (BPF_PROG_TEST_RUN) gives a
packet both intents match: by priority, and at equal priority by the order the shapes are
searched in (api/intents.md, "How ambiguous packets are classified")."""

from __future__ import annotations

import pytest

from netapp.intents.index import RuleIndex
from netapp.intents.models import Intent
from netapp.service.overlaps import overlap_warnings
from tests.utils import packets
from tests.utils import refclassify as ref
from tests.utils import refparser as rp
from tests.utils.dataplane import run, traced_dataplane
from tests.utils.intents import INTERFACES, native_match

TEID = 0x11223344
# VXLAN 0x445 carrying GTP-U TEID carrying UDP 192.168.0.140:40000 -> 10.0.0.10:5004: it matches
# every intent below but 'other-teid'.
TUNNEL = bytes(
    packets.outer_udp(
        packets.vxlan(0x445, packets.inner_gtpu_frame(packets.gtpu(TEID, inner=packets.ue_udp(
            "192.168.0.140", "10.0.0.10", 40000, 5004)))),
        dport=packets.VXLAN_PORT,
    )
)


def drop(intent_id: str, match: dict, priority: int = 100) -> dict:
    return {"id": intent_id, "priority": priority, "match": match, "action": {"type": "drop"}}


FLOW = {"overlay": "vxlan", "vni": 0x445, "teid": TEID}
CASES = {
    "a higher priority": ([drop("flow", FLOW, 200), drop("wide", {"dst": "10.0.0.0/24"}, 300)], "wide"),
    "more conditions": ([drop("flow", FLOW, 200), drop("wide", {"dst": "10.0.0.0/24"}, 200)], "flow"),
    "longer prefixes": (
        [drop("dst-8", {"dst": "10.0.0.0/8"}), drop("src-24", {"src": "192.168.0.0/24"})],
        "src-24",
    ),
    "a shape holding a higher priority": (
        [drop("tunnel", FLOW), drop("other-teid", {"teid": TEID + 1}, 500), drop("teid", {"teid": TEID})],
        "teid",
    ),
    "an unspecified order": ([drop("udp", {"protocol": "udp"}), drop("dscp", {"dscp": 0})], None),
}


@pytest.mark.parametrize(("intents", "expected"), CASES.values(), ids=CASES.keys())
def test_the_warning_names_the_intent_the_program_gives_a_shared_packet(intents, expected):
    index = RuleIndex(INTERFACES)
    for intent in intents:
        index.add(index.compile(Intent.model_validate(intent)))
    new, other = intents[-1]["id"], intents[0]["id"]
    (warning,) = [w for w in overlap_warnings(index, [new], str, "") if w.intent_b == other]
    (found,) = [o for o in index.overlaps(new).overlaps if o.other.intent_id == other]
    kind, key = rp.parse(TUNNEL)
    assert kind == "ok" and ref.matches(native_match(found.shared), key), "the packet is not a shared one"

    dp = traced_dataplane({"intents": intents})
    try:
        outcome = run(dp, TUNNEL)
    finally:
        dp.close()

    assert outcome.intent == warning.winner
    if expected is not None:
        assert warning.winner == expected
