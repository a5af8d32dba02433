"""`netapp dataplane replay --frer`: a pcap of R-tagged copies goes through the real pipeline with the
node's streams; each --json line says the frame's stream, number and the recovery function's
decision, the last line each stream's 802.1CB counters, and both agree with the reference model
(netapp/frer/model.py) run on the same numbers. With --timing the capture's gaps are kept, so a
recovery timeout happens as it would on the wire; without it the frames come back to back."""

from __future__ import annotations

import json

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

from netapp.frer.abi import RTAG_ETHERTYPE, Algo
from netapp.frer.model import Recovery, RecoveryConfig
from tests.dataplane.test_replay import invoke
from tests.utils.kernel import require_kernel

HISTORY = 8
RESET_MS = 1000  # long beside a back-to-back replay of three frames; the timing test waits out 1.5 times this
NEVER_MS = 0  # the longer replay's stream: no timeout, so that a machine that stalls it resets nothing
SEQUENCE = [0, 0, 1, 2, 1, 5, 3, 3, 4, 6, 300, 7, 7, 8]  # copies, a gap, a late one, a rogue number
STREAM = {
    "name": "control",
    "identification": [{"ip": {"source": "10.30.0.1", "destination": "10.30.0.2", "protocol": "udp",
                               "source_port": 4000, "destination_port": 5001}}],
    "recovery": {"history_length": HISTORY, "reset_timeout_ms": RESET_MS},
}


def frame(seq: int) -> Ether:
    inner = IP(src="10.30.0.1", dst="10.30.0.2") / UDP(sport=4000, dport=5001) / Raw(b"p" * 20)
    tagged = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=RTAG_ETHERTYPE))
    return Ether(tagged + seq.to_bytes(4, "big") + (0x0800).to_bytes(2, "big") + bytes(inner))


def write_inputs(tmp_path, sequence: list[int], times: list[float], reset_ms: int = RESET_MS) -> dict:
    frames = []
    for seq, when in zip(sequence, times):
        packet = frame(seq)
        packet.time = when
        frames.append(packet)
    wrpcap(str(tmp_path / "frames.pcap"), frames, linktype=1)
    stream = {**STREAM, "recovery": {**STREAM["recovery"], "reset_timeout_ms": reset_ms}}
    (tmp_path / "streams.json").write_text(json.dumps({"streams": [stream]}))
    return {"pcap": str(tmp_path / "frames.pcap"), "streams": str(tmp_path / "streams.json")}


def replay(inputs: dict, *more: str) -> tuple[list[dict], dict]:
    result = invoke([inputs["pcap"], "--frer", inputs["streams"], "--json", *more])
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    return lines[:-1], lines[-1]



def test_each_frame_s_decision_and_the_counters_are_the_reference_model_s(tmp_path):
    require_kernel()
    inputs = write_inputs(tmp_path, SEQUENCE, [1000.0 + i * 1e-4 for i in range(len(SEQUENCE))], reset_ms=NEVER_MS)
    frames, last = replay(inputs)
    model = Recovery(RecoveryConfig(algo=Algo.VECTOR, history_len=HISTORY, reset_ns=NEVER_MS))
    decisions = [model.decide(seq, 0).name.lower() for seq in SEQUENCE]
    assert [line["frer"] for line in frames] == [
        {"stream": "control", "seq": seq, "decision": decision} for seq, decision in zip(SEQUENCE, decisions)]
    assert {"duplicate", "rogue", "out_of_order", "take_any", "in_order"} <= set(decisions)  # every kind met
    passed = [line["verdict"] for line, d in zip(frames, decisions) if d not in ("duplicate", "rogue")]
    assert set(passed) == {"PASS"}  # popped, then through the pipeline to the stack
    (counters,) = last["frer_streams"]
    assert counters == {"stream": "control", "role": "recover", **model.counters}


@pytest.mark.parametrize("timing", [True, False], ids=["timing", "back-to-back"])
def test_with_timing_a_gap_longer_than_the_reset_timeout_resets_recovery(tmp_path, timing):
    require_kernel()
    gap = 1.5 * RESET_MS / 1000
    inputs = write_inputs(tmp_path, [10, 11, 900], [1000.0, 1000.001, 1000.001 + gap])
    frames, last = replay(inputs, *(["--timing"] if timing else []))
    after_gap = frames[-1]["frer"]["decision"]
    assert after_gap == ("take_any" if timing else "rogue")
    assert last["frer_streams"][0]["resets"] == (1 if timing else 0)


def test_a_bad_stream_file_is_refused_naming_the_field(tmp_path):
    inputs = write_inputs(tmp_path, [0], [1000.0])
    (tmp_path / "streams.json").write_text(json.dumps([{**STREAM, "recovery": {"history_length": 99}}]))
    result = invoke([inputs["pcap"], "--frer", inputs["streams"]])
    assert result.exit_code == 2
    assert "streams[0].recovery.history_length" in result.stderr


def test_without_intents_or_streams_replay_says_what_it_needs(tmp_path):
    inputs = write_inputs(tmp_path, [0], [1000.0])
    result = invoke([inputs["pcap"]])
    assert result.exit_code == 2
    assert "--intents" in result.stderr and "--frer" in result.stderr
