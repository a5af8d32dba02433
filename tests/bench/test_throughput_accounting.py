"""Loss accounting, the generator's report and the frames of bench.throughput (no kernel needed)."""

from __future__ import annotations

import json

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

from bench.throughput import accounting, frames
from bench.throughput.accounting import Account
from bench.throughput.generator import Generator, parse_output
from netapp.testbed import scenario
from netapp.testbed.topology import EdgeSite

PRIORITY = [True, True, False, False]


def test_every_frame_is_delivered_forwarded_or_lost():
    flows = accounting.flow_accounts([100, 100, 50, 50], [100, 60, 0, 10], [0, 40, 50, 30])
    classes = accounting.class_accounts(flows, PRIORITY)
    assert classes["priority"] == Account(200, 160, 40)
    assert classes["best_effort"] == Account(100, 10, 80)
    assert classes["total"] == Account(300, 170, 120)
    assert classes["best_effort"].lost == 10
    assert classes["total"].as_dict() == {"offered": 300, "delivered": 170, "forwarded": 120, "lost": 10}
    assert accounting.anomalies(flows) == []


def test_rates_are_counts_over_the_sending_time():
    assert Account(1000, 600, 300).rates(0.5) == {
        "offered": 2000.0,
        "delivered": 1200.0,
        "forwarded": 600.0,
        "lost": 200.0,
    }
    assert Account(1, 1, 0).rates(0)["offered"] == 0.0


def test_given_more_frames_than_sent_or_unknown_frames_then_the_counts_are_not_trusted():
    flows = accounting.flow_accounts([10, 10], [11, 10], [0, 0])
    problems = accounting.anomalies(flows, unknown_frames=3)
    assert len(problems) == 2 and "flow 0" in problems[0] and "3 frames" in problems[1]
    verdict = accounting.verdict(accounting.class_accounts(flows, [True, False])["total"], True, problems)
    assert not verdict.passed and verdict.limited_by == "invalid"


@pytest.mark.parametrize(
    "lost, held, passed, limit",
    [(0, True, True, None), (0, False, True, None), (1, True, False, "loss"), (5, False, False, "loss")],
)
def test_a_trial_passes_on_zero_loss_whatever_rate_the_generator_reached(lost, held, passed, limit):
    verdict = accounting.verdict(Account(100, 100 - lost, 0), held, [])
    assert (verdict.passed, verdict.limited_by, verdict.generator_held) == (passed, limit, held)
    assert verdict.as_dict()["passed"] is passed


def test_given_mismatched_flow_counts_then_accounting_refuses():
    with pytest.raises(ValueError):
        accounting.flow_accounts([1, 2], [1], [1, 2])
    with pytest.raises(ValueError):
        accounting.class_accounts([Account(1, 1, 0)], [True, False])


def test_the_generator_report_is_read_as_sent_frames_and_the_rate_achieved():
    raw = {
        "frames": 32, "seconds": 0.5, "pps": 64, "target_pps": 100, "span_s": 0.31, "paced_pps": 98.5,
        "slips": 1, "slipped_us": 120.0, "slack_us": 100, "max_late_us": 120.0, "batch": 16, "flows": 16,
        "template_bytes": 136, "frame_bytes": 172, "per_flow": [2] * 16,
    }  # fmt: skip
    sent = parse_output(json.dumps(raw))
    assert sent.frames == 32 and sent.per_flow == (2,) * 16
    assert sent.achieved_pps == 98.5 and sent.slips == 1
    assert sent.held(0.02) and not sent.held(0.01)


def test_the_generator_runs_in_the_ran_namespace_on_its_cpu(tmp_path):
    gen = Generator(tmp_path / "dpp-pktgen", "ns-ran", "ran0", cpu=0, batch=8, slack_us=50)
    cmd = gen.command(tmp_path / "f.pcap", 1000, 25_000.4)
    assert cmd[:4] == ["ip", "netns", "exec", "ns-ran"]
    assert cmd[cmd.index("-p") + 1] == "25000" and cmd[cmd.index("-b") + 1] == "8"
    assert cmd[cmd.index("-c") + 1] == "0" and cmd[cmd.index("-L") + 1] == "50" and "-m" in cmd


@pytest.mark.parametrize("size", [28, 64, 1500])
def test_frames_carry_a_ue_packet_of_the_size_asked_for(tmp_path, size):
    site = EdgeSite(tag="t")
    flows = frames.flow_frames(site, size)
    assert len(flows) == 16 and {len(f) for f in flows} == {frames.frame_bytes(size)}
    first = Ether(flows[0])
    assert first[UDP].dport == 4789 and first[UDP].chksum == 0  # VXLAN senders' zero checksum
    ue = IP(bytes(first[UDP].payload)[8 + 14 + 20 + 8 + 16 :])
    assert ue.len == size and ue.src == scenario.Flow(0).ue_ip
    # Only the headers differ between flows: dpp-pktgen writes them from templates of 256 bytes.
    assert all(f[256:] == flows[0][256:] for f in flows)
    pcap = frames.write_pcap(tmp_path / "f.pcap", flows)
    assert [bytes(p) for p in rdpcap(str(pcap))] == flows


def test_a_ue_packet_needs_its_headers():
    with pytest.raises(ValueError):
        frames.flow_frame(EdgeSite(tag="t"), scenario.Flow(0), frames.MIN_SIZE - 1)


def test_many_ue_flows_make_the_generator_advance_the_ue_source_port(tmp_path):
    gen = Generator(tmp_path / "dpp-pktgen", "ns-ran", "ran0", spread=6250, spread_offset=frames.UE_SOURCE_PORT_AT)
    cmd = gen.command(tmp_path / "f.pcap", 1000, 0)
    assert cmd[cmd.index("-s") + 1] == "6250" and cmd[cmd.index("-S") + 1] == str(frames.UE_SOURCE_PORT_AT)
    assert "-s" not in Generator(tmp_path / "dpp-pktgen", "ns-ran", "ran0").command(tmp_path / "f.pcap", 1, 0)
    frame = frames.flow_frame(EdgeSite(tag="t"), scenario.Flow(3), 64)
    port = int.from_bytes(frame[frames.UE_SOURCE_PORT_AT : frames.UE_SOURCE_PORT_AT + 2], "big")
    assert port == 40000 + 3  # the scenario's UE source port of flow 3
