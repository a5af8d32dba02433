"""The COARSE policers' clock read with a load (dataplane/bpf/nf/qos/clock.h): a timer keeps the time
and the jiffies it read before it in a word (section .data.clock); a coarse policer takes the word's
time while the kernel's jiffies are the word's, and calls bpf_ktime_get_coarse_ns otherwise (a timer
late, stopped or never started). In the kernel: xdp_police, a token bucket whose last_ns says which
time it decided on, the word written by the test; the timer started by dpp_clock_start (what libdpp
runs at each load), and by libdpp itself in the pipeline."""

from __future__ import annotations

import os
import re
import subprocess
import time
from ctypes import c_uint32
from typing import Iterator

import pytest

from bench.libbpf import map_lookup, map_update
from bench.libbpf import test_run as run_once
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.handle import fdinfo
from netapp.qos.abi import CLOCK_START_KEEP, Algo, Clock, ClockTimer, ClockWord
from netapp.qos.applier import coarse_tick_ns
from netapp.qos.model import PolicerConfig
from tests.qos.police import PoliceProgram
from tests.utils.maps import pinned_instance, pipeline_map_fd

XDP_PASS = 2
KEEP_FRAME = bytes([CLOCK_START_KEEP]) + bytes(63)  # what libdpp's reopen runs dpp_clock_start on
POLICER = 7
SENTINEL = 12_345_678  # a word's time no clock reads now (ns since boot: 12 ms)
LAG_NS = 3 * coarse_tick_ns()  # the coarse clock lags by two ticks at most (police.h), one more for the test's reads
TRIES = 200  # a try is lost when the kernel's jiffies move between the test's read and the run (a tick: 1-4 ms)


def kernel_jiffies() -> int:
    """The kernel's jiffies now (the tick count bpf_jiffies64 reads)."""
    text = open("/proc/timer_list").read()
    return int(re.search(r"^jiffies: (\d+)", text, re.M).group(1))


def monotonic_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Clocked:
    """xdp_police of its own (the module's other tests' program keeps no timer), its word and timer."""

    def __init__(self) -> None:
        self.police = PoliceProgram()
        self.word_fd = self.police.obj.map_fd(".data.clock")
        self.timer_fd = self.police.obj.map_fd("dpp_clock")
        self.start_fd = self.police.obj.program_fd("dpp_clock_start")

    def write_word(self, ns: int, jiffies: int) -> None:
        map_update(self.word_fd, c_uint32(0), ClockWord(ns=ns, jiffies=jiffies))

    def word(self) -> ClockWord:
        value = ClockWord()
        map_lookup(self.word_fd, c_uint32(0), value)
        return value

    def stop_timer(self) -> None:
        """A write of dpp_clock's value from user space cancels and frees its timer."""
        map_update(self.timer_fd, c_uint32(0), ClockTimer())

    def reading(self, clock: Clock, now_ns: int = 0) -> int:
        """The time a fresh token bucket on `clock` decided one frame on (its last_ns)."""
        self.police.configure(POLICER, PolicerConfig(rate=10**9, burst=1 << 20, algo=Algo.TOKEN_BUCKET), clock=clock)
        self.police.passes(POLICER, 64, now_ns)
        return self.police.state(POLICER).last_ns


@pytest.fixture(scope="module")
def clocked() -> Iterator[Clocked]:
    program = Clocked()
    try:
        yield program
    finally:
        program.police.close()


@pytest.fixture
def stopped(clocked: Clocked) -> Clocked:
    clocked.stop_timer()
    return clocked


def a_helper_reading(reading: int, before: int) -> bool:
    """Whether `reading` is the coarse clock's, read between `before` and now: at most two ticks behind."""
    return before - LAG_NS <= reading <= monotonic_ns()


def test_a_coarse_policer_reads_the_word_while_its_jiffies_are_the_kernels(stopped):
    for _ in range(TRIES):
        before = monotonic_ns()
        stopped.write_word(SENTINEL, kernel_jiffies())
        reading = stopped.reading(Clock.COARSE)
        if reading == SENTINEL:
            return
        assert a_helper_reading(reading, before), reading  # the jiffies moved: the helper's, nothing else
    pytest.fail(f"no coarse reading in {TRIES} tries was the word's")


@pytest.mark.parametrize("ticks_behind", [1, 2, 1000])
def test_a_word_whose_jiffies_the_kernel_passed_is_not_read(stopped, ticks_behind):
    for _ in range(10):
        before = monotonic_ns()
        stopped.write_word(SENTINEL, kernel_jiffies() - ticks_behind)
        assert a_helper_reading(stopped.reading(Clock.COARSE), before)


def test_a_word_never_written_is_not_read(stopped):
    stopped.write_word(0, 0)
    before = monotonic_ns()

    reading = stopped.reading(Clock.COARSE)

    assert reading and a_helper_reading(reading, before)


def test_a_precise_policer_never_reads_the_word(stopped):
    for _ in range(10):
        stopped.write_word(SENTINEL, kernel_jiffies())
        before = monotonic_ns()
        reading = stopped.reading(Clock.PRECISE)
        assert before <= reading <= monotonic_ns()


def test_a_time_given_in_the_frame_wins_over_the_word(stopped):
    stopped.write_word(SENTINEL, kernel_jiffies())

    assert stopped.reading(Clock.COARSE, now_ns=SENTINEL * 3) == SENTINEL * 3


def words_seen(read, count: int, timeout_s: float = 5.0) -> list[ClockWord]:
    """The first `count` distinct words `read` returns (a running timer writes one every 250 us)."""
    seen: list[ClockWord] = []
    deadline = time.monotonic() + timeout_s
    while len(seen) < count and time.monotonic() < deadline:
        word = read()
        if not seen or (word.ns, word.jiffies) != (seen[-1].ns, seen[-1].jiffies):
            seen.append(word)
    return seen


def assert_kept_by_a_timer(seen: list[ClockWord], count: int) -> None:
    """Words a running timer wrote: as many as asked, times growing and each at most a few ticks old,
    jiffies the kernel's (never ahead of them)."""
    assert len(seen) == count, f"the word changed {len(seen)} times, not {count}: no timer keeps it"
    assert all(a.ns < b.ns and a.jiffies <= b.jiffies for a, b in zip(seen, seen[1:]))
    assert monotonic_ns() - seen[-1].ns < 10**9 and 0 < seen[-1].jiffies <= kernel_jiffies()


def test_dpp_clock_start_starts_the_timer_that_keeps_the_word_and_restarts_it(stopped):
    stopped.write_word(0, 0)

    assert run_once(stopped.start_fd, bytes(64), 1).retval == XDP_PASS
    assert_kept_by_a_timer(words_seen(stopped.word, 5), 5)
    assert run_once(stopped.start_fd, bytes(64), 1).retval == XDP_PASS  # running already: started again
    assert_kept_by_a_timer(words_seen(stopped.word, 5), 5)


def wait_for_ticks(jiffies: int, ticks: int) -> None:
    """Until the kernel's jiffies are `ticks` past `jiffies` (polled: the condition is the kernel's)."""
    while kernel_jiffies() < jiffies + ticks:
        time.sleep(0.001)


def test_a_stopped_timer_writes_no_more_and_leaves_its_word_to_the_helper(clocked):
    assert run_once(clocked.start_fd, bytes(64), 1).retval == XDP_PASS
    assert words_seen(clocked.word, 2)
    clocked.stop_timer()
    last = clocked.word()
    # Three ticks: a running timer writes a word of each, and the coarse clock, whose grid may lag
    # the jiffies' by up to a tick, is past the last word's time (until then the word is read).
    wait_for_ticks(last.jiffies, 3)

    before = monotonic_ns()
    reading = clocked.reading(Clock.COARSE)

    now = clocked.word()
    assert (now.ns, now.jiffies) == (last.ns, last.jiffies)
    assert reading != last.ns and a_helper_reading(reading, before)


def test_the_coarse_clock_never_goes_back_from_the_word_to_the_helper(stopped):
    for _ in range(20):
        written = monotonic_ns()  # a time the coarse clock's helper is behind, by up to a tick
        stopped.write_word(written, kernel_jiffies() - 1)  # the word of the tick before

        assert stopped.reading(Clock.COARSE) >= written


def test_the_timer_stores_its_time_before_its_jiffies_in_the_program_the_kernel_runs(clocked):
    """A reader that sees a run's jiffies must see its time (clock.h's "Order"). A pair torn the other
    way lasts nanoseconds a run and no reading catches it, so the order is read off the program as
    the verifier left it: the callback's two stores into the word, the time's first."""
    prog_id = fdinfo(clocked.start_fd)["prog_id"]
    dump = subprocess.check_output(["bpftool", "prog", "dump", "xlated", "id", str(prog_id)], text=True)
    callback = dump[dump.index("int clock_timer_run("):]

    stores = [int(offset) for offset in re.findall(r"\*\(u64 \*\)\(r\d+ \+(\d+)\) = r\d+", callback)]

    assert stores == [ClockWord.ns.offset, ClockWord.jiffies.offset], callback


def pipeline_word_fd(dp: Dataplane) -> int:
    return pipeline_map_fd(dp, ".data.clock")


def test_libdpp_starts_the_pipeline_s_timer_at_load():
    with Dataplane.open() as dp:
        fd = pipeline_word_fd(dp)
        try:
            assert_kept_by_a_timer(words_seen(word_reader(fd), 5), 5)
        finally:
            os.close(fd)


def word_reader(fd: int):
    def read() -> ClockWord:
        value = ClockWord()
        map_lookup(fd, c_uint32(0), value)
        return value

    return read


def test_a_pinned_instance_s_timer_outlives_its_handle_and_a_reload_hands_it_to_the_new_programs():
    with pinned_instance("clock") as instance:
        with Dataplane.open(instance=instance) as dp:
            first = pipeline_word_fd(dp)
        try:
            assert_kept_by_a_timer(words_seen(word_reader(first), 5), 5)  # the pin keeps the timer
            with Dataplane.open(instance=instance) as dp:
                dp.reload()
                second = pipeline_word_fd(dp)
            try:
                assert_kept_by_a_timer(words_seen(word_reader(second), 5), 5)  # the new load's word
                stopped_at = word_reader(first)()
                assert words_seen(word_reader(first), 2, timeout_s=0.05)[-1].ns == stopped_at.ns
            finally:
                os.close(second)
        finally:
            os.close(first)


def test_a_late_starter_of_a_replaced_load_leaves_the_new_load_its_word():
    """A reopen whose programs were collected before an upgrade moved the pins runs the replaced
    load's starter after the upgrade's: asking to keep a running timer, it leaves it the new load's."""
    with pinned_instance("clockrace") as instance:
        with Dataplane.open(instance=instance):
            pass
        with Dataplane.open(instance=instance) as late:
            old_start = os.dup(late.program_fd("dpp_clock_start"))
        try:
            with Dataplane.open(instance=instance) as dp:
                dp.reload()
                new_word = pipeline_word_fd(dp)
            try:
                assert run_once(old_start, KEEP_FRAME, 1).retval == XDP_PASS  # the reopen's start, late
                assert_kept_by_a_timer(words_seen(word_reader(new_word), 5), 5)
            finally:
                os.close(new_word)
        finally:
            os.close(old_start)


def test_a_reopen_restarts_a_stopped_timer():
    with pinned_instance("clockreopen") as instance:
        with Dataplane.open(instance=instance) as dp:
            word, timer = pipeline_word_fd(dp), pipeline_map_fd(dp, "dpp_clock")
        try:
            map_update(timer, c_uint32(0), ClockTimer())  # cancelled, as a write of the value does
            last = word_reader(word)()
            wait_for_ticks(last.jiffies, 2)
            assert word_reader(word)().ns == last.ns  # stopped

            with Dataplane.open(instance=instance):
                pass

            assert_kept_by_a_timer(words_seen(word_reader(word), 5), 5)
        finally:
            os.close(word)
            os.close(timer)


def clock_status_once(dp: Dataplane, state: str, timeout_s: float = 5.0) -> dict:
    """The data plane's clock status, read again until it says `state` or the timeout passes (then
    the last read): the timer's callback is a soft hrtimer, which a loaded machine may run a few
    ticks late, so one read of a running clock may find its word two ticks old."""
    deadline = time.monotonic() + timeout_s
    status = dp.status()["clock"]
    while status["state"] != state and time.monotonic() < deadline:
        time.sleep(0.001)  # the CPU left to the timer's softirq
        status = dp.status()["clock"]
    return status


def test_the_dataplane_status_shows_the_clock_running_then_stopped():
    with Dataplane.open() as dp:
        running = clock_status_once(dp, "running")
        word, timer = pipeline_word_fd(dp), pipeline_map_fd(dp, "dpp_clock")
        try:
            map_update(timer, c_uint32(0), ClockTimer())  # cancelled, as a write of the value does
            last = word_reader(word)()
            wait_for_ticks(last.jiffies, 4)  # the word two ticks old, whatever the grids' phase
            stopped = dp.status()["clock"]
        finally:
            os.close(word)
            os.close(timer)

    assert running["state"] == "running" and 0 <= running["word_age_us"] < 2 * coarse_tick_ns() // 1000, running
    assert stopped["state"] == "stopped" and stopped["word_age_us"] >= 2 * coarse_tick_ns() // 1000, stopped
