"""Differential fuzz (tests/utils/fuzz.py): seeded random nested frames and intents through the real
program, against the reference parser and classifier. A larger run: `make bench-fuzz`."""

from __future__ import annotations

from tests.utils import fuzz, refclassify
from tests.utils.dataplane import reference_key, traced_dataplane
from tests.utils.kernel import require_kernel

SEED = 20240612
PACKETS = 5000


def test_the_program_agrees_with_the_reference_on_thousands_of_random_frames():
    require_kernel()
    report = fuzz.run(PACKETS, SEED, traced_dataplane, reference_key)
    shown = "\n".join(disagreement.describe() for disagreement in report.disagreements[:10])
    assert not report.disagreements, f"{report.summary()}\n{shown}"
    # The run reaches what it is meant to: parsed frames and most parse reasons.
    assert report.outcomes["ok"] > PACKETS / 3 and report.matched > PACKETS / 3
    assert report.fast > PACKETS / 100, "the N3 fast path is exercised"
    assert len(report.outcomes) >= 12, report.summary()


def test_the_reference_classifier_settles_equal_priorities_as_documented():
    by_teid = {"id": "teid", "match": {"teid": 1}, "action": {"type": "drop"}}
    by_tunnel = {"id": "tunnel", "match": {"overlay": "vxlan", "vni": 7, "teid": 1},
                 "action": {"type": "drop"}}
    higher = {"id": "higher", "priority": 500, "match": {"teid": 2}, "action": {"type": "drop"}}
    key = {**refclassify.rp.empty_key(), "overlay": 1, "vni": 7, "teid": 1, "family": 4,
           "flags": refclassify.rp.KEY_GTP | refclassify.rp.KEY_VNI}  # fmt: skip
    assert refclassify.winners([by_teid, by_tunnel], key) == {"tunnel"}
    assert refclassify.winners([by_teid, by_tunnel, higher], key) == {"teid"}
