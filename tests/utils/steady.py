"""A steady numbered flow for tests under live traffic: frames paced by the clock, each carrying its
sequence number, so a receiver can tell exactly which were lost or duplicated."""

from __future__ import annotations

import threading
import time

from netapp.testbed.traffic import Sender

TICK_S = 0.01  # one burst per tick: ~30 frames at 3000 pps, far from filling the veth ring (256)
MAX_BURST = 128
SEQ_BYTES = 4


class SteadyFlow(threading.Thread):
    """Sends numbered copies of `template` (its last SEQ_BYTES hold the number) at `rate_pps` until
    stopped; `sent` frames 0..sent-1."""

    def __init__(self, ns: str, ifname: str, template: bytes, rate_pps: int):
        super().__init__(name="steady-flow", daemon=True)
        self.sender = Sender(ns, ifname)
        self.rate_pps = rate_pps
        self.head = template[:-SEQ_BYTES]
        self.sent = 0
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        try:
            while not self._halt.is_set():
                # Paced by the clock: a late tick (busy cores) sends what is due, capped so that a
                # long stall does not become one burst larger than the veth ring.
                due = min(int((time.monotonic() - started) * self.rate_pps) - self.sent, MAX_BURST)
                if due > 0:
                    self.sender.send([self._frame(self.sent + i) for i in range(due)])
                    self.sent += due
                time.sleep(TICK_S)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def _frame(self, number: int) -> bytes:
        return self.head + number.to_bytes(SEQ_BYTES, "big")

    def stop(self) -> int:
        self._halt.set()
        self.join()
        self.sender.close()
        assert self.error is None, f"the sender failed: {self.error!r}"
        return self.sent
