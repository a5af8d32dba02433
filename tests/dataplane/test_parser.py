"""The XDP parser on real packets (BPF_PROG_TEST_RUN): every header combination of the case table,
truncation at every byte, and a differential test against the reference parser."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings

from tests.utils import packets, refparser, strategies
from tests.utils.dataplane import reference_key, run, traced_dataplane

# Reasons that are not faults: such packets go to the kernel as a plain pass.
BENIGN = {"not_ip", "gtp_signalling"}
# BPF_PROG_TEST_RUN refuses shorter frames (EINVAL), as no NIC delivers them to XDP; the reference
# parser's tests cover trunc_eth below this length.
MIN_FRAME = 14
LOOPBACK_IFINDEX = 1
RUNNABLE_CASES = sorted(name for name, (frame, _) in packets.CASES.items() if len(frame) >= MIN_FRAME)


@pytest.fixture(scope="module")
def dp():
    dataplane = traced_dataplane()
    yield dataplane
    dataplane.close()


def observed(dp, frame: bytes) -> tuple[str, object]:
    """What the program made of a frame, in the reference parser's terms."""
    outcome = run(dp, frame)
    if outcome.reason is not None:
        expected_action = "pass" if outcome.reason in BENIGN else "default"
        assert (outcome.action, outcome.verdict) == (expected_action, "PASS"), outcome
        return ("reason", outcome.reason)
    key = reference_key(outcome.key)
    # Without an ingress ifindex the kernel runs the frame as received on loopback; the reference
    # parser knows nothing of interfaces.
    assert key["ifindex"] == LOOPBACK_IFINDEX
    return ("ok", {**key, "ifindex": 0})


@pytest.mark.parametrize("name", RUNNABLE_CASES)
def test_every_case_parses_as_written(dp, name):
    frame, expected = packets.CASES[name]
    if expected.get("reason"):
        assert observed(dp, frame) == ("reason", expected["reason"])
    else:
        key = {field: value for field, value in expected.items() if field != "reason"}
        assert observed(dp, frame) == ("ok", key)


def nested_frame() -> bytes:
    """VXLAN / inner IPv4 / UDP / GTP-U with two extension headers / UE IPv6 / TCP."""
    ue = packets.ue_tcp("2001:db8::1", "2001:db8::2", 40000, 443)
    msg = packets.gtpu(0x8894D0D4, qfi=9, ul=True, exts=[packets.gtp_ext_udp_port(2152)], inner=ue)
    return bytes(packets.outer_udp(packets.vxlan(0x445, packets.inner_gtpu_frame(msg)), dport=4789))


def test_a_truncated_nested_packet_never_matches_and_always_counts_a_reason():
    rule = {"id": "tunnel", "match": {"overlay": "vxlan", "vni": 0x445, "teid": 0x8894D0D4},
            "action": {"type": "drop"}}
    dataplane = traced_dataplane({"intents": [rule]})
    try:
        frame = nested_frame()
        assert run(dataplane, frame).intent == "tunnel"
        before = dataplane.reason_stats()
        for cut in range(MIN_FRAME, len(frame)):
            outcome = run(dataplane, frame[:cut])
            assert outcome.intent is None and outcome.action == "default", cut
            assert outcome.reason and outcome.reason.startswith("trunc_"), (cut, outcome.reason)
        after = dataplane.reason_stats()
        counted = sum(after[r][0] - before[r][0] for r in after if r.startswith("trunc_"))
        assert counted == len(frame) - MIN_FRAME
    finally:
        dataplane.close()


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=strategies.any_frames())
def test_the_bpf_parser_agrees_with_the_reference_parser(dp, frame):
    assume(len(frame) >= MIN_FRAME)
    assert observed(dp, frame) == refparser.parse(frame)
