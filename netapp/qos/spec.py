"""What a policer is asked to enforce (`PolicerSpec`), and what the settings give when the asker does
not say (`PoliceDefaults`: qos.default_algorithm, qos.default_burst_ms). Pure: the intents' compiler,
the UPF's and the appliers share it without importing the data plane."""

from __future__ import annotations

from dataclasses import dataclass

from netapp.qos.abi import BURST_MAX, Algo, Gate

MTU = 1500  # bytes: the smallest default burst is two packets of it


@dataclass(frozen=True)
class PolicerSpec:
    """What a QER (MBR, burst, gate), an intent's police option or a slice's MBR asks of a policer."""

    rate: int  # bit/s
    burst: int  # bytes
    algo: Algo = Algo.TOKEN_BUCKET
    gate: Gate = Gate.OPEN
    parent: int = 0  # the policer id a packet this one passes goes through next (a session's AMBR); 0: none


@dataclass(frozen=True)
class PoliceDefaults:
    """What a QER, an intent or a slice does not say of its policer (settings qos.default_algorithm,
    qos.default_burst_ms)."""

    algo: Algo = Algo.TOKEN_BUCKET
    burst_ms: int = 10

    @classmethod
    def of(cls, algorithm: str, burst_ms: int) -> "PoliceDefaults":
        """From the settings' names (qos.default_algorithm, qos.default_burst_ms)."""
        return cls(algo=Algo[algorithm.upper()], burst_ms=burst_ms)

    def burst(self, rate: int) -> int:
        """The default burst at `rate` bit/s: the rate over burst_ms, at least two MTUs."""
        return min(max(rate * self.burst_ms // 8000, 2 * MTU), BURST_MAX)
