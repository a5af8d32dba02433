"""A bucket seen short (dataplane/bpf/nf/qos/bucket.h, "A bucket seen short"; stamp.h, "A bucket seen
short in ns"): a token bucket's CPU keeps, in its own line of dpp_policer_stats, the time from which
the bucket may hold the packet it dropped and the room below that packet, and drops the packets
bigger than the room before that time without the bucket's lock. In the kernel (xdp_police): the
time and room as the lock left them, a packet dropped on them (the bucket's last update untouched:
the lock was not taken), a packet at that time decided on the bucket again, every decision the
reference model's."""

from __future__ import annotations

from netapp.qos.abi import Algo
from netapp.qos.model import WORD, Policer, PolicerConfig, until_stamp
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
    # the bucket emptied at 1,000 us held 100 bytes at 1,100 us, too few for 600: 600 from 1,600 us on
    assert seen == [(~599 & WORD, until_stamp(1_100 * US, 1_600 * US))]

    decided.append(police.passes(POLICER, *packets[2]))  # before 1,600 us: dropped on the line
    assert police.state(POLICER).last_ns == 1_100 * US, "the bucket was looked at: the lock was taken"
    decided.append(police.passes(POLICER, *packets[3]))  # past 1,600 us: the bucket decides
    assert police.state(POLICER).last_ns == 1_700 * US
    assert decided == [model.decide(size, now) for size, now in packets] == [True, False, False, True]
    assert police.counters(POLICER).dropped_packets == 2


def test_a_reading_behind_the_bucket_seen_short_never_passes_more(police: PoliceProgram):
    """A reading before the one the drop was decided on (a coarse reading after a precise one) finds
    no refill: dropped, as the lock, which refills nothing for it, drops it too."""
    police.configure(POLICER, CONFIG)
    assert police.passes(POLICER, 1_000, 1_000 * US)
    assert not police.passes(POLICER, 600, 1_300 * US)
    assert not police.passes(POLICER, 400, 1_200 * US)
    assert police.passes(POLICER, 300, 1_300 * US)  # what the bucket held at 1,300 us
