"""A bucket seen short (dataplane/bpf/nf/qos/bucket.h, "A bucket seen short"): a token bucket's CPU
keeps, in its own line of dpp_policer_stats, what the bucket held when its packet was dropped, and
drops the packets that bound shows too big without the bucket's lock. In the kernel (xdp_police):
the bound as the lock left it, a packet dropped on it (the bucket's last update untouched: the lock
was not taken), a packet the refill since covers decided on the bucket again, every decision the
reference model's."""

from __future__ import annotations

from netapp.qos.abi import Algo
from netapp.qos.applier import NANOBITS_PER_BYTE
from netapp.qos.model import Policer, PolicerConfig
from tests.qos.police import PoliceProgram

POLICER = 21
# 8 Mb/s: a byte a microsecond; a bucket of 1,000 bytes, full at the first packet (1 ms from 0)
CONFIG = PolicerConfig(rate=8_000_000, burst=1_000, algo=Algo.TOKEN_BUCKET)
US = 1_000


def test_a_drop_leaves_the_bucket_seen_short_and_the_next_short_packets_are_dropped_without_the_lock(
        police: PoliceProgram):
    police.configure(POLICER, CONFIG)
    model = Policer(CONFIG)
    packets = [(1_000, 1_000 * US), (600, 1_100 * US), (600, 1_200 * US), (600, 1_700 * US)]
    decided = []
    for size, now in packets[:2]:
        decided.append(police.passes(POLICER, size, now))
    line = police.per_cpu(POLICER)
    seen = [(cpu.short_credit, cpu.stamp) for cpu in line if cpu.stamp]
    # the bucket emptied at 1,000 us held 100 bytes at 1,100 us, too few for 600
    assert seen == [(100 * NANOBITS_PER_BYTE, 1_100 * US)]

    decided.append(police.passes(POLICER, *packets[2]))  # 200 bytes by the bound: dropped on it
    assert police.state(POLICER).last_ns == 1_100 * US, "the bucket was looked at: the lock was taken"
    decided.append(police.passes(POLICER, *packets[3]))  # 700 bytes by then: the bucket decides
    assert police.state(POLICER).last_ns == 1_700 * US
    assert decided == [model.decide(size, now) for size, now in packets] == [True, False, False, True]
    assert police.counters(POLICER).dropped_packets == 2


def test_a_reading_behind_the_bucket_seen_short_never_passes_more(police: PoliceProgram):
    """A reading before the one the bound was taken at (a coarse reading after a precise one) finds
    no refill: dropped, as the lock, which refills nothing for it, drops it too."""
    police.configure(POLICER, CONFIG)
    assert police.passes(POLICER, 1_000, 1_000 * US)
    assert not police.passes(POLICER, 600, 1_300 * US)
    assert not police.passes(POLICER, 400, 1_200 * US)
    assert police.passes(POLICER, 300, 1_300 * US)  # what the bucket held at 1,300 us
