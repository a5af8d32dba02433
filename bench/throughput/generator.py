"""The traffic generator: dpp-pktgen's mixed mode (-m), one live-frame run per trial carrying all
flows interleaved, paced by the generator program (dataplane/bpf/xdp_gen.bpf.c) in the kernel.

The run is started from the RAN-side namespace on one CPU. What it reports decides whether a trial
counts: the frames it sent per flow, and the rate it achieved (frames over the time from the first
frame to the last) against the rate asked for.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_BATCH = 16
DEFAULT_SLACK_US = 100


class GeneratorError(RuntimeError):
    """dpp-pktgen failed; the message holds its command line and stderr."""


@dataclass(frozen=True)
class Sent:
    """What one run sent."""

    per_flow: tuple[int, ...]
    target_pps: float  # 0: unpaced
    achieved_pps: float  # frames - 1 over the time from the first frame to the last
    seconds: float  # the run's wall time, set-up included
    slips: int  # times the schedule slipped because the generator was behind by more than the slack
    slipped_us: float
    max_late_us: float
    batch: int
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def frames(self) -> int:
        return sum(self.per_flow)

    def held(self, tolerance: float) -> bool:
        """Did the generator offer the rate asked for, within `tolerance` (a fraction)?"""
        return self.target_pps <= 0 or self.achieved_pps >= self.target_pps * (1.0 - tolerance)


@dataclass
class Generator:
    """Runs of `pktgen` (the dpp-pktgen binary) from namespace `ns` out of `ifname`, on `cpu`."""

    pktgen: Path
    ns: str
    ifname: str
    cpu: int = 0
    batch: int = DEFAULT_BATCH
    slack_us: int = DEFAULT_SLACK_US
    spread: int = 1  # flows per pcap frame: the UE source port of frame k advances by (k / 16) % spread
    spread_offset: int = 0  # where that port sits in the frame
    checksums: tuple[int, ...] = ()  # offsets of the checksums covering that number (-C), kept valid

    def command(self, pcap: Path, frames: int, pps: float) -> list[str]:
        spread = ["-s", str(self.spread), "-S", str(self.spread_offset)] if self.spread > 1 else []
        spread += [arg for offset in self.checksums for arg in ("-C", str(offset))] if spread else []
        return [
            "ip", "netns", "exec", self.ns, str(self.pktgen), "-i", self.ifname, "-r", str(pcap), "-m",
            "-n", str(frames), "-p", f"{pps:.0f}", "-b", str(self.batch), "-c", str(self.cpu),
            "-L", str(self.slack_us), *spread,
        ]  # fmt: skip

    def send(self, pcap: Path, frames: int, pps: float, timeout: float | None = None) -> Sent:
        """Send `frames` frames of the flows in `pcap` at `pps` (0: as fast as it can)."""
        cmd = self.command(pcap, frames, pps)
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise GeneratorError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.stdout.strip()}")
        return parse_output(proc.stdout)


def parse_output(text: str) -> Sent:
    raw = json.loads(text)
    return Sent(
        per_flow=tuple(int(n) for n in raw["per_flow"]),
        target_pps=float(raw["target_pps"]),
        achieved_pps=float(raw["paced_pps"]),
        seconds=float(raw["seconds"]),
        slips=int(raw["slips"]),
        slipped_us=float(raw["slipped_us"]),
        max_late_us=float(raw["max_late_us"]),
        batch=int(raw["batch"]),
        raw=raw,
    )
