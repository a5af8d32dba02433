"""What the police option and a slice's MBR refuse, each naming its field, and what the service
fills in (over FakeDpp: the policers' maps as plain tables; the kernel's side is
tests/qos/test_intent_police.py)."""

from __future__ import annotations

import pytest

from netapp.intents.errors import IntentError
from netapp.intents.models import parse_intent
from netapp.qos.abi import BURST_MAX
from netapp.service.contract import InvalidInput
from tests.utils.intents import paper_message
from tests.utils.service import ALICE, fake_service, slice_spec


def policed(police: dict, action_type: str = "pass") -> dict:
    return {"id": "capped", "match": {"protocol": "udp"}, "action": {"type": action_type, "police": police}}


@pytest.mark.parametrize(
    ("police", "field", "says"),
    [
        ({"rate_bps": 0}, "action.police.rate_bps", "greater than or equal to 8000"),
        ({"rate_bps": 4 * 10**11 + 1}, "action.police.rate_bps", "less than or equal to 400000000000"),
        ({"rate_bps": 10**6, "burst_bytes": BURST_MAX + 1}, "action.police.burst_bytes", "less than or equal"),
        ({"rate_bps": 10**6, "burst_bytes": 0}, "action.police.burst_bytes", "greater than or equal to 1"),
        ({"rate_bps": 10**6, "algorithm": "leaky_bucket"}, "action.police.algorithm", "'token_bucket'"),
        ({"burst_bytes": 3000}, "action.police.rate_bps", "required"),
    ],
)
def test_bad_police_options_are_refused_naming_the_field(police, field, says):
    with pytest.raises(IntentError) as caught:
        parse_intent(policed(police))
    assert caught.value.field == field and says in caught.value.message


def test_a_drop_intent_takes_no_police_option():
    with pytest.raises(IntentError) as caught:
        parse_intent(policed({"rate_bps": 10**6}, "drop"))
    assert caught.value.field == "action.police"


def test_a_slices_mbr_under_the_policers_smallest_rate_is_refused_naming_mbr_kbps(tmp_path):
    service = fake_service(tmp_path)
    with pytest.raises(InvalidInput) as caught:
        service.put_slice(ALICE, slice_spec("tiny", cpus=[], mbr_kbps=7))
    assert caught.value.field == "mbr_kbps" and "8 kbit/s" in caught.value.detail
    assert service.list_rule_policers(ALICE) == []
    service.close()


def test_the_stored_intent_says_the_burst_and_algorithm_the_settings_gave(tmp_path):
    service = fake_service(tmp_path, qos={"default_algorithm": "fixed_window", "default_burst_ms": 100})
    record = service.create_intent(ALICE, parse_intent(policed({"rate_bps": 10**6}))).record
    police = record.intent.action.police
    assert (police.rate_bps, police.burst_bytes, police.algorithm) == (10**6, 12_500, "fixed_window")
    (shown,) = service.list_rule_policers(ALICE)
    assert (shown.rate_bps, shown.burst_bytes, shown.algorithm) == (10**6, 12_500, "fixed_window")
    service.close()


def test_a_legacy_message_polices_with_mbr_kbps_and_refuses_it_on_drop():
    message = paper_message()
    message["Action"]["mbr_kbps"] = "50000"
    assert parse_intent(message).action.police.rate_bps == 50_000_000
    message["Action"]["actionName"] = "DROP"
    del message["Action"]["rx_queue"]
    with pytest.raises(IntentError) as caught:
        parse_intent(message)
    assert caught.value.field == "Action.mbr_kbps"
    message["Action"].update(actionName="PASS", mbr_kbps="7")
    with pytest.raises(IntentError) as caught:
        parse_intent(message)
    assert caught.value.field == "Action.mbr_kbps"
