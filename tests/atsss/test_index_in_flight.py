"""A session moved from the hash into a way of the index while its packets flow (netapp.atsss.index,
5.): the UE's downlink run by two threads on one CPU (test_changes_in_flight's Flow, the harness
putting the original packet back before every repetition) while the control plane, on another
thread, deletes a session of the UE's full bucket, which moves the UE's session from the hash into
the way freed. Two threads, because a run holds off the kernel's wait for the programs' runs (an
RCU read-side section) and the move waits before it reads the hash's counter: one thread's runs
would then be between two runs (tens of milliseconds of the kernel's setup) whenever the move reads
and publishes; the other's go on meanwhile. Every packet is sent (XDP_TX) and counted by the UE's path, before, during and after
the move; the numbers the hash gave (its counter as the move deleted it) and those the way gave
(from where it began) are as many as the packets, and the hash's end where the way's begin or
before: each number given once. Several rounds, each a move of its own; the verdict does not depend
on timing (with MP_SEQ_SKIP 0 the way's numbers begin where the hash's counter was read, and a
packet between the read and the way's publication has its number given again)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from bench.harness import Walk
from netapp.atsss.abi import INDEX4_WAYS
from tests.atsss.atsss import XDP_TX, ethernet, session_key, ue_packet
from tests.atsss.test_changes_in_flight import PAYLOAD_AT, UE_AT, Flow, harness  # noqa: F401  (a fixture)
from tests.atsss.test_index import POOL, index, put, same_bucket  # noqa: F401  (a fixture)
from tests.utils.dataplane import two_cpus

ROUNDS = 8
CHUNK = 100_000  # repetitions of one run of a packet thread
FLOWS = 2


class Spy:
    """What the index wrote into dpp_atsss_slots (the MP_SEQ counter of each value) and what
    dpp_atsss_sessions held of the keys it deleted, read just before (their counters, final)."""

    def __init__(self, index: Any, monkeypatch: pytest.MonkeyPatch):
        self.written: list[int] = []
        self.deleted: dict[bytes, int] = {}
        monkeypatch.setattr(index.slots, "update", self._wrap(index.slots.update, self._update))
        monkeypatch.setattr(index.hash, "delete", self._wrap(index.hash.delete, self._delete(index.hash)))

    @staticmethod
    def _wrap(call: Callable, before: Callable) -> Callable:
        def spied(entries: Any, *args: Any) -> Any:
            entries = list(entries)
            before(entries)
            return call(entries, *args)

        return spied

    def _update(self, entries: list) -> None:
        self.written += [value.mp_seq for _, value in entries]

    def _delete(self, hash_table: Any) -> Callable:
        def record(keys: list) -> None:
            for key, value in zip(keys, hash_table.lookup(keys)):
                if value is not None:
                    self.deleted[bytes(key)] = value.mp_seq

        return record


def test_a_session_moved_into_a_way_while_its_packets_flow_loses_none_and_gives_no_number_twice(
        atsss, index, harness, monkeypatch):  # noqa: F811
    cpu = two_cpus()[0]
    spy = Spy(index, monkeypatch)
    for n in range(ROUNDS):
        ues = same_bucket(str(POOL[100 + n]), INDEX4_WAYS + 1)
        put(atsss, index, ues)
        moving = session_key(ues[-1])
        assert index.slot(moving) is None, "the eighth session starts in the hash"
        slot = INDEX4_WAYS + 1  # its path's (put: UE n on slot n + 1)
        before = atsss.sent(slot)[0]
        frame = ethernet(ue_packet(ues[-1], bytes(64)))
        address = int.from_bytes(bytes(map(int, ues[-1].split("."))), "big")
        harness.set_walk(Walk(1, teid_base=0, src_base=address, teid_off=PAYLOAD_AT, src_off=UE_AT))
        harness.set_target(atsss.prog)
        harness.set_packet(frame)
        flows = [Flow(harness.walk_head_fd, frame, cpu, CHUNK) for _ in range(FLOWS)]
        for flow in flows:
            flow.start()
        try:
            assert all(flow.started.wait(timeout=30) for flow in flows)
            spy.written.clear()
            index.delete([session_key(ues[0])])
        finally:
            for flow in flows:
                flow.stop.set()
                flow.join()
        verdict, _ = atsss.run(frame)  # one more, after the move
        sent = sum(flow.sent for flow in flows) + 1
        assert set().union(*(flow.verdicts for flow in flows), {verdict}) == {XDP_TX}, "every packet sent"
        assert index.slot(moving) is not None and index.hash.get(moving) is None, "moved into the way freed"
        assert atsss.sent(slot)[0] - before == sent, "every packet sent on the UE's path"
        first, last = spy.written[-1], spy.deleted[bytes(moving)]
        now = index.get(moving).mp_seq
        assert last <= first, f"MP_SEQ {first}..{last - 1} given by the hash and again by the way"
        assert last + (now - first) == sent, "a number per packet, from the hash then from the way"
        index.delete([key for key, _ in list(index.items())])
