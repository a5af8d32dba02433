"""Overlap warnings of the service over FakeDpp: creates (single, batch, retried, legacy), replaces
and dry runs name the installed intents of other shapes that share packets with theirs, which one
gets them and why; another tenant's intents stay unnamed and their matches unsaid."""

from __future__ import annotations

import pytest

from netapp.intents.index import OVERLAP_LIMIT
from netapp.intents.models import LegacyMessage
from netapp.service.contract import IntentWarning
from tests.utils.fakes import RecordingDpp
from tests.utils.intents import paper_message
from tests.utils.service import ADMIN, ALICE, BOB, FAKE_SLOTS, Clock, fake_service, intent

VNI = 1093


@pytest.fixture
def fake() -> RecordingDpp:
    return RecordingDpp(max_rules=FAKE_SLOTS)


@pytest.fixture
def service(tmp_path, fake):
    started = fake_service(tmp_path, fake, Clock())
    yield started
    started.close()


def flow(n: int, priority: int = 200):
    """One of the demo's priority flows: a GTP-U tunnel in the site's VXLAN, steered."""
    return intent(f"prio-{n}", match={"overlay": "vxlan", "vni": VNI, "teid": 1000 + n}, priority=priority)


def wide(intent_id: str = "wide", priority: int = 300, **match):
    return intent(
        intent_id, match=match or {"dst": "10.0.0.0/24"}, priority=priority, action={"type": "drop"}
    )


def overlaps(warnings: list[IntentWarning]) -> list[tuple]:
    return [(w.intent_a, w.intent_b, w.winner) for w in warnings if w.kind == "overlap"]


def test_a_wide_intent_over_the_priority_flows_warns_of_each_flow_it_takes(service):
    for n in range(3):
        assert service.create_intent(ALICE, flow(n)).warnings == []

    result = service.create_intent(ALICE, wide())

    assert overlaps(result.warnings) == [("wide", f"prio-{n}", "wide") for n in range(3)]
    first = result.warnings[0]
    assert first.shared == f"packets to 10.0.0.0/24 in vxlan VNI {VNI} in GTP-U TEID 0x000003e8"
    assert first.reason == "priority 300 over 200"
    assert [r.intent.id for r in service.store.all_intents()][-1] == "wide"  # made all the same


def test_at_equal_priority_the_warning_names_the_shape_searched_first_and_why(service):
    service.create_intent(ALICE, flow(0, priority=200))

    (warning,) = service.create_intent(ALICE, wide(priority=200)).warnings

    assert (warning.winner, warning.intent_b) == ("prio-0", "prio-0")
    assert warning.reason.startswith("equal priority 200: the winner compares more conditions (5 vs 2)")


def test_beyond_the_limit_the_rest_are_counted(service):
    service.create_intents(ALICE, [flow(n) for n in range(OVERLAP_LIMIT + 3)])

    warnings = service.create_intent(ALICE, wide()).warnings

    assert len(overlaps(warnings)) == OVERLAP_LIMIT
    assert [(w.kind, w.intent_a, w.count) for w in warnings[OVERLAP_LIMIT:]] == [("more_overlaps", "wide", 3)]
    assert warnings[-1].reason == "'wide' overlaps 3 more intents of other shapes than are listed"


def test_a_batch_warns_of_a_pair_of_its_own_once(service):
    result = service.create_intents(ALICE, [flow(0), wide(), flow(1)])

    assert overlaps(result.warnings) == [("prio-0", "wide", "wide"), ("wide", "prio-1", "wide")]


def test_a_replace_and_a_dry_run_warn_as_well_and_a_dry_run_changes_nothing(service, fake):
    service.create_intent(ALICE, flow(0))
    service.create_intent(ALICE, wide(dst="10.9.0.0/24"))
    maps_before = fake.state()

    report = service.dry_run(ALICE, [wide(priority=100)])
    assert fake.state() == maps_before and report.conflicts == []
    assert overlaps(report.warnings) == [("wide", "prio-0", "prio-0")]

    replaced = service.replace_intent(ALICE, "wide", wide(priority=100))
    assert overlaps(replaced.warnings) == [("wide", "prio-0", "prio-0")]
    assert replaced.revision == 2 and replaced.warnings[0].reason == "priority 200 over 100"


def test_a_retried_create_answers_the_warnings_as_they_now_are(service):
    service.create_intent(ALICE, flow(0))
    first = service.create_intent(ALICE, wide(), idempotency_key="k")
    service.delete_intent(ALICE, "prio-0")

    retry = service.create_intent(ALICE, wide(), idempotency_key="k")

    assert (first.created, retry.created) == (True, False)
    assert overlaps(first.warnings) == [("wide", "prio-0", "wide")] and retry.warnings == []


def test_a_legacy_insert_warns_too(service):
    service.create_intent(ALICE, wide(dst="10.0.0.0/24", priority=300))

    record = service.apply_legacy(ALICE, LegacyMessage.model_validate(paper_message()))

    assert record is not None and record.intent.id == "legacy-e918d704"
    assert overlaps(record.warnings) == [("legacy-e918d704", "wide", "wide")]


def test_another_tenants_intent_is_not_named_nor_its_match_told_except_to_an_admin(service):
    service.create_intent(BOB, intent("bobs-flow", match={"dst": "10.0.0.7", "protocol": "udp", "dst_port": 53}))

    mine = service.create_intent(ALICE, wide(dscp=46, dst="10.0.0.0/24")).warnings
    seen_by_admin = service.dry_run(ADMIN, [wide("ops", dscp=46)]).warnings

    (warning,) = mine
    assert (warning.intent_a, warning.intent_b, warning.winner) == ("wide", "an intent of another tenant", "wide")
    assert warning.shared == "some packets to 10.0.0.0/24 with DSCP 46"
    assert "bobs-flow" not in str(mine) and "10.0.0.7" not in str(mine) and "53" not in str(mine)
    assert ("ops", "bob/bobs-flow", "ops") in overlaps(seen_by_admin)
    shared = {w.intent_b: w.shared for w in seen_by_admin}
    assert shared["bob/bobs-flow"] == "udp packets to 10.0.0.7 port 53 with DSCP 46"
    assert shared["alice/wide"] == "packets to 10.0.0.0/24 with DSCP 46"


def test_an_intent_of_another_tenant_that_matches_all_of_the_callers_packets_is_said_to(service):
    site_wide = {"overlay": "vxlan", "vni": VNI}
    service.create_intent(ADMIN, intent("site-drop", match=site_wide, priority=900, action={"type": "drop"}))

    (warning,) = service.create_intent(ALICE, flow(0)).warnings

    assert (warning.intent_b, warning.winner) == ("an intent of another tenant", "an intent of another tenant")
    assert warning.shared == f"packets in vxlan VNI {VNI} in GTP-U TEID 0x000003e8"
    assert warning.reason == "priority 900 over 200"
